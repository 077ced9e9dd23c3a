"""The speed targets of the blocked kernels, the body alone against the FMA peak, and the host.

What ``python -m tilegemm bench --targets`` measures for the blocked kernels
(``tilegemm.kernels.blocked``), and ``bench --host`` / ``bench --body`` print:

- :func:`speed_targets`: each target as a ratio timed side by side in this process (the median of
  alternating repetitions), its goal, whether it holds, and which body and paths ran;
- :func:`body_report`: every fast body of this host's table row alone, operands in L1, in
  GFLOP/s (GOP/s for INT8) against the core's peak: vector FMA instructions per cycle and lanes
  from the table row, times the clock, which :func:`clock_ghz` measures with a chain of dependent
  integer additions (one per cycle on every x86 core), so that turbo and a hypervisor's nominal
  figure do not enter;
- :func:`peak_memory`: the extra memory of one call at its peak, in a child process (Linux: the
  resident high-water mark, reset just before the call), against the operands' own bytes;
- :func:`host_line`: the CPU, LLVM's name for it, the table row its kernels come from.

Nothing here runs at import; numpy's BLAS is limited with threadpoolctl where a row says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from . import dispatch, plan
from .api import matmul
from .instructions import DEFAULT_ISA, resolve
from .packing import pack

__all__ = [
    "Row",
    "speed_targets",
    "body_report",
    "clock_ghz",
    "peak_memory",
    "fma_peak_gflops",
    "host_line",
    "median_ratio",
]


@dataclass
class Row:
    """One measured target: what, the ratio, the goal, whether it holds, which body and paths ran."""

    what: str
    ratio: float
    goal: str
    met: bool
    ran: str = ""
    samples: list = field(default_factory=list)

    def line(self) -> str:
        return f"{'ok  ' if self.met else 'MISS'} {self.what}: {self.ratio:.2f} ({self.goal}){_ran(self.ran)}"


def _ran(ran: str) -> str:
    return f"  [{ran}]" if ran else ""


def median_ratio(fast: Callable, slow: Callable, repeats: int = 7, inner: int = 1) -> tuple[float, list[float]]:
    """Median over ``repeats`` of time(slow) / time(fast), timed back to back, alternating which
    goes first (after one untimed call of each)."""
    fast()
    slow()
    ratios = []
    for i in range(repeats):
        order = (slow, fast) if i % 2 == 0 else (fast, slow)
        took = {}
        for f in order:
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
            took[f] = time.perf_counter() - t0
        ratios.append(took[slow] / took[fast])
    return statistics.median(ratios), ratios


def _values(dtype: str, shape: tuple[int, int], rng: np.random.Generator, isa: str = DEFAULT_ISA) -> np.ndarray:
    """Random values a caller passes: float32 holding values already in the format (so that every
    contender multiplies the same numbers), or the integers themselves."""
    instr = resolve(isa, dtype)[2]
    x = instr.a.sample(shape, rng)
    return instr.a.decode(instr.a.to_codes(x, "a", dtype)) if instr.is_float else x


@contextlib.contextmanager
def _spinning() -> Iterator[None]:
    """Another process spinning on one core inside the block (``python -c "while True: pass"``),
    running before the block starts."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        spin.kill()
        spin.wait()


def _ran_of(f: Callable) -> str:
    """The kernel and paths one call of ``f`` runs."""
    with plan.recording() as r:
        f()
    return r.describe()


# --------------------------------------------------------------------------------------------
# The clock, the peak, the body alone
# --------------------------------------------------------------------------------------------


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")


@contextlib.contextmanager
def _one_thread_blas():
    from threadpoolctl import threadpool_limits

    # BLAS only: Numba's OpenMP threading layer is an OpenMP pool too, and limiting every pool to
    # one thread would run tilegemm's "2 threads" on one.
    with threadpool_limits(1, user_api="blas"):
        yield


def clock_ghz(repeats: int = 5) -> float | None:
    """The core's clock while busy, in GHz: a chain of dependent integer additions runs one per
    cycle on every x86 core. None on other CPUs."""
    if not _x86():
        return None
    chain = _clock_chain()
    chain(1000)
    best = float("inf")
    n = 2_000_000
    for _ in range(repeats):
        t0 = time.perf_counter()
        chain(n)
        best = min(best, time.perf_counter() - t0)
    return 100 * n / best / 1e9


def fma_peak_gflops() -> float | None:
    """One core's binary32 FMA peak in GFLOP/s: the target table row's FMA instructions per cycle
    x lanes x 2 x the measured clock. None where either is unknown (no table row, or a CPU whose
    clock is not measured)."""
    from .kernels import targets

    entry = targets.plan()
    ghz = clock_ghz(3) if entry is not None else None
    return entry.fma_units * entry.fma_width * 2 * ghz if entry is not None and ghz else None


def _clock_chain():
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba import njit, types
    from numba.extending import intrinsic

    llvm.initialize_native_asmparser()  # the JIT emits the inline assembly below

    @intrinsic
    def adds(typingctx, x):
        def codegen(context, builder, signature, args):
            ft = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
            return builder.asm(ft, "addq $$1, $0\n" * 100, "=r,0", [args[0]], side_effect=True)

        return types.int64(types.int64), codegen

    @njit
    def chain(n):
        x = 0
        for _ in range(n):
            x = adds(x)
        return x

    return chain


@dataclass
class BodyRate:
    """One body alone: family, shape, rate (GFLOP/s or GOP/s), the peak it is measured against."""

    family: str
    body: str
    rate: float
    peak: float | None

    def line(self) -> str:
        share = f", {self.rate / self.peak:.0%} of the peak {self.peak:.1f}" if self.peak else ""
        return f"{self.family:10} {self.body:12} {self.rate:7.1f} G(FL)OP/s{share}"


def _best_time(loop: Callable, args: tuple, reps: int, repeats: int = 7) -> float:
    """The shortest of ``repeats`` timings of ``loop(*args, reps)``, after one call that compiles
    it and warms the caches."""
    loop(*args, 1)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        loop(*args, reps)
        best = min(best, time.perf_counter() - t0)
    return best


def body_report(report: Callable[[str], None] = print, steps: int = 8) -> list[BodyRate]:
    """Every fast body of this host's table row alone, ``steps`` K steps per call over operands
    that stay in L1, against the peak (vector FMA instructions per cycle x lanes x 2 x clock;
    INT8: one dot product instruction per FMA unit per cycle, 4 multiply-adds per lane for
    VPDPBUSD, 2 for VPMADDWD; the binary64 bodies of AMX-FP8 and ACE MX: half the float32
    lanes; TDPBF16PS on VDPBF16PS, where the target has it: two multiply-adds per lane, one
    instruction per FMA unit per cycle, so twice the FMA peak)."""
    from numba import njit

    from .kernels import blocked, targets

    entry = blocked.PLAN
    if entry is None:
        report("body: this target has no row in the per-target table (the superblock loop runs)")
        return []
    ghz = clock_ghz()
    fpeak = entry.fma_units * entry.fma_width * 2 * ghz if ghz else None
    macs = 4 if entry.int_kind == "vnni" else 2
    ipeak = fpeak * macs if fpeak else None
    clock = f"{ghz:.2f} GHz measured by a chain of dependent adds" if ghz else "clock unknown"
    units = f"{entry.fma_units} x {entry.fma_width}-lane FMA per cycle"
    report(f"# bodies alone (operands in L1), {entry.name}: {units}, {clock}")
    out = []
    cases = [(name, "fma") for name in ("pairs_bf16", "pairs_fp16", "dot", "quads")]
    cases += [(name, e) for e in targets.engines() for name in ("pairs_bf16", "dot")]
    for name, engine in cases:
        body, fn, kind = blocked.fast_body(name, engine)
        rows, cols = body.rows, body.cols
        tiles = max(1, cols // 16)
        rng = np.random.default_rng(0)
        if kind == "int":
            A = rng.integers(0, 256, rows * 64 * steps).astype(np.uint8 if entry.int_kind == "vnni" else np.int16)
            B = rng.integers(0, 256, tiles * steps * 1024).astype(np.uint8)
            C = np.zeros(rows * cols, np.int32)

            @njit
            def loop(A, B, C, reps, fn=fn):
                for _ in range(reps):
                    fn(A, 0, 64 * steps, B, 0, steps * 1024, 1024, C, 0, cols, steps)

        elif kind == "chain":  # A and B as chain dwords (two BF16 values near 1 each)
            A = rng.integers(0x3F003F00, 0x3F803F80, rows * 16 * steps).astype(np.uint32)
            B = rng.integers(0x3F003F00, 0x3F803F80, tiles * steps * 256).astype(np.uint32)
            C = np.zeros(rows * cols, np.float32)

            @njit
            def loop(A, B, C, reps, fn=fn):
                for _ in range(reps):
                    fn(A, 0, 16 * steps, B, 0, steps * 256, 256, C, 0, cols, steps, 16)

        else:
            A = rng.standard_normal(rows * 32 * steps).astype(np.float32)
            B = rng.integers(0x3F003F00, 0x3F803F80, tiles * steps * 256).astype(np.uint32)  # pairs near 1
            C = np.zeros(rows * cols, np.float32)

            @njit
            def loop(A, B, C, reps, fn=fn):
                for _ in range(reps):
                    fn(A, 0, 32 * steps, B, 0, steps * 256, 256, C, 0, cols, steps, 16)

        reps = 2000
        best = _best_time(loop, (A, B, C), reps)
        per_call = 2 * rows * cols * steps * (64 if kind == "int" else 32)
        rate = per_call * reps / best / 1e9
        peak = ipeak if kind == "int" else (2 * fpeak if fpeak and kind == "chain" else fpeak)
        r = BodyRate(name if engine == "fma" else f"{name} {engine}", f"{body} {kind}", rate, peak)
        report(r.line())
        out.append(r)
    for r in _binary64_bodies(steps, fpeak / 2 if fpeak else None) + _fp8c_bodies(steps, fpeak) + [_mx32c_body(fpeak)]:
        report(r.line())
        out.append(r)
    return out


def _fp8c_bodies(steps: int, peak: float | None, reps: int = 2000) -> list[BodyRate]:
    """AMX-FP8's binary32 body (layout ``"fp8_32"``) alone over one 16-row tile and ``steps`` K
    steps in L1, against the binary32 FMA peak: on small integers, where every step's chains are
    exact, and (``fp8c redo``) with one 2^-16 in every row of every step, which makes every chain
    round, so that every step runs again in binary64 (the worst case, both sums)."""
    from numba import njit

    from .kernels import targets, tiles

    rows = targets.shape("fp8c").rows
    body = tiles.fp8c_body

    @njit
    def loop(A, B, C, reps):
        for _ in range(reps):
            for m in range(0, 16, rows):
                body(A, m * 64, 64, B, 0, C, m * 16, 16, steps, 1024, 1024)

    rng = np.random.default_rng(0)
    out = []
    for name in ("fp8c", "fp8c redo"):
        A = rng.integers(-8, 8, (steps, 16, 64)).astype(np.float32)
        B = rng.integers(-8, 8, (steps, 64, 16)).astype(np.float32)
        if name == "fp8c redo":
            A[:, :, 0] = 2.0**-16  # times an integer b, below the last bit of any partial sum >= 2^8
            A[:, :, 1:] *= 8
        C = np.zeros(256, np.float32)
        best = _best_time(loop, (A.ravel(), B.ravel(), C), reps)
        out.append(BodyRate(name, f"{rows}x16 float", 2 * 16 * 16 * 64 * steps * reps / best / 1e9, peak))
    return out


def _mx32c_body(peak: float | None, reps: int = 2000) -> BodyRate:
    """ACE MX FP8's binary32 body (layout ``"mx32c"``) alone over one 16-row tile and a block of 16
    outer products in L1, every step's bounds allowing binary32, against the binary32 FMA peak."""
    from numba import njit

    from .kernels import ace, targets

    shp = targets.shape("ace_mx32c")
    body, rows = ace.mx32c_body, shp.rows

    @njit
    def loop(A, B, C, reps):
        for _ in range(reps):
            for m in range(0, 16, rows):
                body(A, m * 80, 80, B, 0, C, m * 16, 16, 16)

    rng = np.random.default_rng(0)
    A = np.zeros((16, 80), np.float32)
    A[:, :64] = rng.integers(-8, 8, (16, 64))  # small integers: bounds of at most 32 x 8
    A[:, 64:] = 32.0
    B = np.zeros((65, 16), np.float32)
    B[:64] = rng.integers(-8, 8, (64, 16))
    B[64] = 8.0
    C = np.zeros(256, np.float32)
    best = _best_time(loop, (A.ravel(), B.ravel(), C), reps)
    return BodyRate("ace_mx32c", f"{rows}x16 float", 2 * 16 * 16 * 64 * reps / best / 1e9, peak)


def _binary64_bodies(steps: int, peak: float | None, reps: int = 2000) -> list[BodyRate]:
    """The bodies that sum 8-bit-float products exactly in binary64 (AMX-FP8: ``steps`` K steps
    of 64 products, each rounded into C, in one call where the body holds C in registers, else
    one call per step; ACE MX: ``4 * steps`` outer products of 4 products, at most a block's 16,
    rounded into C after each), alone over one 16-row tile in L1, against the binary64 FMA
    peak."""
    from numba import njit

    from .kernels import ace, fp8, targets

    f8, mx = targets.shape("fp8quads"), targets.shape("ace_mx")
    f8_body = fp8.fp8_steps_rows(f8.rows, f8.width) if f8.hold_c else fp8.fp8_tile_rows(f8.rows, f8.width)
    mx_body = ace.mx_tile_rows(mx.rows, mx.width)
    mx_steps = min(4 * steps, 16)  # a block of ACE MX has at most 16 outer products
    f8_rows, mx_rows = f8.rows, mx.rows

    if f8.hold_c:  # one call runs the steps, C in registers

        @njit
        def fp8_loop(A, B, C, reps):
            for _ in range(reps):
                for m in range(0, 16, f8_rows):
                    f8_body(A, m * 64, 64, B, 0, C, m * 16, 16, steps, 1024, 1024)

    else:

        @njit
        def fp8_loop(A, B, C, reps):
            for _ in range(reps):
                for m in range(0, 16, f8_rows):
                    for t in range(steps):
                        f8_body(A, t * 1024 + m * 64, 64, B, t * 1024, C, m * 16, 16)

    @njit
    def mx_loop(A, B, C, reps):
        for _ in range(reps):
            for m in range(0, 16, mx_rows):
                mx_body(A, m * 4 * mx_steps, 4 * mx_steps, B, 0, C, m * 16, 16, mx_steps)

    rng = np.random.default_rng(0)
    out = []
    for name, shp, loop, k in (("fp8", f8, fp8_loop, 64 * steps), ("ace_mx", mx, mx_loop, 4 * mx_steps)):
        A = rng.integers(-8, 8, 16 * k).astype(np.float64)  # small integers: every sum exact
        B = rng.integers(-8, 8, k * 16).astype(np.float64)
        C = np.zeros(256, np.float32)
        best = _best_time(loop, (A, B, C), reps)
        rate = 2 * 16 * 16 * k * reps / best / 1e9
        out.append(BodyRate(name, f"{shp.rows}x16 double", rate, peak))
    return out


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------

_MEMORY_CHILD = r"""
import json, os, resource, sys
import numpy as np, tilegemm
m, k, n, packed, dtype = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
inst = tilegemm.instructions.resolve("amx", dtype)[2]
a, b = inst.sample(m, k, n, rng)
small = inst.sample(3, 33, 17, rng)
tilegemm.matmul(small[0], tilegemm.pack(small[1], dtype) if packed else small[1], dtype)  # compile first
b_in = tilegemm.pack(b, dtype) if packed else b
own = a.nbytes + (b_in.data.nbytes if packed else b.nbytes)

def rss():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024

before, _ = rss()
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the high-water mark to the current RSS
except OSError:
    pass
out = tilegemm.matmul(a, b_in, dtype)
_, peak = rss()
print(json.dumps({"extra": peak - before, "own": own, "out": out.nbytes}))
"""


def peak_memory(m: int, k: int, n: int, packed: bool, dtype: str = "bf16") -> dict:
    """Extra memory at the peak of one call in a fresh child process (resident high-water mark,
    Linux), beside the operands' own bytes: A as passed and B as passed (the PackedB's data when
    ``packed``; it is made fresh, so the call makes its tables). The result counts as extra.
    glibc is told to map large blocks afresh (``MALLOC_MMAP_THRESHOLD_``), so that memory reused
    from earlier frees does not hide an allocation."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, json.dumps([m, k, n, packed, dtype])],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# The host
# --------------------------------------------------------------------------------------------


def host_line() -> str:
    """One line naming the host: CPU model, LLVM's name for it, the table row (or target class)
    its kernels come from, cores, and the measured clock."""
    import llvmlite.binding as llvm

    from .kernels import targets

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    entry = targets.plan()
    row = f"table row {entry.name}" if entry is not None else f"no table row, class {targets.target_class()}"
    ghz = clock_ghz(3)
    clock = f", {ghz:.2f} GHz busy" if ghz else ""
    return f"{cpu} (LLVM {llvm.get_host_cpu_name()}, {row}, {os.cpu_count()} cores{clock})"


# --------------------------------------------------------------------------------------------
# The targets
# --------------------------------------------------------------------------------------------


def speed_targets(sizes=(1024, 2048), repeats=7, report: Callable[[str], None] = print) -> list[Row]:
    """Measure the blocked kernels' targets (README, "Speed"); one thread unless a row says."""
    import numba

    out: list[Row] = []

    def add(what, ratio, goal, met, samples=(), ran=""):
        r = Row(what, float(ratio), goal, bool(met), ran, [round(float(s), 3) for s in samples])
        out.append(r)
        report(r.line())

    rng = np.random.default_rng(0)
    kern = dispatch.lookup(DEFAULT_ISA, "s8s8", "2x2")
    entry = kern.table_entry
    int_goal = 3.3 if entry is not None and entry.int_kind == "vnni" else 1.0
    # TDPBF16PS through VDPBF16PS, where the target has it, carries two multiply-adds per
    # instruction (README, "Speed")
    bf16_goal = 1.6 if dispatch.lookup(DEFAULT_ISA, "bf16", "2x2").engine == "vdpbf16ps" else 0.85
    with _one_thread_blas():
        for dtype, goal in (("bf16", bf16_goal), ("fp16", 0.85), ("tf32", 0.9)):
            for n in sizes:
                a, b = _values(dtype, (n, n), rng), _values(dtype, (n, n), rng)
                p = pack(b, dtype)

                def run(a=a, p=p):
                    return matmul(a, p, tiling="2x2", threads=1)

                r, s = median_ratio(run, lambda a=a, b=b: a @ b, repeats)
                what = f"{dtype.upper()} 2x2 prepacked n={n} vs numpy float32"
                add(what, r, f">= {goal}", r >= goal, s, _ran_of(run))
        for dtype in ("s8s8", "s8u8", "u8s8", "u8u8"):
            for n in sizes:
                instr = resolve(DEFAULT_ISA, dtype)[2]
                a, b = instr.sample(n, n, n, rng)
                p = pack(b, dtype)
                a32, b32 = a.astype(np.float32), b.astype(np.float32)

                def run(a=a, p=p):
                    return matmul(a, p, tiling="2x2", threads=1)

                r, s = median_ratio(run, lambda a32=a32, b32=b32: a32 @ b32, repeats)
                add(
                    f"{dtype} 2x2 prepacked n={n} vs numpy float32 (ops/s)",
                    r,
                    f">= {int_goal:g}",
                    r >= int_goal,
                    s,
                    _ran_of(run),
                )
        for m, goal in ((1, 1.0), (8, 0.8), (32, 0.8)):
            a, b = _values("bf16", (m, 4096), rng), _values("bf16", (4096, 4096), rng)
            p = pack(b, "bf16")

            def run(a=a, p=p):
                return matmul(a, p, threads=1)

            what = "GEMV M=1" if m == 1 else f"skinny M={m}"
            r, s = median_ratio(run, lambda a=a, b=b: a @ b, repeats)
            add(f"{what}, K=N=4096, prepacked BF16 vs numpy float32", r, f">= {goal:g}", r >= goal, s, _ran_of(run))
        n = 1024
        a, b = _values("bf16", (n, n), rng), _values("bf16", (n, n), rng)
        p = pack(b, "bf16")
        a_tiny = a.copy()
        a_tiny[n // 3, n // 5] = 1e-30
        b_huge = b.copy()
        b_huge[n // 5, n // 3] = 1e30
        p_huge = pack(b_huge, "bf16")

        def base(a=a, p=p):
            return matmul(a, p, threads=1)

        def tiny(a=a_tiny, p=p):
            return matmul(a, p, threads=1)

        def huge(a=a, p=p_huge):
            return matmul(a, p, threads=1)

        r, s = median_ratio(base, tiny, repeats)
        add(f"one A element 1e-30 in a BF16 {n}^3 call: time / time without", r, "<= 1.5", r <= 1.5, s, _ran_of(tiny))
        r, s = median_ratio(base, huge, repeats)
        add(f"one B element 1e30 in a BF16 {n}^3 call: time / time without", r, "<= 1.5", r <= 1.5, s, _ran_of(huge))
        m = 512
        a, b = _values("bf16", (m, m), rng), _values("bf16", (m, m), rng)
        p, p_small = pack(b, "bf16"), pack(b * 2.0**-64, "bf16")
        a_small = a * np.float32(2.0**-64)

        def fast(a=a, p=p):
            return matmul(a, p, threads=1)

        def small(a=a_small, p=p_small):
            return matmul(a, p, threads=1)

        r, s = median_ratio(small, fast, repeats)  # time(fast path) / time(tiny): the speed ratio
        add(f"all values near 2^-64, BF16 {m}^3: speed / the fast path's", r, ">= 0.1", r >= 0.1, s, _ran_of(small))
        for n in sizes:
            a, b = _values("bf16", (n, n), rng), _values("bf16", (n, n), rng)
            p = pack(b, "bf16")
            r, s = median_ratio(
                lambda a=a, p=p: matmul(a, p, tiling="2x2", threads=1),
                lambda a=a, p=p: matmul(a, p, tiling="1x1", threads=1),
                repeats,
            )
            ran = _ran_of(lambda a=a, p=p: matmul(a, p, tiling="1x1", threads=1))
            add(f"BF16 2x2 vs 1x1 n={n}", r, "> 1 (2x2 faster)", r > 1, s, ran)
    if numba.config.NUMBA_NUM_THREADS >= 2:
        n = max(sizes)
        a, b = _values("bf16", (n, n), rng), _values("bf16", (n, n), rng)
        p = pack(b, "bf16")
        with _one_thread_blas():
            r, s = median_ratio(lambda: matmul(a, p, threads=2), lambda: matmul(a, p, threads=1), repeats)
        add(f"BF16 n={n}: 2 threads vs 1", r, ">= 1.8", r >= 1.8, s)
        # beside another process's busy thread, the default thread count (plan.threads_for)
        # against one thread
        n = min(sizes)
        a, b = _values("bf16", (n, n), rng), _values("bf16", (n, n), rng)
        p = pack(b, "bf16")
        with _one_thread_blas(), _spinning():
            r, s = median_ratio(lambda: matmul(a, p), lambda: matmul(a, p, threads=1), repeats)
            ran = _ran_of(lambda: matmul(a, p))
        add(f"BF16 n={n}, one core busy: default threads vs threads=1", r, ">= 0.95", r >= 0.95, s, ran)
    else:
        report("n/a  2 threads vs 1: Numba is limited to one thread here (NUMBA_NUM_THREADS)")
    for what, shape, packed in (
        ("BF16 1024^3, fresh PackedB", (1024, 1024, 1024), True),
        ("BF16 (1 x 10^7) @ (10^7 x 1), float32 operands", (1, 10**7, 1), False),
    ):
        try:
            mem = peak_memory(*shape, packed=packed)
        except (RuntimeError, KeyError) as e:
            report(f"n/a  peak extra memory, {what}: not measured ({str(e).splitlines()[0]})")
            continue
        r = mem["extra"] / mem["own"]
        detail = (
            f"{mem['extra'] / 1e6:.1f} MB extra, operands {mem['own'] / 1e6:.1f} MB, result {mem['out'] / 1e6:.1f} MB"
        )
        add(
            f"peak extra memory / the operands' own bytes, {what}",
            r,
            "<= 1",
            r <= 1,
            [mem["extra"], mem["own"]],
            detail,
        )
    return out

"""The seed's benchmark sweep and the performance-target checks, as library code.

One table of contenders (:func:`contenders`) feeds ``python -m tilegemm bench``, the
pytest-benchmark suite in ``bench/`` and the targets check, so all three time the same calls on
the same inputs. Timings are wall-clock, packing excluded (B is packed before the clock starts,
as in the seed). Every ratio the library claims is measured in one process, side by side, and
repeated: the machine is shared, so no figure is compared with a remembered one.

Importing this module loads nothing heavy; rich, matplotlib, threadpoolctl and torch are imported
when a function that needs them runs.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from . import __version__, dispatch, model_ports, plan
from .api import matmul
from .compare import bitdiff
from .dispatch import TILINGS
from .instructions import DEFAULT_ISA, PROFILES, Instruction, resolve
from .packing import pack

if TYPE_CHECKING:
    from .perf import Row

__all__ = [
    "Contender",
    "contenders",
    "unavailable",
    "inputs",
    "sweep",
    "targets",
    "torch_mode",
    "reps_for",
    "median_time",
    "main",
    "native_main",
    "tflops_table",
]

#: The seed's sweep: one group per dtype it measured, labelled as the seed labels them.
SEED_DTYPES = ("bf16", "int8", "fp16")
SEED_TILINGS = ("1x1", "2x2")
SEED_GROUPS = tuple(d.upper() for d in SEED_DTYPES)
#: Every dtype of the default profile, for ``bench --dtypes`` (the seed's sweep is the default).
ALL_DTYPES = PROFILES[DEFAULT_ISA].names()


def group_dtype(group: str) -> str:
    """The dtype of a group label (``"BF16"`` -> ``"bf16"``)."""
    return group.lower()


def _instruction(group: str) -> Instruction:
    return resolve(DEFAULT_ISA, group_dtype(group))[2]


@dataclass(frozen=True)
class Contender:
    """One way to multiply a group's inputs. ``prepare(a, b, threads, group)`` returns a
    zero-argument callable that runs the product once (all set-up, packing included, done before)."""

    name: str
    group: str
    prepare: Callable
    exact: bool = False  # reproduces the AMX bits by construction
    needs: str | None = None  # module that must be importable
    native: Instruction | None = None  # runs this instruction on the CPU itself (backend="native")


def _tilegemm(tiling, isa=DEFAULT_ISA, backend="emulated", dtype=None):
    def prepare(a, b, threads, group):
        name = dtype or group_dtype(group)
        instr = resolve(isa, name)[2]
        if instr.codes_only:  # ACE MX takes 8-bit floats, never rounds
            a, b = instr.quantize(a, b, name)
        packed = pack(b, name, isa)
        return lambda: matmul(a, packed, tiling=tiling, threads=threads, backend=backend)

    return prepare


def _numpy_as(dtype):
    def prepare(a, b, threads, group):
        x, y = a.astype(dtype), b.astype(dtype)
        return lambda: np.matmul(x, y)

    return prepare


def _torch_as(name):
    def prepare(a, b, threads, group):
        import torch

        dt = getattr(torch, name)
        x, y = torch.from_numpy(a).to(dt), torch.from_numpy(b).to(dt)
        return lambda: torch.matmul(x, y).to(torch.float32 if dt.is_floating_point else torch.int32).numpy()

    return prepare


def yardstick(instr: Instruction) -> np.dtype:
    """The numpy matmul a dtype is measured against: float32, or complex64 for complex inputs."""
    return np.dtype(np.complex64 if instr.lanes == 2 else np.float32)


def flops(instr: Instruction, n: int) -> float:
    """Floating-point operations of an n^3 product: 2 n^3, four times that for complex numbers
    (a complex multiply-add is four real ones)."""
    return 2.0 * n**3 * instr.lanes**2


def native_program(instr: Instruction) -> bool:
    """Whether ``backend="native"`` has a program for ``instr`` on any CPU (rows for the others
    would only say so)."""
    from .native.gemm import generator

    return generator(instr) is not None


def contenders(tilings=SEED_TILINGS, dtypes=SEED_DTYPES, native_only=False) -> list[Contender]:
    """Everything the sweep times, group by group: tilegemm's AMX emulation with each tiling
    (the seed's by default), every other profile that takes the dtype, the same instructions
    natively (``native ...``: rows that report why where this CPU cannot run them), numpy
    float32 (the yardstick; complex64 for complex dtypes), and numpy and torch in the dtype's own
    element type where they multiply it (not for the 8-bit floats or complex FP16 pairs).
    ``native_only``: the native rows alone."""
    for t in tilings:
        if t not in TILINGS:
            raise ValueError(f"unknown tiling {t!r}; valid tilings are {', '.join(TILINGS)}")
    out = []
    for dtype in dtypes:
        group = dtype.upper()
        instr = resolve(DEFAULT_ISA, dtype)[2]
        natives = [
            Contender(f"native {t}", group, _tilegemm(t, backend="native"), True, native=instr)
            for t in tilings
            if native_program(instr)
        ]
        # Other instruction profiles (library profiles such as onednn have their own bench rows).
        # (another encoding of a listed profile, same_as, has its bits and kernels)
        others = [
            p
            for p in PROFILES.values()
            if p.name != DEFAULT_ISA and p.library is None and p.same_as is None and dtype in p.names()
        ]
        for p in others:
            other = p.instruction(dtype)
            if native_program(other):
                natives.append(Contender(f"native {p.name}", group, _tilegemm("2x2", p.name, "native"), native=other))
        if native_only:
            out += natives
            continue
        for tiling in tilings:
            out.append(Contender(f"tilegemm {tiling}", group, _tilegemm(tiling), exact=True))
        for p in others:
            out.append(Contender(f"tilegemm {p.name}", group, _tilegemm("2x2", p.name)))
        ace = model_ports.ace_counterpart(dtype)  # the FP8 dtypes: ACE's MX forms, every scale 1.0
        if ace is not None and dtype not in PROFILES[model_ports.ACE_ISA].names():
            out.append(
                Contender(
                    f"tilegemm {model_ports.ACE_ISA} {ace}", group, _tilegemm("2x2", model_ports.ACE_ISA, dtype=ace)
                )
            )
        out += natives
        element = instr.a.element
        yard = yardstick(instr)
        out.append(Contender(f"numpy {yard.name}", group, _numpy_as(yard)))
        if instr.a.minifloat is None and instr.a.lanes == 1:
            out.append(Contender(f"numpy {element.name}", group, _numpy_as(element)))
            out.append(Contender(f"torch {element.name}", group, _torch_as(element.name), needs="torch"))
    return out


def inputs(group: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Square inputs already representable in the group's format, so every contender multiplies
    the same values: 16- and 8-bit float values held in float32 (complex FP16 in complex64),
    integers in their 8-bit type."""
    instr = _instruction(group)
    rng = np.random.default_rng([seed, n])
    name = group_dtype(group)
    a, b = instr.sample(n, n, n, rng)
    if instr.is_float:  # round once to the format, then hold the exact values in float32
        a = instr.a.decode(instr.a.to_codes(a, "a", name))
        b = instr.b.decode(instr.b.to_codes(b, "b", name))
    return a, b


def reps_for(n: int) -> int:
    """Timed repetitions, scaled as in the seed: 50 at 256 down to 3 at 4096 and beyond."""
    for limit, reps in ((256, 50), (512, 30), (1024, 10), (2048, 5)):
        if n <= limit:
            return reps
    return 3


@contextlib.contextmanager
def limit_threads(threads):
    """numpy's BLAS (and torch) limited to ``threads`` for the block; None leaves them alone."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    torch_prev = None
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch_prev = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        with threadpool_limits(threads):
            yield
    finally:
        if torch_prev is not None:
            sys.modules["torch"].set_num_threads(torch_prev)


def unavailable(c: Contender) -> str | None:
    """Why ``c`` cannot run here, or None: a module not installed, or a native instruction this
    CPU (or its kernel) does not allow, named as ``tilegemm.native`` names it."""
    if c.needs is not None:
        try:
            __import__(c.needs)
        except ImportError:
            return f"{c.needs} not installed"
    if c.native is not None:
        from . import native

        if not native.usable(c.native):
            missing = native.lacks(c.native) or ("tile data permission",)
            return f"native {c.native.mnemonic} cannot run here: lacks {', '.join(missing)}"
    return None


def _real_parts(x: np.ndarray) -> np.ndarray:
    """A result as float64 numbers: complex values as their two parts side by side."""
    x = np.asarray(x)
    return np.stack([x.real, x.imag], -1).astype(np.float64) if x.dtype.kind == "c" else x.astype(np.float64)


def _ulp_distance(result: np.ndarray, exact64: np.ndarray) -> float:
    """Largest distance from a float64 product, in binary32 ulps of that product."""
    r = result.astype(np.float64)
    ok = np.isfinite(exact64) & np.isfinite(r)
    if not ok.any():
        return float("nan")
    ulp = np.spacing(np.abs(exact64[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(r[ok] - exact64[ok]) / ulp))


@dataclass
class Measurement:
    """One contender of the sweep at one size: its speed and, for tilegemm, its bits against the
    exact result. (A performance target, a ratio against its goal, is a ``tilegemm.perf.Row``.)"""

    group: str
    contender: str
    n: int
    threads: int | None
    gflops: float | None = None
    seconds: float | None = None
    reps: int = 0
    efficiency: float | None = None  # against numpy float32 (complex64 for complex), same run
    differs: float | None = None  # share of outputs whose bits differ from the exact AMX result
    max_ulp: float | None = None  # against a float64 product
    skipped: str | None = None
    ran: str = ""  # tilegemm rows: the kernel (body, table row) and the paths its blocks took
    baseline_gflops: list[float] = field(default_factory=list)  # the yardstick row: each time it was measured
    noisy: str | None = None  # why this row's ratio is not a result (its group's yardstick was unsteady)


def median_time(run, reps, warmup=5):
    """Seconds one ``run()`` takes: ``warmup`` untimed calls, then the median of ``reps`` timed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sweep(
    sizes=(256, 512, 1024, 2048),
    groups=SEED_GROUPS,
    threads=None,
    budget=30.0,
    progress=None,
    tilings=SEED_TILINGS,
    native_only=False,
) -> list[Measurement]:
    """The seed's sweep. A contender projected (from its previous size, n^3 scaling) to exceed
    ``budget`` seconds at a size is skipped there and at every larger size.

    Every ratio is against the group's numpy yardstick, so the yardstick is timed twice, in its
    place and again after every other contender of its group. Where those two differ by more than
    :data:`NOISY_SPREAD`, or (from n = :data:`FLOOR_FROM`) the yardstick ran below half of one
    core's binary32 FMA peak (a BLAS never runs that slowly there unless the machine is busy),
    every row of the group is marked
    ``noisy`` and gets no ratio: a collapsed baseline would otherwise make any contender look fast.
    """
    from .perf import fma_peak_gflops

    peak = fma_peak_gflops()
    rows: list[Measurement] = []
    todo = [c for c in contenders(tilings, tuple(group_dtype(g) for g in groups), native_only)]
    last_time: dict[str, tuple[int, float]] = {}
    dead: dict[str, str] = {}
    # Compile the kernels once, outside every clock.
    for g in groups:
        a, b = inputs(g, 20)
        for c in todo:
            if c.group == g and (c.name.startswith("tilegemm") or c.native) and unavailable(c) is None:
                c.prepare(a, b, threads, g)()
    with limit_threads(threads):
        for n in sizes:
            for g in groups:
                a, b = inputs(g, n)
                exact = matmul(a, pack(b, group_dtype(g)), threads=threads)
                wide = np.result_type(a.dtype, np.float64)  # float64, or complex128
                exact64 = a.astype(wide) @ b.astype(wide)
                group_rows = []
                runs: dict[str, tuple[Callable, int, int]] = {}
                for c in todo:
                    if c.group != g:
                        continue
                    if progress:
                        progress(f"{g} {c.name} n={n}")
                    row = Measurement(g, c.name, n, threads)
                    group_rows.append(row)
                    why = unavailable(c)
                    if why is not None:
                        row.skipped = why
                        continue
                    if c.name in dead:
                        row.skipped = dead[c.name]
                        continue
                    reps = reps_for(n)
                    if c.name in last_time:
                        n0, t0 = last_time[c.name]
                        projected = t0 * (n / n0) ** 3 * (5 + reps + 1)
                        if projected > budget:
                            row.skipped = dead[c.name] = f"projected {projected:.0f} s > budget {budget:.0f} s"
                            continue
                    run = c.prepare(a, b, threads, g)
                    t_first = time.perf_counter()
                    with plan.recording() as rec:  # which kernel body and paths a tilegemm row runs
                        result = np.asarray(run())
                    t_first = time.perf_counter() - t_first
                    row.ran = rec.describe() if rec.calls else ""
                    if t_first * (5 + reps) > budget:  # time the runs the budget allows
                        reps = max(1, int(budget / max(t_first, 1e-9)) - 1)
                        warm = 0
                    else:
                        warm = 5
                    sec = median_time(run, reps, warm)
                    runs[c.name] = (run, reps, warm)
                    last_time[c.name] = (n, sec)
                    row.seconds, row.reps, row.gflops = sec, reps, flops(_instruction(g), n) / sec / 1e9
                    cmp = result.astype(exact.dtype) if result.dtype != exact.dtype else result
                    row.differs = bitdiff(cmp, exact).share
                    row.max_ulp = (
                        _ulp_distance(_real_parts(result), _real_parts(exact64))
                        if _instruction(g).is_float
                        else float(np.max(np.abs(result.astype(np.int64) - exact64.astype(np.int64))))
                    )
                yard = f"numpy {yardstick(_instruction(g)).name}"
                base = next((r for r in group_rows if r.contender == yard and r.gflops), None)
                if base is not None and base.gflops:
                    run, reps, warm = runs[yard]
                    again = flops(_instruction(g), n) / median_time(run, reps, warm) / 1e9
                    base.baseline_gflops = [base.gflops, again]
                    floor = peak / 2 if peak and n >= FLOOR_FROM else None
                    why = baseline_noise(base.baseline_gflops, floor)
                    for r in group_rows:
                        if why is not None:
                            r.noisy = why
                        elif r.gflops:
                            r.efficiency = r.gflops / base.gflops
                rows.extend(group_rows)
    return rows


#: The most two timings of the yardstick may differ, as a share of the smaller, before the
#: ratios of its group are called noisy.
NOISY_SPREAD = 0.20
#: The smallest n at which the yardstick is held to half of one core's FMA peak: below it a BLAS
#: spends much of a call outside its inner loop, and is slow without any noise.
FLOOR_FROM = 256


def baseline_noise(gflops: list[float], floor: float | None) -> str | None:
    """Why a yardstick measured at ``gflops`` (each of its timings) is no baseline, or None: its
    timings differ by more than :data:`NOISY_SPREAD`, or it ran below ``floor`` (half of one
    core's FMA peak; None where the peak is unknown)."""
    lo, hi = min(gflops), max(gflops)
    if hi > lo * (1 + NOISY_SPREAD):
        return f"the yardstick's timings differ by {hi / lo - 1:.0%} (over {NOISY_SPREAD:.0%}): the machine is busy"
    if floor is not None and lo < floor:
        return f"the yardstick ran at {lo:.1f} GFLOP/s, below half of one core's FMA peak ({floor:.1f})"
    return None


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def machine_info(threads) -> dict:
    import llvmlite.binding as llvm
    import numba

    versions = {
        "tilegemm": __version__,
        "numpy": np.__version__,
        "numba": numba.__version__,
        "llvmlite": __import__("llvmlite").__version__,
        "ml_dtypes": __import__("ml_dtypes").__version__,
    }
    if "torch" in sys.modules:
        versions["torch"] = sys.modules["torch"].__version__
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    return {
        "cpu": cpu,
        "llvm_cpu": llvm.get_host_cpu_name(),
        "cores": os.cpu_count(),
        "threads": threads if threads is not None else numba.get_num_threads(),
        "python": platform.python_version(),
        "versions": versions,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def host_line(threads=None) -> str:
    """One line naming the host: CPU model, LLVM's name for it, the per-target table row its
    kernels come from, cores, the clock (``tilegemm.perf.host_line``)."""
    from .perf import host_line as line

    return line()


def format_table(rows: list[Measurement]) -> str:
    w = max([16] + [len(r.contender) for r in rows])  # profile names are longer than the seed's
    head = f"{'group':6} {'contender':{w}} {'n':>5} {'GFLOP/s':>9} {'vs f32':>7} {'bits differ':>11} {'max ulp':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.skipped:
            lines.append(f"{r.group:6} {r.contender:{w}} {r.n:5d}   skipped: {r.skipped}")
            continue
        ulp = f"{r.max_ulp:9.3g}" if r.max_ulp is not None else ""
        ran = f"  {r.ran}" if r.ran else ""
        if r.noisy:
            ran = f"  noisy: {r.noisy}{ran}"
        speed = f"{r.gflops:9.2f} {'noisy' if r.noisy else format(r.efficiency or 0, '.2f'):>7}"
        lines.append(f"{r.group:6} {r.contender:{w}} {r.n:5d} {speed} {r.differs:11.1%} {ulp}{ran}")
    return "\n".join(lines)


def write_outputs(rows, info, out_dir) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    jpath = os.path.join(out_dir, "bench.json")
    with open(jpath, "w") as f:
        json.dump({"machine": info, "rows": [asdict(r) for r in rows]}, f, indent=1)
    paths.append(jpath)
    cpath = os.path.join(out_dir, "bench.csv")
    with open(cpath, "w", newline="") as f:
        w = csv.writer(f)
        f.write(f"# {json.dumps(info)}\n")
        fields = list(asdict(rows[0]).keys()) if rows else []
        w.writerow(fields)
        for r in rows:
            w.writerow([asdict(r)[k] for k in fields])
    paths.append(cpath)
    ppath = os.path.join(out_dir, "bench.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench.png not drawn: the plot needs matplotlib (pip install 'tilegemm[bench]')", file=sys.stderr)
    else:
        _plot(rows, info, ppath)
        paths.append(ppath)
    return paths


def _plot(rows, info, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(r.group for r in rows))
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4.5), squeeze=False)
    for ax, g in zip(axes[0], groups):
        names = dict.fromkeys(r.contender for r in rows if r.group == g)
        for name in names:
            pts = [(r.n, r.gflops) for r in rows if r.group == g and r.contender == name and r.gflops]
            if pts:
                style = "-o" if name.startswith("tilegemm") else "--s"
                ax.plot(*zip(*pts), style, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{g}")
        ax.set_xlabel("matrix size N (N x N x N)")
        ax.set_ylabel("GFLOP/s (2 N^3 / time)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"tilegemm {info['versions']['tilegemm']} on {info['cpu']}, {info['threads']} thread(s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# The performance targets, each a median of side-by-side ratios
# --------------------------------------------------------------------------------------------


def _median_ratio(fast, slow, repeats, inner=1):
    """Median over ``repeats`` of time(slow) / time(fast), timed back to back, alternating which
    goes first (``tilegemm.perf.median_ratio``)."""
    from .perf import median_ratio

    return median_ratio(fast, slow, repeats, inner)


def add_native_row(add, report, n=2048, repeats=5):
    """Native BF16 2x2 at ``n`` on one thread: TFLOP/s (the target: >= 1), beside the emulated
    2x2 timed in the same loop. Where this CPU cannot run it, one line says why."""
    from . import native

    instr = _instruction("BF16")
    if not native.usable(instr):
        missing = native.lacks(instr) or ("tile data permission",)
        report(f"n/a  native BF16 2x2 n={n}, 1 thread: not measured: this CPU lacks {', '.join(missing)}")
        return
    a, b = inputs("BF16", n)
    packed = pack(b, "bf16")

    def run():
        return matmul(a, packed, tiling="2x2", threads=1, backend="native")

    r, s = _median_ratio(run, lambda: matmul(a, packed, tiling="2x2", threads=1), repeats)
    tflops = 2.0 * n**3 / median_time(run, repeats, warmup=1) / 1e12
    add(f"native BF16 2x2 n={n}, 1 thread: TFLOP/s", tflops, ">= 1.0", tflops >= 1.0, [tflops])
    add(f"native BF16 2x2 n={n}, 1 thread vs emulated 2x2", r, "> 1", r > 1, s)


#: The other CPUs' paths (``docs/isa-profiles.md``): goals against numpy float32, one thread,
#: prepacked B, by result kind.
PROFILE_GOALS = {"i": 1.0, "f": 0.7}
#: The goal of a BF16 path whose kernel runs VDPBF16PS itself (a target with AVX512_BF16): two
#: multiply-adds per instruction, as TDPBF16PS's goal there (``tilegemm.perf.speed_targets``).
VDPBF16PS_GOAL = 1.6


def add_profile_rows(add, n=1024, repeats=7):
    """One row per profile (one per encoding) and dtype beside ``amx``: its prepacked ``matmul``
    at n^3 on one thread against numpy float32, timed side by side, on values representable in
    the dtype. Call under a one-thread BLAS limit. A row whose instruction runs emulated where a
    CPU with it would run the instruction itself says what this CPU lacks."""
    from .kernels.targets import native_missing

    a32, b32 = inputs("BF16", n)
    for p in PROFILES.values():
        if p.name == DEFAULT_ISA or p.same_as is not None or p.library is not None:
            continue
        if any(i.scale_block for i in p.dtypes.values()):
            continue  # ACE: its own rows, with block scales (tilegemm.ace_bench)
        for dtype, instr in p.dtypes.items():
            rng = np.random.default_rng([n, 7])
            a, b = instr.sample(n, n, n, rng)
            if instr.is_float:
                a = instr.a.decode(instr.a.to_codes(a, "a", dtype))
                b = instr.b.decode(instr.b.to_codes(b, "b", dtype))
            packed = pack(b, dtype, p.name)
            with plan.recording() as rec:  # which kernel ran (VPDPBUSDS: VPDPBUSD's where nothing can clip)
                matmul(a, packed, threads=1)
            r, s = _median_ratio(lambda: matmul(a, packed, threads=1), lambda: a32 @ b32, repeats)
            goal = PROFILE_GOALS[instr.acc.kind]
            if dispatch.lookup(p.name, dtype, "2x2").engine == "vdpbf16ps":  # the instruction itself
                goal = VDPBF16PS_GOAL
            what = f"isa={p.name} {dtype} prepacked n={n}, 1 thread vs numpy float32"
            ran = rec.describe()
            lacks = native_missing(instr.kernel)
            if lacks:  # the instruction itself runs where the CPU has it (kernels/targets.py NATIVE)
                ran += f"; emulated: this CPU lacks {','.join(f.lstrip('+') for f in lacks)} for {instr.mnemonic}"
            add(what, r, f">= {goal}", r >= goal, s, ran)


def targets(sizes=(1024, 2048), repeats=7, report=print) -> list[Row]:
    """Measure every row of the performance-target table (see the README): the blocked kernels'
    targets (``tilegemm.perf``, with the bodies alone against the FMA peak), then the others."""
    from threadpoolctl import threadpool_limits

    from . import perf

    out: list[Row] = []

    def add(what, ratio, goal, met, samples, ran=""):
        add_row(perf.Row(what, float(ratio), goal, bool(met), ran, [round(float(x), 3) for x in samples]))

    def add_row(row: Row) -> None:
        out.append(row)
        report(row.line())

    report(f"# host: {perf.host_line()}")
    perf.body_report(report)
    report("# targets: ratios timed side by side in this process (medians of alternating repetitions), 1 thread")
    for r in perf.speed_targets(sizes, repeats, report=lambda line: None):
        add_row(r)
    with threadpool_limits(1, user_api="blas"):  # not Numba's OpenMP pool
        n = max(sizes)
        a, b = inputs("INT8", n)
        packed = pack(b, "int8")
        r8, s8 = _median_ratio(lambda: matmul(a, packed, threads=1), lambda: a @ b, 1 if n > 1024 else 3)
        add(f"INT8 2x2 n={n}, 1 thread vs numpy int8", r8, ">= 10", r8 >= 10, s8)
        # AMX-COMPLEX against numpy's complex64 matmul (four real products per complex MAC), the
        # 8-bit floats against float32 on the same values; A as their callers hold it.
        n = min(sizes, key=lambda x: abs(x - 1024))
        for group, goal in (("CFP16", 0.5), ("BF8", 0.5), ("BF8HF8", 0.5), ("HF8BF8", 0.5), ("HF8", 0.5)):
            instr = _instruction(group)
            a, b = inputs(group, n)
            packed = pack(b, group_dtype(group))
            a_in = a if instr.a.lanes == 2 else instr.a.to_element(a, "a", group_dtype(group))
            with plan.recording() as rec:  # which kernel ran (AMX-FP8: binary32, or its binary64 fallback)
                matmul(a_in, packed, tiling="2x2", threads=1)
            r, s = _median_ratio(lambda: matmul(a_in, packed, tiling="2x2", threads=1), lambda: a @ b, repeats)
            yard = yardstick(instr).name
            add(f"{group} 2x2 prepacked n={n}, 1 thread vs numpy {yard}", r, f">= {goal}", r >= goal, s, rec.describe())
        for n in sizes:
            a, b = inputs("BF16", n)
            packed = pack(b, "bf16")
            r, s = _median_ratio(
                lambda: matmul(a, packed, tiling="2x2", threads=1),
                lambda: matmul(a, packed, tiling="1x1", threads=1),
                repeats,
            )
            add(f"BF16 2x2 vs 1x1, n={n}, 1 thread", r, "2x2 faster: > 1", r > 1, s)
        add_profile_rows(add, min(sizes), repeats)
        from .ace_bench import add_ace_rows

        add_ace_rows(add, _median_ratio, min(sizes), repeats)
        a, b = inputs("BF16", 256)
        packed = pack(b, "bf16")
        r, s = _median_ratio(lambda: matmul(a, packed, threads=1), lambda: a @ b, repeats, inner=20)
        add("BF16 n=256, float32 inputs, prepacked, 1 thread vs numpy float32", r, ">= 0.4", r >= 0.4, s)
        # The headline call packs B itself, in slabs (plan.MIN_SLAB_K): its speed over the
        # prepacked call's, the packing counted.
        for n in sizes:
            if n >= 1024:
                a, b = inputs("BF16", n)
                packed = pack(b, "bf16")
                r, s = _median_ratio(
                    lambda: matmul(a, b, "bf16", threads=1), lambda: matmul(a, packed, threads=1), repeats
                )
                add(f"BF16 n={n}, B not packed vs prepacked, 1 thread", r, ">= 0.9", r >= 0.9, s)
    n = max(sizes)
    a, b = inputs("BF16", n)
    packed = pack(b, "bf16")
    r, s = _median_ratio(lambda: pack(b, "bf16"), lambda: matmul(a, packed), repeats)
    add(
        f"pack of a {n}x{n} B as a share of one BF16 matmul (all threads)",
        1 / r,
        "<= 0.10",
        1 / r <= 0.10,
        [1 / x for x in s],
    )
    add_native_row(add, report)
    from .amx import seed

    a, b = inputs("BF16", 256)
    seed.gemm_2x2(a[:32, :64], b[:64, :32])  # compile the tile multiply first
    t0 = time.perf_counter()
    seed.gemm_2x2(a, b)
    port = time.perf_counter() - t0
    add("256^3 BF16 through the seed's 2x2 port on tilegemm.amx (s)", port, "< 5 s", port < 5, [port])
    code = (
        "import time; t = time.perf_counter(); import numpy as np, tilegemm; "
        "tilegemm.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)); "
        "print(time.perf_counter() - t)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # warm the cache
    firsts = [
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    first = statistics.median(firsts)
    add("first matmul in a fresh process, warm cache, n=64 (s, incl. import)", first, "<= 1.5 s", first <= 1.5, firsts)
    return out


# --------------------------------------------------------------------------------------------
# The torch mode (tilegemm.torch.emulate) against a bare tilegemm.matmul of the same operands
# --------------------------------------------------------------------------------------------

#: (what, M, K, N): a decode-sized and a prefill-sized linear layer of a 4096-wide model, a square
#: product, and the attention scores of 8 heads of 64 over 512 tokens (a bmm).
TORCH_MODE_SHAPES = (
    ("linear", 8, 4096, 4096),
    ("linear", 512, 4096, 1024),
    ("matmul", 1024, 1024, 1024),
    ("bmm", 512, 64, 512),
)


def torch_mode(shapes=TORCH_MODE_SHAPES, repeats=5, threads=None, report=print) -> list[dict]:
    """Time PyTorch calls under ``tilegemm.torch.emulate()`` against a bare ``tilegemm.matmul``
    (bf16, fresh operands each call, as the mode gets them) of the same operands, and against
    ``tilegemm.onednn`` called directly: each ratio the median of back-to-back repetitions in this
    process. Returns one dict per shape."""
    import torch

    import tilegemm.torch as tt

    from . import onednn

    rows = []
    for what, m, k, n in shapes:
        g = torch.Generator().manual_seed(m + k + n)
        batch = 8 if what == "bmm" else 1
        x = torch.randn((batch, m, k) if batch > 1 else (m, k), generator=g).to(torch.bfloat16)
        w = torch.randn((batch, k, n) if batch > 1 else (n, k), generator=g).to(torch.bfloat16)
        b = w.t() if what == "linear" else w  # F.linear's weight is (N, K): B = weight.t()
        call = {
            "linear": lambda x=x, w=w: torch.nn.functional.linear(x, w),
            "matmul": lambda x=x, w=w: torch.matmul(x, w),
            "bmm": lambda x=x, w=w: torch.bmm(x, w),
        }[what]
        xa, ba = tt.to_numpy(x), tt.to_numpy(b)
        mode = tt.emulate(threads=threads)

        def emulated(call=call, mode=mode):
            with mode:
                call()

        def bare(xa=xa, ba=ba):
            matmul(xa, ba, "bf16", threads=threads)

        def direct(xa=xa, ba=ba, bt=what == "linear"):
            onednn.matmul(xa, ba, b_transposed=bt, threads=threads)

        over, s1 = _median_ratio(bare, emulated, repeats)
        lib, s2 = _median_ratio(bare, direct, repeats)
        t_bare = median_time(bare, repeats, warmup=0)
        row = {
            "what": what,
            "shape": f"{batch} x {m} x {k} x {n}" if batch > 1 else f"{m} x {k} x {n}",
            "plan": getattr(mode.calls[-1].plan, "describe", lambda: "")(),
            "bare_ms": t_bare * 1e3,
            "emulate_over_bare": over,
            "onednn_over_bare": lib,
            "samples": [round(v, 3) for v in s1],
        }
        rows.append(row)
        report(
            f"{what:6} {row['shape']:>20}: emulate() / tilegemm.matmul {over:5.2f}, tilegemm.onednn / "
            f"tilegemm.matmul {lib:5.2f} (tilegemm.matmul {row['bare_ms']:.1f} ms; {row['plan']})"
        )
    return rows


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


#: The seed's sizes (its table runs to 8192).
SEED_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def tflops_table(rows: list[Measurement]) -> str:
    """The seed's table: TFLOP/s (2 N^3 / time) per dtype and kernel, one column per size."""
    sizes = sorted({r.n for r in rows})
    head = f"{'dtype':5} {'kernel':14} " + " ".join(f"{n:>7}" for n in sizes)
    lines = [head, "-" * len(head)]
    for g, name in dict.fromkeys((r.group, r.contender) for r in rows):
        cells = {r.n: r for r in rows if r.group == g and r.contender == name}
        text = [
            f"{(cells[n].gflops or 0) / 1000:7.2f}" if n in cells and cells[n].gflops else f"{'-':>7}" for n in sizes
        ]
        lines.append(f"{g:5} {name:14} " + " ".join(text))
    return "\n".join(lines)


def native_main(args, out=print) -> int:
    """``bench --native``: the seed's sweep on this CPU's AMX (1x1 and 2x2 with both B tiles
    resident, sizes to 8192), in TFLOP/s, beside nothing else; ``--threads 1`` gives the
    per-core table. Says what is missing and returns 1 where the CPU cannot run them."""
    from . import native

    h = native.this_host()
    groups = []
    for g in (d.upper() for d in args.dtypes):
        instr = _instruction(g)
        if native.usable(instr):
            groups.append(g)
        else:
            missing = native.lacks(instr) or ("tile data permission",)
            out(f"native {g} ({instr.mnemonic}): not measured: this CPU ({h.model}) lacks {', '.join(missing)}")
    if not groups:
        out("bench --native: no native AMX kernel can run on this CPU; nothing measured")
        return 1
    sizes = tuple(args.sizes) if args.sizes_given else SEED_SIZES
    rows = sweep(sizes, tuple(groups), args.threads, args.budget, None, tuple(args.tilings), native_only=True)
    info = machine_info(args.threads)
    out(f"# native AMX, TFLOP/s = 2 N^3 / time; {info['cpu']}, {info['threads']} thread(s)")
    out(tflops_table(rows))
    for r in rows:
        if r.skipped:
            out(f"{r.group} {r.contender} n={r.n}: skipped: {r.skipped}")
        elif r.differs:
            out(f"{r.group} {r.contender} n={r.n}: {r.differs:.2%} of outputs differ from the emulation")
    for p in write_outputs(rows, info, args.out if args.out else default_out()):
        out(f"wrote {p}")
    return 0


def main(args) -> int:
    if getattr(args, "host", False) or getattr(args, "body", False):
        from . import perf

        print(f"# host: {perf.host_line()}")
        if args.body:
            perf.body_report()
        return 0
    if getattr(args, "torch_mode", False):
        torch_mode(threads=args.threads)
        return 0
    if getattr(args, "native", False):
        return native_main(args)
    out_dir = args.out if args.out else default_out()
    if args.targets:
        results = targets(tuple(args.sizes) if args.sizes_given else (1024, 2048))
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "targets.json")
        with open(path, "w") as f:
            json.dump({"machine": machine_info(1), "targets": [asdict(t) for t in results]}, f, indent=1)
        print(f"wrote {path}")
        return 0
    groups = tuple(g.upper() for g in args.dtypes)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    tilings = tuple(args.tilings)
    total = sum(1 for c in contenders(tilings) if c.group in groups) * len(args.sizes)
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description:40}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("compiling", total=total)

        def progress(what):
            bar.update(task, description=what, advance=1)

        rows = sweep(tuple(args.sizes), groups, args.threads, args.budget, progress, tilings)
    info = machine_info(args.threads)
    print(f"# host: {host_line(args.threads)}")
    print(f"# {info['threads']} thread(s), " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    print(format_table(rows))
    for p in write_outputs(rows, info, out_dir):
        print(f"wrote {p}")
    return 0


def default_out() -> str:
    """Where ``bench`` writes without ``--out``: ``bench-results`` in tilegemm's per-user cache
    folder (``~/.cache/tilegemm`` on Linux), so that a run never writes into the folder it was
    started from."""
    from .kernels._cache import cache_root

    return os.path.join(cache_root(), "bench-results")


# --------------------------------------------------------------------------------------------
# The traffic model beside counted tile loads and measured speed (python -m tilegemm model)
# --------------------------------------------------------------------------------------------


def model_report(m=32768, n=32768, k=32768, dtype="int8", measure=1024, threads=None, out=print) -> list[dict]:
    """The model for the excerpt's strategies and every tilegemm tiling at ``m x n x k``, the
    counted tile loads of the seed-style ports, then each tiling's model at ``measure``^3 beside
    its measured speed there. Returns the measured rows."""
    from . import model
    from .amx import seed

    p, name, instr = resolve(DEFAULT_ISA, dtype)
    out(f"model: M={m} N={n} K={k} {dtype} ({instr.a.nbytes} byte(s) per element)")
    out(f"{'strategy':24} {'block (elements)':>16} {'invocations':>13} {'bytes loaded':>14} {'bytes/MAC':>9}")
    cases = list(model.strategies().items()) + [(f"tilegemm {t}", model.tiling_block(t)) for t in TILINGS]
    for label, blk in cases:
        tr = model.traffic(m, n, k, blk, dtype)
        cols = f"{tr.invocations:13,d} {tr.bytes_loaded:14.4g} {tr.bytes_per_mac:9.4f}"
        out(f"{label:24} {blk[0]:>7} x {blk[1]:<6} {cols}")
    lb = model.lower_bound(m, n, k, 32 * 48, dtype) / (m * n * k)
    out(f"lower bound 2MNK/sqrt(T) for T = 32 x 48: {lb:.4f} bytes/MAC")
    kk = 4 * instr.k_step
    out(f"\ncounted: the seed-style ports on tilegemm.amx ({dtype}, 96 x 96 x {kk}), tile loads per tile multiply")
    out(f"{'kernel':30} {'model':>6} {'counted':>8}")
    ports = [
        ("1x1", seed.gemm_1x1, 1, 1, {}),
        ("2x2 (listing as printed)", seed.gemm_2x2, 2, 2, {}),
        ("2x2 (B tiles resident)", seed.gemm_2x2_resident, 2, 2, {}),
        ("2x3 (one A, one B register)", seed.gemm_single_buffered, 2, 3, {"R": 2, "C": 3}),
        ("3x2 (one A, one B register)", seed.gemm_single_buffered, 3, 2, {"R": 3, "C": 2}),
    ]
    for label, port, r, c, kw in ports:
        counted = seed.count(port, 96, 96, kk, name, **kw).load_to_compute
        out(f"{label:30} {(r + c) / (r * c):6.3f} {counted:8.3f}")
    out(
        "The model loads each A and B tile once per K step of a block: (R + C) / (R C) per multiply. "
        "Counted loads exceed it where a kernel reloads: the printed 2x2 listing reloads TMM6 and TMM7, "
        "and with a single A and B register every row block reloads the B tiles (2x3: 8 loads per 6 "
        "multiplies where the model counts 5)."
    )
    ported = model_ports.ports(m, n, k, dtype)
    sm, sn, sk = ported[0].size
    out(f"\nside by side: AMX and ACE ({dtype}; ACE runs its counterpart), modelled at M={m} N={n} K={k}, counted")
    out(
        f"on the ported kernels at {sm} x {sn} x {sk} "
        "(AMX: tile loads per tile multiply; ACE: zmm loads per outer product)"
    )
    out(f"{'kernel':28} {'dtype':11} {'block':>8} {'bytes/MAC model':>15} {'counted':>8} {'loads':>6} {'ops':>6}")
    for pr in ported:
        shape = f"{pr.block[0]}x{pr.block[1]}"
        nums = f"{pr.modelled:15.4f} {pr.counted:8.4f} {pr.loads:6d} {pr.ops:6d}"
        out(f"{pr.kernel:28} {pr.dtype:11} {shape:>8} {nums}")
    rows = []
    if measure:
        s = measure
        a, b = instr.sample(s, s, s, np.random.default_rng(0))
        packed = pack(b, name)
        out(
            f"\nmeasured: {s} x {s} x {s} {dtype}, prepacked B. The model counts what AMX "
            f"code loads into tile registers; the emulator has no tile registers, so its speed shows "
            f"how well a superblock's A and B blocks are reused from cache instead."
        )
        out(f"{'tiling':8} {'bytes/MAC (model)':>17} {'GFLOP/s':>9}")
        for t in TILINGS:
            sec = median_time(lambda: matmul(a, packed, tiling=t, threads=threads), 3, warmup=1)
            row = {
                "tiling": t,
                "bytes_per_mac": model.traffic(s, s, s, model.tiling_block(t), dtype).bytes_per_mac,
                "gflops": 2 * s**3 / sec / 1e9,
            }
            rows.append(row)
            out(f"{t:8} {row['bytes_per_mac']:17.4f} {row['gflops']:9.1f}")
    return rows

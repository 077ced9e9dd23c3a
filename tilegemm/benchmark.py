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
from typing import Callable

import ml_dtypes
import numpy as np

from . import __version__
from .api import matmul
from .compare import bitdiff
from .dispatch import TILINGS
from .formats import get_format
from .packing import pack

__all__ = ["Contender", "contenders", "inputs", "sweep", "targets", "reps_for", "main"]

#: The seed's sweep groups: tilegemm dtype of each.
GROUPS = {"BF16": "bf16", "INT8": "s8s8", "FP16": "fp16"}


@dataclass(frozen=True)
class Contender:
    """One way to multiply a group's inputs. ``prepare(a, b, threads)`` returns a zero-argument
    callable that runs the product once (all set-up, packing included, done before)."""

    name: str
    group: str
    prepare: Callable
    exact: bool = False  # a tilegemm contender: must reproduce the AMX bits
    needs: str | None = None  # module that must be importable


def _tilegemm(tiling, isa="amx"):
    def prepare(a, b, threads, group):
        packed = pack(b, GROUPS[group])
        return lambda: matmul(a, packed, tiling=tiling, threads=threads, isa=isa)

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


SEED_TILINGS = ("1x1", "2x2")


def contenders(tilings=SEED_TILINGS) -> list[Contender]:
    """Everything the sweep times, group by group (tilegemm with the seed's tilings by default)."""
    for t in tilings:
        if t not in TILINGS:
            raise ValueError(f"unknown tiling {t!r}; valid tilings are {', '.join(TILINGS)}")
    out = []
    for group in GROUPS:
        for tiling in tilings:
            out.append(Contender(f"tilegemm {tiling}", group, _tilegemm(tiling), exact=True))
        if group == "BF16":
            out.append(Contender("tilegemm avx512", group, _tilegemm("2x2", "avx512")))
        out.append(Contender("numpy float32", group, _numpy_as(np.float32)))
        if group == "BF16":
            out.append(Contender("numpy bfloat16", group, _numpy_as(ml_dtypes.bfloat16)))
            out.append(Contender("torch bfloat16", group, _torch_as("bfloat16"), needs="torch"))
        elif group == "INT8":
            out.append(Contender("numpy int8", group, _numpy_as(np.int8)))
            out.append(Contender("torch int8", group, _torch_as("int8"), needs="torch"))
        else:
            out.append(Contender("numpy float16", group, _numpy_as(np.float16)))
            out.append(Contender("torch float16", group, _torch_as("float16"), needs="torch"))
    return out


def inputs(group: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Square inputs already representable in the group's format, so every contender multiplies
    the same values: BF16/FP16 values held in float32, int8 values in int8."""
    rng = np.random.default_rng([seed, n])
    if group == "INT8":
        return (rng.integers(-128, 128, (n, n)).astype(np.int8), rng.integers(-128, 128, (n, n)).astype(np.int8))
    fmt = get_format(GROUPS[group])
    a, b = (rng.standard_normal((n, n)).astype(fmt.element).astype(np.float32) for _ in range(2))
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


def _available(c: Contender) -> bool:
    if c.needs is None:
        return True
    try:
        __import__(c.needs)
        return True
    except ImportError:
        return False


def _ulp_distance(result: np.ndarray, exact64: np.ndarray) -> float:
    """Largest distance from a float64 product, in binary32 ulps of that product."""
    r = result.astype(np.float64)
    ok = np.isfinite(exact64) & np.isfinite(r)
    if not ok.any():
        return float("nan")
    ulp = np.spacing(np.abs(exact64[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(r[ok] - exact64[ok]) / ulp))


@dataclass
class Row:
    group: str
    contender: str
    n: int
    threads: int | None
    gflops: float | None = None
    seconds: float | None = None
    reps: int = 0
    efficiency: float | None = None  # against numpy float32, same run
    differs: float | None = None  # share of outputs whose bits differ from the exact AMX result
    max_ulp: float | None = None  # against a float64 product
    skipped: str | None = None


def _time(run, reps, warmup=5):
    for _ in range(warmup):
        run()
    t0 = time.perf_counter()
    for _ in range(reps):
        run()
    return (time.perf_counter() - t0) / reps


def sweep(
    sizes=(256, 512, 1024, 2048), groups=tuple(GROUPS), threads=None, budget=30.0, progress=None, tilings=SEED_TILINGS
) -> list[Row]:
    """The seed's sweep. A contender projected (from its previous size, n^3 scaling) to exceed
    ``budget`` seconds at a size is skipped there and at every larger size."""
    rows: list[Row] = []
    todo = [c for c in contenders(tilings) if c.group in groups]
    last_time: dict[str, tuple[int, float]] = {}
    dead: dict[str, str] = {}
    # Compile the kernels once, outside every clock.
    for g in groups:
        a, b = inputs(g, 20)
        for c in todo:
            if c.group == g and c.name.startswith("tilegemm"):
                c.prepare(a, b, threads, g)()
    with limit_threads(threads):
        for n in sizes:
            for g in groups:
                a, b = inputs(g, n)
                exact = matmul(a, pack(b, GROUPS[g]), threads=threads)
                exact64 = a.astype(np.float64) @ b.astype(np.float64)
                group_rows = []
                for c in todo:
                    if c.group != g:
                        continue
                    if progress:
                        progress(f"{g} {c.name} n={n}")
                    row = Row(g, c.name, n, threads)
                    group_rows.append(row)
                    if not _available(c):
                        row.skipped = f"{c.needs} not installed"
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
                    result = np.asarray(run())
                    t_first = time.perf_counter() - t_first
                    if t_first * (5 + reps) > budget:  # time the runs the budget allows
                        reps = max(1, int(budget / max(t_first, 1e-9)) - 1)
                        warm = 0
                    else:
                        warm = 5
                    sec = _time(run, reps, warm)
                    last_time[c.name] = (n, sec)
                    row.seconds, row.reps, row.gflops = sec, reps, 2.0 * n**3 / sec / 1e9
                    cmp = result.astype(exact.dtype) if result.dtype != exact.dtype else result
                    row.differs = bitdiff(cmp, exact).share
                    row.max_ulp = (
                        _ulp_distance(result.astype(np.float64), exact64)
                        if g != "INT8"
                        else float(np.max(np.abs(result.astype(np.int64) - exact64.astype(np.int64))))
                    )
                base = next((r for r in group_rows if r.contender == "numpy float32" and r.gflops), None)
                for r in group_rows:
                    if base and r.gflops:
                        r.efficiency = r.gflops / base.gflops
                rows.extend(group_rows)
    return rows


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
        "ml_dtypes": ml_dtypes.__version__,
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


def format_table(rows: list[Row]) -> str:
    head = f"{'group':5} {'contender':16} {'n':>5} {'GFLOP/s':>9} {'vs f32':>7} {'bits differ':>11} {'max ulp':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.skipped:
            lines.append(f"{r.group:5} {r.contender:16} {r.n:5d}   skipped: {r.skipped}")
            continue
        ulp = f"{r.max_ulp:9.3g}" if r.max_ulp is not None else ""
        lines.append(
            f"{r.group:5} {r.contender:16} {r.n:5d} {r.gflops:9.2f} {r.efficiency or 0:7.2f} {r.differs:11.1%} {ulp}"
        )
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
    _plot(rows, info, ppath)
    paths.append(ppath)
    return paths


def _plot(rows, info, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [g for g in GROUPS if any(r.group == g for r in rows)]
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


@dataclass
class Target:
    what: str
    ratio: float
    goal: str
    met: bool
    samples: list = field(default_factory=list)


def _median_ratio(fast, slow, repeats, inner=1):
    """Median over ``repeats`` of time(slow) / time(fast), the two timed back to back."""
    fast()
    slow()
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            slow()
        t1 = time.perf_counter()
        for _ in range(inner):
            fast()
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
    return statistics.median(ratios), ratios


def add_memory_row(add, n=1024):
    """Extra memory of one BF16 matmul with a fresh PackedB, beyond a, b and out (tracemalloc
    sees NumPy's allocations), against the allowance: A once in the target format (BF16, 2 bytes
    an element), the packed B, and a fixed per-thread panel (counted as one 16 x 16 float32 tile
    per superblock)."""
    import tracemalloc

    a, b = inputs("BF16", n)
    out = np.empty((n, n), np.float32)
    matmul(a, pack(b, "bf16"), out=out)  # compile outside the measurement
    packed = pack(b, "bf16")
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    matmul(a, packed, out=out)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    allowance = n * n * 2 + packed.data.nbytes + 4 * 16 * 16 * 4
    add(
        f"extra memory of a BF16 {n}^3 matmul (fresh PackedB) / allowance",
        peak / allowance,
        "<= 1.0",
        peak <= allowance,
        [peak, allowance],
    )


def targets(sizes=(1024, 2048), repeats=7, report=print) -> list[Target]:
    """Measure every row of the performance-target table (see the README)."""
    from threadpoolctl import threadpool_limits

    out: list[Target] = []

    def add(what, ratio, goal, met, samples):
        t = Target(what, ratio, goal, met, [round(s, 3) for s in samples])
        out.append(t)
        report(f"{'ok ' if met else 'MISS'} {what}: {ratio:.2f} ({goal})")

    with threadpool_limits(1):
        for group, goal in (("BF16", 0.75), ("FP16", 0.75), ("INT8", 0.85)):
            for n in sizes:
                a, b = inputs(group, n)
                packed = pack(b, GROUPS[group])
                a32, b32 = inputs("BF16", n)
                r, s = _median_ratio(lambda: matmul(a, packed, tiling="2x2", threads=1), lambda: a32 @ b32, repeats)
                add(f"{group} 2x2 prepacked n={n}, 1 thread vs numpy float32", r, f">= {goal}", r >= goal, s)
                if group == "INT8":
                    a8, b8 = a, b
                    r8, s8 = _median_ratio(lambda: matmul(a, packed, threads=1), lambda: a8 @ b8, 1 if n > 1024 else 3)
                    add(f"INT8 2x2 n={n}, 1 thread vs numpy int8", r8, ">= 10", r8 >= 10, s8)
        for n in sizes:
            a, b = inputs("BF16", n)
            packed = pack(b, "bf16")
            r, s = _median_ratio(
                lambda: matmul(a, packed, tiling="2x2", threads=1),
                lambda: matmul(a, packed, tiling="1x1", threads=1),
                repeats,
            )
            add(f"BF16 2x2 vs 1x1, n={n}, 1 thread", r, "2x2 faster: > 1", r > 1, s)
        a, b = inputs("BF16", 256)
        packed = pack(b, "bf16")
        r, s = _median_ratio(lambda: matmul(a, packed, threads=1), lambda: a @ b, repeats, inner=20)
        add("BF16 n=256, float32 inputs, prepacked, 1 thread vs numpy float32", r, ">= 0.4", r >= 0.4, s)
    n = max(sizes)
    a, b = inputs("BF16", n)
    packed = pack(b, "bf16")
    import numba

    if numba.config.NUMBA_NUM_THREADS >= 2:
        r, s = _median_ratio(lambda: matmul(a, packed, threads=2), lambda: matmul(a, packed, threads=1), repeats)
        add(f"BF16 n={n}: 2 threads vs 1", r, ">= 1.7", r >= 1.7, s)
    r, s = _median_ratio(lambda: pack(b, "bf16"), lambda: matmul(a, packed), repeats)
    add(
        f"pack of a {n}x{n} B as a share of one BF16 matmul (all threads)",
        1 / r,
        "<= 0.10",
        1 / r <= 0.10,
        [1 / x for x in s],
    )
    add_memory_row(add)
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
# CLI
# --------------------------------------------------------------------------------------------


def main(args) -> int:
    if args.targets:
        results = targets(tuple(args.sizes) if args.sizes_given else (1024, 2048))
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "targets.json"), "w") as f:
                json.dump({"machine": machine_info(1), "targets": [asdict(t) for t in results]}, f, indent=1)
        return 0
    for n in args.sizes:
        if not 1 <= n <= 8192:
            raise SystemExit(f"--sizes takes sizes from 1 to 8192, got {n}")
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
    print(
        f"# {info['cpu']} ({info['llvm_cpu']}), {info['threads']} thread(s), "
        + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    )
    print(format_table(rows))
    if args.out:
        for p in write_outputs(rows, info, args.out):
            print(f"wrote {p}")
    return 0

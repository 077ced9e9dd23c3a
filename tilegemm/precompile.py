"""Compile tilegemm's kernels before their first call, into Numba's on-disk cache.

Numba compiles a kernel on its first call and keeps the machine code in its cache
(``tilegemm.kernels._cache``); a first call therefore waits 10 to 25 s for the compiler, once per
dtype, and a later process loads the code in well under a second. ``python -m tilegemm compile``
makes those first calls now, for every dtype of every ``isa`` profile: the calls a first use
makes (a product from zero and accumulated, a matrix-vector product, a packed B, a NaN operand,
which takes the exact paths), on small operands, so that the kernels they select are compiled and
cached. Nothing is computed that is kept.

Where the code goes:

- by default, the cache every later call reads (``NUMBA_CACHE_DIR``, else the per-user cache
  folder, ``tilegemm.kernels._cache.cache_root``);
- with ``into=FOLDER``, a portable cache (``TILEGEMM_PRECOMPILED_INTO``): one laid out by module
  rather than by the source file's absolute path, which an installed tilegemm reads from
  ``tilegemm/_precompiled`` when its own cache lacks an entry. ``pip install .`` builds it so
  (``setup.py``) for the CPU it installs on.

Either way an entry holds code for one CPU (its LLVM name and features), one Numba version and
one content of the kernel sources, and Numba's own checks refuse it anywhere else: the kernel
then compiles on its first call, as it would have without it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np

from .kernels._cache import INTO_ENV


def jobs() -> list[tuple[str, str]]:
    """Every ``(isa, dtype)`` a call can name, in the order of :data:`tilegemm.instructions.PROFILES`."""
    from .instructions import PROFILES

    return [(isa, name) for isa, prof in PROFILES.items() for name in prof.dtypes]


def _group(job: tuple[str, str]) -> str:
    """Jobs that compile the same kernels share a group, so that one process compiles them: the
    kernel family, or the library profile's name."""
    from . import dispatch
    from .instructions import PROFILES

    isa, name = job
    if PROFILES[isa].library is not None:
        return isa
    return dispatch.lookup(isa, name, "2x2").family.name


def shares(all_jobs: list[tuple[str, str]], n: int) -> list[list[tuple[str, str]]]:
    """``all_jobs`` in ``n`` shares of whole groups (:func:`_group`), the largest groups first,
    each to the share with the fewest jobs so far."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for job in all_jobs:
        groups[_group(job)].append(job)
    out: list[list[tuple[str, str]]] = [[] for _ in range(max(1, n))]
    for g in sorted(groups.values(), key=len, reverse=True):
        min(out, key=len).extend(g)
    return [s for s in out if s]


def warm(isa: str, name: str) -> None:
    """Make the calls a first use of ``(isa, name)`` makes, on small operands."""
    from . import reference
    from .api import matmul
    from .instructions import resolve
    from .packing import pack

    prof, name, instr = resolve(isa, name)
    rng = np.random.default_rng(0)
    # 33 x 40 @ 40 x 33: partial tiles and a K tail, as most calls have
    a, b = instr.sample(33, 40, 33, rng)
    c = matmul(a, b, name, isa=isa)
    matmul(a[:1], b, name, isa=isa)  # matrix-vector products may take their own kernels
    if prof.library is not None:
        return
    matmul(a, pack(b, name, isa=isa), isa=isa, out=c, accumulate=True)
    reference.matmul(a[:5, :8], b[:8, :3], name, isa=isa)  # the readable model's compiled pieces
    if instr.is_float and a.dtype.kind in "fc":
        a = a.copy()
        a.flat[0] = np.nan  # a NaN operand takes the exact paths
        matmul(a, b, name, isa=isa)


def run(selected: list[tuple[str, str]], out=None) -> None:
    """:func:`warm` each job in this process, printing one line each."""
    out = sys.stdout if out is None else out
    for isa, name in selected:
        t = time.perf_counter()
        warm(isa, name)
        print(f"  compiled isa={isa} dtype={name} in {time.perf_counter() - t:.1f} s", file=out, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--into",
        metavar="FOLDER",
        help="write a portable cache into FOLDER (what pip install builds) instead of the cache calls read",
    )
    parser.add_argument(
        "--processes", type=int, default=None, help="compiler processes (default: the cores of this machine, at most 4)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="ISA:DTYPE",
        help="compile these only (e.g. amx:bf16 ace:mxint8); default: every dtype of every isa",
    )


def parse_only(items: list[str]) -> list[tuple[str, str]]:
    from .instructions import resolve

    selected = []
    for item in items:
        isa, sep, name = item.partition(":")
        if not sep:
            raise ValueError(f"--only takes ISA:DTYPE (e.g. amx:bf16), got {item!r}")
        resolve(isa, name)  # a ValueError naming the valid isas or dtypes
        selected.append((isa, name))
    return selected


def compile_all(args: argparse.Namespace) -> int:
    """``python -m tilegemm compile``: every job, or those ``--only`` names, in ``--processes``
    processes (each compiles whole groups, :func:`shares`); 0 when every process succeeded."""
    selected = parse_only(args.only) if args.only else jobs()
    n = args.processes if args.processes is not None else min(4, os.cpu_count() or 1)
    if n < 1:
        raise ValueError(f"--processes must be at least 1, got {n}")
    env = dict(os.environ)
    if args.into:
        os.makedirs(args.into, exist_ok=True)
        env[INTO_ENV] = os.path.abspath(args.into)
    parts = shares(selected, n)
    where = f"a portable cache in {env[INTO_ENV]}" if args.into else "the cache later calls read"
    print(f"compiling {len(selected)} isa/dtype pairs into {where}, {len(parts)} processes", flush=True)
    t = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-m", "tilegemm.precompile", *[f"{i}:{d}" for i, d in part]], env=env)
        for part in parts
    ]
    codes = [p.wait() for p in procs]
    failed = sum(c != 0 for c in codes)
    print(f"compiled in {time.perf_counter() - t:.0f} s" + (f"; {failed} processes failed" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":  # a worker of compile_all: python -m tilegemm.precompile ISA:DTYPE ...
    run(parse_only(sys.argv[1:]))

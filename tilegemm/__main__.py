"""``python -m tilegemm <verb>``: the command-line face of the library.

Verbs: ``demo`` (every dtype and tiling, checked against the reference, with speed and the share
of outputs a float32 ``numpy.matmul`` gets wrong); ``bench`` (the seed's benchmark sweep against
numpy and torch baselines, or ``--targets``: the performance targets as measured ratios);
``explain`` (where and why two ``isa=`` profiles give different bits).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from . import instructions, reference
from .api import matmul
from .compare import bitdiff
from .instructions import DEFAULT_ISA, DTYPES, ISAS, PROFILES
from .packing import pack


def _gflops(fn, flops):
    from .benchmark import median_time

    return flops / median_time(fn, 5, warmup=2) / 1e9


def demo(sizes=(64, 256, 512), check=(33, 17, 65), seed=0, out=sys.stdout) -> int:
    """Run every dtype x tiling, verify against the reference, print a table. Returns 0 if exact."""
    rng = np.random.default_rng(seed)
    print(f"{'dtype':6} {'tiling':6} {'size':>5} {'check':>8} {'GFLOP/s':>8} {'differs from f32 numpy':>23}", file=out)
    failures = 0
    for name, fmt in PROFILES[DEFAULT_ISA].dtypes.items():
        m, n, k = check
        ca, cb = fmt.sample(m, k, n, rng)
        want = reference.matmul(ca, cb, name)
        for tiling in ("1x1", "2x2"):  # the seed's two; every tiling is in the test suite
            ok = bitdiff(matmul(ca, cb, name, tiling), want).identical
            failures += not ok
            for size in sizes:
                a, b = fmt.sample(size, size, size, rng)
                packed = pack(b, name)
                got = matmul(a, packed, tiling=tiling)
                rate = _gflops(lambda: matmul(a, packed, tiling=tiling), 2.0 * size**3)
                # What the usual stand-in returns: upcast the rounded inputs, float32 numpy.matmul.
                a_in = fmt.a.to_element(a, "a", name).astype(np.float32)
                b_in = packed.unpack().astype(np.float32)
                naive = (a_in @ b_in).astype(fmt.acc)
                share = bitdiff(got, naive).share
                print(
                    f"{name:6} {tiling:6} {size:5d} {'exact' if ok else 'WRONG':>8} {rate:8.2f} {share:22.1%}", file=out
                )
    return 1 if failures else 0


def _ir(args) -> int:
    import os

    from . import inspect

    report = inspect.vector_report(args.dtype, args.tiling, args.isa, cpu=args.cpu)
    print(f"microkernel for dtype={args.dtype} tiling={args.tiling} isa={args.isa}")
    print(report)
    if args.asm and args.cpu is None:
        print(inspect.asm(args.dtype, args.tiling, args.isa))
    if args.amx:
        print(inspect.amx_asm(args.dtype, args.tiling if args.tiling in ("1x1", "2x2") else "2x2"))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        files = {}
        if args.cpu is None:
            files["kernel.ll"] = inspect.llvm_ir(args.dtype, args.tiling, args.isa)
            files["kernel.s"] = inspect.asm(args.dtype, args.tiling, args.isa)
        if args.amx:
            t = args.tiling if args.tiling in ("1x1", "2x2") else "2x2"
            files["amx.ll"] = inspect.amx_ir(args.dtype, t)
            files["amx.s"] = inspect.amx_asm(args.dtype, t)
        for name, text in files.items():
            with open(os.path.join(args.out, name), "w") as f:
                f.write(text)
            print(f"wrote {os.path.join(args.out, name)}")
    return 0


def _explain(args, parser) -> int:
    from .explain import default_dtype, explain

    try:
        dtype = args.dtype if args.dtype is not None else default_dtype(*args.isa)
        instr = instructions.resolve(args.isa[0], dtype)[2]
        instructions.resolve(args.isa[1], dtype)
        if (args.a is None) != (args.b is None):
            raise ValueError("give both --a and --b, or neither (random operands of --shape)")
        if args.a is not None:
            a, b = (_load(path, name) for path, name in ((args.a, "--a"), (args.b, "--b")))
        else:
            m, k, n = args.shape
            if min(m, k, n) < 1 or m * k * n > 2**31:
                raise ValueError(f"--shape takes positive sizes with M*K*N <= 2^31, got {m} {k} {n}")
            a, b = instr.sample(m, k, n, np.random.default_rng(args.seed))
        c = None if args.c is None else _load(args.c, "--c")
        e = explain(a, b, dtype, isa=tuple(args.isa), index=None if args.index is None else tuple(args.index), c=c)
    except (ValueError, TypeError) as err:
        parser.error(str(err))
    print(e)
    return 0


def _load(path, flag):
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"{flag} {path!r}: cannot read a .npy array ({err})") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilegemm", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    d = sub.add_parser("demo", help="every dtype x tiling: checked against the reference, timed")
    d.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 512])
    bn = sub.add_parser("bench", help="the seed's sweep: GFLOP/s, efficiency and accuracy against baselines")
    bn.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="square sizes, up to 8192 (default 256 512 1024 2048)"
    )
    bn.add_argument("--dtypes", nargs="+", default=["bf16", "int8", "fp16"], choices=["bf16", "int8", "fp16"])
    bn.add_argument("--threads", type=int, default=None, help="threads for every contender alike")
    bn.add_argument("--budget", type=float, default=30.0, help="seconds per contender and size (default 30)")
    bn.add_argument("--out", default="bench-results", help="folder for bench.json, bench.csv, bench.png")
    bn.add_argument("--tilings", nargs="+", default=["1x1", "2x2"], help="tilegemm tilings (default: the seed's)")
    bn.add_argument("--targets", action="store_true", help="measure the performance targets instead")
    md = sub.add_parser("model", help="bytes loaded per MAC for the ACE excerpt's strategies and every tiling")
    md.add_argument("--m", type=int, default=32768)
    md.add_argument("--n", type=int, default=32768)
    md.add_argument("--k", type=int, default=32768)
    md.add_argument("--dtype", default="int8", choices=list(PROFILES[DEFAULT_ISA].names()))
    md.add_argument("--measure", type=int, default=1024, help="size to time every tiling at (0: skip)")
    md.add_argument("--threads", type=int, default=None)
    ir = sub.add_parser("ir", help="LLVM IR / assembly of a microkernel, its vectorization report, real AMX code")
    ir.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    ir.add_argument("--tiling", default="2x2")
    ir.add_argument("--isa", default="amx", choices=list(ISAS))
    ir.add_argument("--asm", action="store_true", help="print the microkernel's assembly")
    ir.add_argument("--cpu", default=None, help="compile for this target instead of the host")
    ir.add_argument("--amx", action="store_true", help="print the seed's loop as Granite Rapids AMX code")
    ir.add_argument("--out", default=None, help="write kernel.ll, kernel.s (and amx.ll, amx.s) here")
    ex = sub.add_parser("explain", help="where and why two isa profiles give different bits")
    ex.add_argument("--isa", nargs=2, default=["amx", "avx2"], choices=list(ISAS), metavar="ISA", help="two profiles")
    ex.add_argument("--dtype", default=None, choices=list(DTYPES), help="default: the first dtype both take")
    ex.add_argument("--a", default=None, help="A (M x K) as a .npy file")
    ex.add_argument("--b", default=None, help="B (K x N) as a .npy file")
    ex.add_argument("--c", default=None, help="a starting C (M x N) as a .npy file")
    ex.add_argument("--shape", nargs=3, type=int, default=[16, 4096, 16], metavar=("M", "K", "N"))
    ex.add_argument("--seed", type=int, default=0, help="seed of the random operands")
    ex.add_argument("--index", nargs=2, type=int, default=None, metavar=("M", "N"), help="the output to replay")
    args = parser.parse_args(argv)
    if args.verb == "explain":
        return _explain(args, ex)
    if args.verb == "ir":
        return _ir(args)
    if args.verb == "model":
        from . import benchmark

        benchmark.model_report(args.m, args.n, args.k, args.dtype, args.measure, args.threads)
        return 0
    if args.verb == "demo":
        return demo(tuple(args.sizes))
    if args.verb == "bench":
        from . import benchmark

        args.sizes_given = args.sizes is not None
        args.sizes = args.sizes or [256, 512, 1024, 2048]
        return benchmark.main(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

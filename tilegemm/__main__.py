"""python -m tilegemm VERB: the command-line face of the library.

Every option is checked before anything runs: a bad value ends the command with exit status 2
and one line on standard error, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from . import instructions, precompile
from .dispatch import TILINGS
from .instructions import DEFAULT_ISA, ISAS, PROFILES

__all__ = ["main", "demo"]

_VERBS = {
    "demo": "every AMX dtype on the seed's tilings: checked bit for bit against the reference, and timed",
    "bench": "the seed's benchmark sweep against numpy and torch, or --targets: the performance targets",
    "model": "bytes loaded per multiply-accumulate for the ACE excerpt's strategies and every tiling",
    "ir": "a vectorization report of a kernel's hot loop; its assembly with --asm, LLVM IR and assembly "
    "files with --out, real AMX code with --amx",
    "info": "the instruction and profile records, and the kernel bodies this host compiles",
    "selfcheck": "this CPU's own instructions against the emulation, bit for bit (AMX, VDPBF16PS, VPDPBUSD(S), "
    "VPMADDUBSW, VFMADD231PS)",
    "explain": "where and why two isa profiles give different bits: counts, the first step that parts, a reproducer",
    "fleet": "with --demo: a small GPT-like model's bf16 outputs, layer by layer, on each server class "
    "(AMX Xeon, AMD EPYC Zen 4, AVX-512 Xeon without BF16, AVX2 server), compared bit for bit (needs PyTorch)",
    "compile": "compile the kernels of every dtype now, into Numba's cache, so that no first call waits for the "
    "compiler (pip install . does it for the installing CPU)",
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``python -m tilegemm ir: error: ...`` and exit 2."""

    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _positive_int(limit: int | None = None, name: str = "value"):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if v < 1 or (limit is not None and v > limit):
            bound = f" and at most {limit}" if limit is not None else ""
            raise argparse.ArgumentTypeError(f"{name} must be at least 1{bound}, got {v}")
        return v

    return parse


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {v:g}")
    return v


def _threads_limit() -> int:
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


# --------------------------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------------------------


def demo(sizes=(64, 256, 512), check=(33, 17, 65), seed=0, out=None) -> int:
    """Every AMX dtype on the seed's two tilings: checked bit for bit against the reference on an
    edge-shaped problem, then timed as ``bench`` times (warm-up, median of several runs) beside
    the share of outputs a float32 ``numpy.matmul`` of the same inputs gets wrong. Returns 0 when
    every check is exact."""
    from . import reference
    from .api import matmul
    from .benchmark import flops, host_line, median_time
    from .compare import bitdiff
    from .packing import pack

    out = sys.stdout if out is None else out
    rng = np.random.default_rng(seed)
    m, n, k = check
    print(
        f"checking tilegemm.matmul against tilegemm.reference bit for bit ({m} x {k} @ {k} x {n}, "
        f"every dtype and tiling below) on {host_line()}",
        file=out,
    )
    print(f"{'dtype':6} {'tiling':6} {'size':>5} {'check':>8} {'GFLOP/s':>8} {'differs from f32 numpy':>23}", file=out)
    failures = 0
    for name, instr in PROFILES[DEFAULT_ISA].dtypes.items():
        ca, cb = instr.sample(m, k, n, rng)
        want = reference.matmul(ca, cb, name)
        for tiling in ("1x1", "2x2"):  # the seed's two; the test suite covers every tiling
            ok = bitdiff(matmul(ca, cb, name, tiling), want).identical
            failures += not ok
            for size in sizes:
                a, b = instr.sample(size, size, size, rng)
                packed = pack(b, name)
                got = matmul(a, packed, tiling=tiling)
                rate = flops(instr, size) / median_time(lambda: matmul(a, packed, tiling=tiling), 7, warmup=2) / 1e9
                # What the usual stand-in returns: the same rounded inputs, float32 numpy.matmul
                # (complex64 for complex inputs).
                a_in = instr.a.decode(instr.a.to_codes(a, "a", name))
                b_in = instr.b.decode(packed.unpack().view(instr.b.storage))
                wide = np.result_type(a_in.dtype, np.float32)
                naive = (a_in.astype(wide) @ b_in.astype(wide)).astype(instr.acc)
                share = bitdiff(got, naive).share
                verdict = "exact" if ok else "WRONG"
                print(f"{name:6} {tiling:6} {size:5d} {verdict:>8} {rate:8.2f} {share:22.1%}", file=out)
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------
# ir
# --------------------------------------------------------------------------------------------


def _ir(args, parser) -> int:
    from . import inspect

    try:
        instr = instructions.resolve(args.isa, args.dtype)[2]
    except ValueError as e:
        parser.error(str(e))
    if args.amx and instr.tile_method is None:
        parser.error(
            f"--amx shows AMX tile code, but isa={args.isa!r} runs {instr.mnemonic} for dtype {args.dtype!r}, "
            f"which has no tile form"
        )
    if args.native:
        if instr.llvm is None:
            parser.error(f"--native needs an instruction this CPU could run; {instr.mnemonic} has none")
        try:
            text = inspect.native_asm(args.dtype, args.tiling, args.isa, cpu=args.cpu)
        except ValueError as e:
            parser.error(str(e))
        print(text)
        return 0
    where = args.cpu or "this host"
    print(f"hot loop of the kernel for dtype={args.dtype} tiling={args.tiling} isa={args.isa}, compiled for {where}")
    print(inspect.vector_report(args.dtype, args.tiling, args.isa, cpu=args.cpu))
    files = {}
    if args.asm:
        print(inspect.asm(args.dtype, args.tiling, args.isa, cpu=args.cpu))
    if args.amx:
        tiling = "2x2" if args.tiling == "auto" else args.tiling
        print(f"\n# --amx: the seed-style {tiling} loop as Granite Rapids executes it")
        print(inspect.amx_asm(args.dtype, tiling, args.isa))
        files["amx.ll"] = inspect.amx_ir(args.dtype, tiling, args.isa)
        files["amx.s"] = inspect.amx_asm(args.dtype, tiling, args.isa)
    if args.out:
        files["kernel.ll"] = inspect.llvm_ir(args.dtype, args.tiling, args.isa, cpu=args.cpu)
        files["kernel.s"] = inspect.asm(args.dtype, args.tiling, args.isa, cpu=args.cpu)
        os.makedirs(args.out, exist_ok=True)
        for name in sorted(files):
            path = os.path.join(args.out, name)
            with open(path, "w") as f:
                f.write(files[name])
            print(f"wrote {path}")
    return 0


def _explain(args, parser) -> int:
    from .explain import default_dtype, explain

    try:
        if args.dtype is not None and len(args.dtype) > 2:
            raise ValueError(f"--dtype takes one dtype, or one per --isa profile, got {' '.join(args.dtype)}")
        dtypes = args.dtype if args.dtype is not None else [default_dtype(*args.isa)]
        dtype = dtypes[0] if len(dtypes) == 1 else (dtypes[0], dtypes[1])
        instr = instructions.resolve(args.isa[0], dtypes[0])[2]
        instructions.resolve(args.isa[1], dtypes[-1])
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


# --------------------------------------------------------------------------------------------
# info
# --------------------------------------------------------------------------------------------


#: The blocked INT8 bodies' dot products (``targets.Entry.int_kind``), as ``info`` names them.
_INT_KINDS = {
    "vnni": "VPDPBUSD (AVX512_VNNI)",
    "madd": "VPMADDWD on widened bytes (no VPDPBUSD: it needs +avx512vnni)",
    "widen": "VPMADDWD's sums in target-independent IR on widened bytes (no x86 dot product here)",
}


def info(out=None) -> int:
    """Print the records: instructions, profiles, and the kernel bodies for this host."""
    out = sys.stdout if out is None else out
    from . import dispatch, native
    from .kernels import targets

    print("instructions", file=out)
    print(f"  {'mnemonic':12} {'A':5} {'B':5} {'group':>5} {'K/instr':>7} {'acc':8} {'kernel':9} doc", file=out)
    for i in instructions.INSTRUCTIONS.values():
        print(
            f"  {i.mnemonic:12} {i.a.name:5} {i.b.name:5} {i.group:5d} {i.k_step:7d} {str(i.acc):8} "
            f"{i.kernel:9} {i.doc}",
            file=out,
        )
        for sw in i.switches:
            print(f"  {'':12} switch {sw.name}: {' | '.join(map(str, sw.values))} (default {sw.default})", file=out)
    print("\nprofiles (isa=)", file=out)
    for p in PROFILES.values():
        names = ", ".join(f"{d} -> {i.mnemonic}" for d, i in p.dtypes.items())
        aliases = "".join(f", {a} = {t}" for a, t in p.aliases.items())
        print(f"  {p.name:8} {p.summary}", file=out)
        print(f"  {'':8} {names}{aliases}", file=out)
    cls = targets.target_class()
    cpu, _ = targets.target()
    row = targets.plan()
    where = f"table row {row.name}" if row is not None else "no table row: the superblock loop"
    print(f"\nkernels on this host (LLVM CPU {cpu}, {where}; target class {cls})", file=out)
    if row is not None:
        have = targets.engines()
        need = {e: ", ".join(sorted(n - targets.target_features())) for e, n in targets.ENGINE_NEEDS.items()}
        runs = have[0] if have else "fma"
        engines = ", ".join(["fma"] + [e if e in have else f"no {e} (needs {need[e]})" for e in need])
        print(f"  engines of the BF16 bodies (TDPBF16PS, VDPBF16PS): {engines}; {runs} runs", file=out)
        print(f"  INT8 dot product of the blocked bodies: {_INT_KINDS[row.int_kind]}", file=out)
    if targets.has_mxcsr():
        fp8 = "runs (x86: MXCSR's precision flag)"
    else:
        fp8 = "not here (MXCSR is x86's): the exact body runs every step"
    print(f"  AMX-FP8's binary32 body, each step checked through MXCSR: {fp8}", file=out)
    host = native.this_host()
    if host.supported_os:
        own = "this CPU's own instructions, where /proc/cpuinfo lists them (python -m tilegemm selfcheck)"
    else:
        own = f"not here (Linux on x86-64 only; this is {host.system} {host.machine}): backend='auto' emulates"
    print(f"  backend='native': {own}", file=out)
    listed = set()  # a kernel several profiles run (VPDPBUSD: avx512_vnni and ace) is listed once
    for fam in dispatch.FAMILIES.values():
        for isa, profile in PROFILES.items():
            for dtype, instr in profile.dtypes.items():
                if instr.kernel == fam.name and profile.library is None:
                    k = dispatch.lookup(isa, dtype, "2x2")
                    if k.name in listed:
                        continue
                    listed.add(k.name)
                    b = k.body
                    kind = "blocked " + (k.blocked_name or "") if k.blocked_name else f"superblock {fam.fast}"
                    if fam.fallback is not None:
                        kind += f" (where its proof fails: family {fam.fallback})"
                    print(f"  {k.name:44} {b.rows} x {b.cols}, {b.width} lanes   {kind}", file=out)
    print("\nper-target table (kernels/targets.py): bodies rows x columns / lanes, K chunk, INT8 dot product", file=out)
    for e in targets.TABLE:
        bodies = f"bf16 {e.pairs_bf16}, fp16 {e.pairs_fp16}, vdp {e.dot}, int8 {e.quads} {e.int_kind}"
        print(f"  {e.name:18} {bodies}, K chunk {e.kc}: {', '.join(e.cpus)}", file=out)
    print(f"\nsuperblock loop, per target class: {', '.join(c for c, _ in targets.CLASSES)}", file=out)
    for c, _ in targets.CLASSES:
        shapes = ", ".join(
            f"{f.name} {s.rows}x{s.cols}/{s.width}" for f in dispatch.FAMILIES.values() if (s := f.shapes.get(c))
        )
        print(f"  {c:12} {shapes}", file=out)
    print("\nthe instruction itself where the CPU has it (kernels/targets.py NATIVE)", file=out)
    for emulated, nat in targets.NATIVE.items():
        lacks = targets.native_missing(emulated)
        here = "runs here" if not lacks else f"not here: this CPU lacks {','.join(f.lstrip('+') for f in lacks)}"
        needs = ",".join(sorted(f.lstrip("+") for f in nat.needs))
        print(f"  {emulated} -> {nat.family} with {needs}: {here}", file=out)
    return 0


# --------------------------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------------------------


def _parser() -> _Parser:
    """The parser; ``parser.verbs`` maps each verb to its sub-parser (for its own errors)."""
    from . import inspect

    amx_dtypes = list(PROFILES[DEFAULT_ISA].names())
    all_dtypes = list(instructions.DTYPES)
    parser = _Parser(
        prog="python -m tilegemm",
        description="Intel AMX tile matrix multiplies, bit for bit, on any CPU.",
        epilog="Run 'python -m tilegemm VERB --help' for a verb's options.",
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    for verb, text in _VERBS.items():
        sub.add_parser(verb, help=text, description=text[0].upper() + text[1:] + ".")
    p = sub.choices
    parser.verbs = p  # type: ignore[attr-defined]
    precompile.add_arguments(p["compile"])

    p["demo"].add_argument(
        "--sizes",
        type=_positive_int(4096, "a size"),
        nargs="+",
        default=[64, 256, 512],
        help="square sizes to time (default 64 256 512)",
    )

    b = p["bench"]
    b.add_argument(
        "--sizes",
        type=_positive_int(8192, "a size"),
        nargs="+",
        default=None,
        help="square sizes, 1 to 8192 (default 256 512 1024 2048; with --targets: 1024 2048)",
    )
    b.add_argument(
        "--dtypes",
        nargs="+",
        default=["bf16", "int8", "fp16"],
        choices=amx_dtypes,
        help="dtypes to sweep (default: the seed's bf16 int8 fp16)",
    )
    b.add_argument(
        "--threads",
        type=_positive_int(_threads_limit(), "--threads"),
        default=None,
        help=f"threads for every contender alike, 1 to {_threads_limit()} (default: all)",
    )
    b.add_argument("--budget", type=_positive_float, default=30.0, help="seconds per contender and size (default 30)")
    b.add_argument(
        "--out",
        default=None,
        help="folder for bench.json, bench.csv, bench.png (targets.json with --targets); default: "
        "bench-results in tilegemm's user cache folder (~/.cache/tilegemm on Linux), never the working tree",
    )
    b.add_argument(
        "--tilings", nargs="+", default=["1x1", "2x2"], choices=list(TILINGS), help="tilegemm tilings (default 1x1 2x2)"
    )
    b.add_argument("--targets", action="store_true", help="measure the performance targets instead of the sweep")
    b.add_argument(
        "--native", action="store_true", help="the seed's sweep on this CPU's AMX: 1x1 vs 2x2, to 8192, TFLOP/s"
    )
    b.add_argument(
        "--torch-mode", action="store_true", help="time tilegemm.torch.emulate() against a bare tilegemm.matmul"
    )
    b.add_argument("--host", action="store_true", help="print one line naming this CPU and its kernels' table row")
    b.add_argument(
        "--body", action="store_true", help="time each kernel body alone (operands in L1) against the FMA peak"
    )

    m = p["model"]
    m.add_argument("--m", type=_positive_int(name="--m"), default=32768, help="rows of A and C (default 32768)")
    m.add_argument("--n", type=_positive_int(name="--n"), default=32768, help="columns of B and C (default 32768)")
    m.add_argument("--k", type=_positive_int(name="--k"), default=32768, help="the inner dimension (default 32768)")
    m.add_argument("--dtype", default="int8", choices=amx_dtypes, help="element type (default int8)")
    m.add_argument("--measure", type=int, default=1024, help="size to time every tiling at, 0 to skip (default 1024)")
    m.add_argument(
        "--threads", type=_positive_int(_threads_limit(), "--threads"), default=None, help="threads for the timing"
    )

    i = p["ir"]
    i.add_argument("--dtype", default="bf16", choices=all_dtypes, help="dtype (default bf16)")
    i.add_argument("--tiling", default="2x2", choices=list(TILINGS) + ["auto"], help="tiling (default 2x2)")
    i.add_argument("--isa", default=DEFAULT_ISA, choices=list(ISAS), help=f"profile (default {DEFAULT_ISA})")
    i.add_argument("--asm", action="store_true", help="print the hot loop's assembly")
    i.add_argument(
        "--cpu", default=None, choices=list(inspect.TARGETS), help="compile for this target instead of the host"
    )
    i.add_argument("--amx", action="store_true", help="also print the seed-style loop as Granite Rapids AMX code")
    i.add_argument(
        "--native", action="store_true", help="print the native GEMM (backend='native') for --cpu (Granite Rapids)"
    )
    i.add_argument("--out", default=None, help="write kernel.ll and kernel.s (and amx.ll, amx.s with --amx) here")
    p["selfcheck"].add_argument("--quick", action="store_true", help="10^5 outputs per instruction instead of 10^6")
    ex = p["explain"]
    ex.add_argument("--isa", nargs=2, default=["amx", "avx2"], choices=list(ISAS), metavar="ISA", help="two profiles")
    ex.add_argument(
        "--dtype",
        nargs="+",
        default=None,
        choices=all_dtypes,
        metavar="DTYPE",
        help="one dtype, or one per profile (tf32 bf16); default: the first dtype both take",
    )
    ex.add_argument("--a", default=None, help="A (M x K) as a .npy file")
    ex.add_argument("--b", default=None, help="B (K x N) as a .npy file")
    ex.add_argument("--c", default=None, help="a starting C (M x N) as a .npy file")
    ex.add_argument(
        "--shape", nargs=3, type=int, default=[16, 4096, 16], metavar=("M", "K", "N"), help="random operands' shape"
    )
    ex.add_argument("--seed", type=int, default=0, help="seed of the random operands")
    ex.add_argument("--index", nargs=2, type=int, default=None, metavar=("M", "N"), help="the output to replay")
    fl = p["fleet"]
    fl.add_argument("--demo", action="store_true", help="run the built-in model (tilegemm.torch.demo_model)")
    fl.add_argument(
        "--hosts",
        nargs="+",
        default=None,
        metavar="HOST",
        help="names of tilegemm.onednn.HOSTS (default: one per class)",
    )
    fl.add_argument(
        "--plot", default=None, metavar="PNG", help="also draw the heatmap into this file (needs matplotlib)"
    )
    return parser


def _fleet(args, sub) -> int:
    from .onednn import HOSTS

    if not args.demo:
        sub.error("give --demo (for your own model, call tilegemm.torch.compare(model, *inputs, hosts=[...]))")
    for h in args.hosts or ():
        if h not in HOSTS:
            sub.error(f"argument --hosts: unknown host {h!r}; the named hosts are {', '.join(HOSTS)}")
    if args.hosts is not None and len(set(args.hosts)) < 2:
        sub.error("argument --hosts: give at least two different hosts")
    try:
        from . import torch as tt
    except ImportError as e:
        sub.error(str(e))
    model, x = tt.demo_model()
    result = tt.compare(model, x, hosts=tuple(args.hosts or tt.FLEET))
    print("A 2-block GPT-like model (d = 128, 4 heads, MLP 512, batch 2 x 64 tokens, bf16), run once per host;")
    print("each layer's output compared bit for bit between hosts (max ulp: among outputs of one sign).")
    print("Only the matrix products are modelled per host: the other operations run on this machine's PyTorch.")
    print()
    print(result.table())
    if args.plot:
        ax = result.plot()
        ax.figure.savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"\nheatmap: {args.plot}")
    return 0


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    sub = parser.verbs[args.verb]  # type: ignore[attr-defined]
    if args.verb == "ir":
        return _ir(args, sub)
    if args.verb == "info":
        return info()
    if args.verb == "explain":
        return _explain(args, sub)
    if args.verb == "fleet":
        return _fleet(args, sub)
    if args.verb == "selfcheck":
        from .native import selfcheck

        return int(selfcheck.main(args.quick))
    if args.verb == "model":
        from . import benchmark

        if args.measure < 0:
            sub.error(f"argument --measure: must be 0 (skip) or a size, got {args.measure}")
        benchmark.model_report(args.m, args.n, args.k, args.dtype, args.measure, args.threads)
        return 0
    if args.verb == "demo":
        return demo(tuple(args.sizes))
    if args.verb == "compile":
        if args.only:
            try:
                precompile.parse_only(args.only)
            except ValueError as e:
                sub.error(str(e))
        if args.processes is not None and args.processes < 1:
            sub.error(f"argument --processes: must be at least 1, got {args.processes}")
        return precompile.compile_all(args)
    from . import benchmark

    args.sizes_given = args.sizes is not None
    args.sizes = args.sizes or [256, 512, 1024, 2048]
    return benchmark.main(args)


if __name__ == "__main__":
    sys.exit(main())

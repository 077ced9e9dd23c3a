"""``python -m tilegemm selfcheck``: the emulation against this CPU's own instructions.

For every instruction record (:data:`tilegemm.instructions.INSTRUCTIONS`) this host can run
natively (:func:`tilegemm.native.usable`: its CPU flags, and for tiles the kernel's permission),
the same operands go through ``tilegemm.matmul`` twice, ``backend="emulated"`` and
``backend="native"``, and every output is compared with :func:`tilegemm.bitdiff` (all its bits,
NaN signs and payloads included; payload-only differences are also counted apart). Operands
come in adversarial families, generated per number format from a fixed seed:

- float formats: ``denormals`` (inputs below the format's normal range, products near binary32's),
  ``tininess`` (products and accumulators at 2^-126, where tininess after rounding decides),
  ``overflow`` (products and accumulators beyond binary32's range, infinities of both signs),
  ``nan_inf``, ``nan_payloads`` (16-bit formats: NaNs of random payloads and signs, quiet and
  signaling, in A, B and C, beside infinities and zeros for Inf x 0; passed as the format's own
  codes so that no conversion touches them), ``cancellation`` (x and -x along K, signed zeros, a
  -0 accumulator),
  ``random_accumulate`` (a random C continued), ``long_k`` (K up to 4100);
- integer formats: ``extremes``, ``random``, ``wrap`` (int32 sums past 2^31), ``long_k``.

Shapes have partial tiles at both edges; K runs through 1, whole steps, one past, and the
tail; cases cycle through every tiling and 1, 2 and all threads. A full run compares at least
10^6 outputs per instruction, ``--quick`` 10^5. Instructions the host cannot run are listed
with what they need; the exit status is 1 if any output differs, else 0 (also when nothing
could run).
"""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..instructions import INSTRUCTIONS, PROFILES, Instruction, find, profile
from .host import this_host

__all__ = ["Case", "Result", "families", "plan", "cases", "check", "main", "FULL", "QUICK"]

FULL, QUICK = 1_000_000, 100_000
FLOAT_FAMILIES = (
    "denormals",
    "tininess",
    "overflow",
    "nan_inf",
    "nan_payloads",
    "cancellation",
    "random_accumulate",
    "long_k",
)
INT_FAMILIES = ("extremes", "random", "wrap", "long_k")
# Output shapes (M, N): whole superblocks and partial tiles on both edges, wide and tall.
SHAPES_FULL = ((160, 160), (150, 170), (191, 133), (97, 301), (255, 129), (33, 700), (700, 33), (128, 96))
SHAPES_QUICK = ((64, 64), (33, 47), (100, 61), (17, 113), (113, 17), (50, 80))
LONG_K = (4100, 4097, 2049)


@dataclass
class Case:
    """One comparison: operands as the caller passes them (exact values of the formats)."""

    family: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None  # the accumulate start, or None
    tiling: str
    threads: int

    @property
    def outputs(self) -> int:
        return self.a.shape[0] * self.b.shape[1]

    def __str__(self) -> str:
        M, K = self.a.shape
        acc = ", accumulate" if self.c is not None else ""
        shape = f"M x N x K = {M} x {self.b.shape[1]} x {K}"
        return f"{self.family}: {shape}, tiling {self.tiling}, {self.threads} thread(s){acc}"


def families(instr: Instruction) -> tuple[str, ...]:
    return FLOAT_FAMILIES if instr.is_float else INT_FAMILIES


def _floats(shape, lo: int, hi: int, rng) -> np.ndarray:
    """float64 values +-(1 + f) 2^e, e uniform in [lo, hi], f with 52 random bits."""
    sign = rng.choice([-1.0, 1.0], shape)
    return sign * (1.0 + rng.random(shape)) * np.exp2(rng.integers(lo, hi + 1, shape).astype(np.float64))


def _exact(fmt, x) -> np.ndarray:
    """``x`` rounded to the format once and held exactly in float32 (what both backends read)."""
    return fmt.decode(fmt.to_codes(np.asarray(x), "operand", fmt.name))


def _sprinkle(x: np.ndarray, share: float, values, rng) -> np.ndarray:
    x = x.copy()
    mask = rng.random(x.shape) < share
    x[mask] = rng.choice(np.asarray(values, x.dtype), int(mask.sum()))
    return x


def _float_case(instr: Instruction, family: str, M: int, K: int, N: int, rng):
    """(a, b, c) for a float family; values are exact in the operand formats and binary32."""
    fa, fb = instr.a, instr.b
    # Exponent range of the format's normals: BF16 [-126, 127], FP16 [-14, 15].
    bias = 2 ** (8 * fa.nbytes - fa.precision - 1) - 1
    emin, emax = 1 - bias, bias
    sub = emin - fa.precision + 1  # smallest denormal's exponent
    c = None
    if family == "denormals":
        a = _floats((M, K), sub, emin - 1, rng)  # below the normal range
        a = np.where(rng.random((M, K)) < 0.5, a, _floats((M, K), emin // 2 - 2, emin // 2 + 2, rng))
        b = _floats((K, N), emin // 2 - 7, emin // 2 + 7, rng)
        b = np.where(rng.random((K, N)) < 0.4, _floats((K, N), sub, emin - 1, rng), b)
        c = _sprinkle(_floats((M, N), -149, -120, rng), 0.3, [-0.0, 0.0], rng)
    elif family == "tininess":
        half = -63 if emin < -63 else emin  # products at 2^-126 where the format reaches it
        a = _floats((M, K), half - 4, half + 3, rng)
        b = _floats((K, N), half - 4, half + 3, rng)
        c = _floats((M, N), -127, -124, rng)
    elif family == "overflow":
        top = min(emax - 4, 60)  # BF16: products up to 2^131; FP16 stays finite, C overflows
        a = _floats((M, K), top - 4, top + 4, rng)
        b = _floats((K, N), top - 4, min(emax, top + 7), rng)
        a = _sprinkle(a, 0.01, [np.inf, -np.inf], rng)
        c = _sprinkle(_floats((M, N), 120, 127, rng), 0.05, [np.inf, -np.inf], rng)
    elif family == "nan_inf":
        a = _sprinkle(rng.standard_normal((M, K)), 0.02, [np.nan, np.inf, -np.inf], rng)
        b = _sprinkle(rng.standard_normal((K, N)), 0.02, [np.nan, np.inf, -np.inf, 0.0], rng)
        c = _sprinkle(rng.standard_normal((M, N)), 0.05, [np.nan, np.inf, -np.inf], rng)
    elif family == "cancellation":
        x = _floats((M, (K + 1) // 2), -12, 12, rng)
        a = np.empty((M, K))
        a[:, 0::2] = x[:, : (K + 1) // 2]
        a[:, 1::2] = -x[:, : K // 2]
        b = np.repeat(_floats(((K + 1) // 2, N), -12, 12, rng), 2, axis=0)[:K]
        a = _sprinkle(a, 0.05, [-0.0, 0.0], rng)
        c = np.full((M, N), -0.0)
    elif family == "random_accumulate":
        a = _floats((M, K), -8, 8, rng)
        b = _floats((K, N), -8, 8, rng)
        c = _sprinkle(_floats((M, N), -10, 10, rng), 0.05, [-0.0, 2.0**-130, -(2.0**-140)], rng)
    elif family == "nan_payloads":
        c = _nan_floats32(rng.standard_normal((M, N)).astype(np.float32), rng)
        if fa.nbytes == 2 and fb.nbytes == 2:
            return _nan_codes(fa, (M, K), rng), _nan_codes(fb, (K, N), rng), c
        a = _sprinkle(rng.standard_normal((M, K)), 0.1, [np.nan, np.inf, 0.0], rng)  # no payloads to vary
        b = _sprinkle(rng.standard_normal((K, N)), 0.1, [np.nan, -np.inf, -0.0], rng)
    else:  # long_k
        a = rng.standard_normal((M, K))
        b = rng.standard_normal((K, N))
    with np.errstate(all="ignore"):
        return _exact(fa, a), _exact(fb, b), (None if c is None else c.astype(np.float32))


def _nan_codes(fmt, shape, rng) -> np.ndarray:
    """A 16-bit float format's codes as its own element type: normal values, with 20% NaNs of
    random payloads (quiet and signaling) and signs, 5% infinities and 5% zeros of both signs."""
    mant = fmt.precision - 1
    top = ((1 << (15 - mant)) - 1) << mant  # the exponent field, all ones
    with np.errstate(all="ignore"):
        codes = fmt.to_codes(rng.standard_normal(shape).astype(np.float32), "operand", fmt.name).copy()
    pick = rng.random(shape)
    sign = rng.integers(0, 2, shape).astype(np.uint16) << 15
    payload = rng.integers(1, 1 << mant, shape).astype(np.uint16)
    codes = np.where(pick < 0.2, sign | top | payload, codes)
    codes = np.where((pick >= 0.2) & (pick < 0.25), sign | top, codes)
    codes = np.where((pick >= 0.25) & (pick < 0.3), sign, codes)
    return codes.astype(np.uint16).view(fmt.element)


def _nan_floats32(x: np.ndarray, rng) -> np.ndarray:
    """``x`` with 10% binary32 NaNs of random payloads (quiet and signaling) and signs."""
    bits = x.view(np.uint32).copy()
    mask = rng.random(x.shape) < 0.1
    n = int(mask.sum())
    payload = rng.integers(1, 1 << 23, n).astype(np.uint32)
    bits[mask] = (rng.integers(0, 2, n).astype(np.uint32) << 31) | np.uint32(0x7F800000) | payload
    return bits.view(np.float32)


def _int_case(instr: Instruction, family: str, M: int, K: int, N: int, rng):
    fa, fb = instr.a, instr.b

    def ints(fmt, shape):
        info = np.iinfo(fmt.storage)
        if family in ("extremes", "wrap", "long_k"):
            pick = [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]
            return rng.choice(np.array([v for v in pick if info.min <= v <= info.max], fmt.storage), shape)
        return rng.integers(info.min, info.max + 1, shape).astype(fmt.storage)

    c = None
    if family == "wrap":
        c = rng.choice(np.array([2**31 - 1, -(2**31), 2**31 - 2**15, -(2**31) + 7], np.int32), (M, N))
    elif family == "random":
        c = rng.integers(-(2**31), 2**31, (M, N)).astype(np.int32)
    return ints(fa, (M, K)), ints(fb, (K, N)), c


def plan(instr: Instruction, outputs: int):
    """The cases' parameters, ``(family, M, K, N, tiling, threads)``, until at least ``outputs``
    outputs are covered: families in turn, shapes and K values cycling, every tiling in turn
    (profiles with tiles) and 1, 2 and all threads."""
    import numba

    from ..dispatch import TILINGS

    isa, _ = find(instr)
    tilings = itertools.cycle(TILINGS if profile(isa).tiled else ("2x2",))
    threads = itertools.cycle(sorted({1, min(2, numba.config.NUMBA_NUM_THREADS), numba.config.NUMBA_NUM_THREADS}))
    step = instr.k_step
    ks = itertools.cycle((1, 2, step - 1, step, step + 1, 2 * step + 3, 4 * step, 1000, 257))
    shapes = itertools.cycle(SHAPES_QUICK if outputs <= QUICK else SHAPES_FULL)
    longs = itertools.cycle(LONG_K)
    done = 0
    for family in itertools.cycle(families(instr)):
        M, N = next(shapes)
        if family == "long_k":
            K = next(longs)
            M, N = max(1, M // 4), max(1, N // 2)
        else:
            K = next(ks)
        yield family, M, K, N, next(tilings), next(threads)
        done += M * N
        if done >= outputs:
            return


def cases(instr: Instruction, outputs: int, seed: int = 0):
    """The :class:`Case` objects of :func:`plan`, operands drawn from a fixed seed."""
    rng = np.random.default_rng([seed, sum(map(ord, instr.mnemonic))])
    make = _float_case if instr.is_float else _int_case
    for family, M, K, N, tiling, threads in plan(instr, outputs):
        a, b, c = make(instr, family, M, K, N, rng)
        yield Case(family, a, b, c, tiling, threads)


@dataclass
class Result:
    instr: Instruction
    compared: int = 0
    identical: int = 0
    cases: int = 0
    seconds: float = 0.0
    by_family: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    nans: int = 0  # outputs NaN on both sides
    nan_payloads: int = 0  # of those, NaNs whose payload or sign differs (also not ``identical``)

    @property
    def ok(self) -> bool:
        return self.compared == self.identical


def check(instr: Instruction, outputs: int = FULL, seed: int = 0) -> Result:
    """Compare native and emulated ``matmul`` for ``instr`` over :func:`cases`."""
    from .. import bitdiff
    from ..api import matmul

    isa, dtype = find(instr)
    res = Result(instr)
    t0 = time.perf_counter()
    for case in cases(instr, outputs, seed):
        got = {}
        for backend in ("emulated", "native"):
            kw = dict(isa=isa, backend=backend, threads=case.threads)
            if case.c is not None:
                out = case.c.copy()
                matmul(case.a, case.b, dtype, case.tiling, out=out, accumulate=True, **kw)
            else:
                out = matmul(case.a, case.b, dtype, case.tiling, **kw)
            got[backend] = out
        d = bitdiff(got["native"], got["emulated"])
        res.cases += 1
        res.compared += d.total
        res.identical += d.total - d.count
        fam = res.by_family.setdefault(case.family, [0, 0])
        fam[0] += d.total - d.count
        fam[1] += d.total
        res.nans += int((np.isnan(got["native"]) & np.isnan(got["emulated"])).sum()) if instr.is_float else 0
        res.nan_payloads += d.nan_payloads
        if d.count:
            res.failures.append(f"{case}: {d}")
    res.seconds = time.perf_counter() - t0
    return res


def main(quick: bool = False, out=sys.stdout, seed: int = 0) -> int:
    """Run the self-check, print one line per instruction; 1 if any output differs, else 0."""
    from . import lacks, needs, usable
    from .gemm import generator

    h = this_host()
    target = QUICK if quick else FULL
    print(f"tilegemm selfcheck{' --quick' if quick else ''}: native instructions against the emulation", file=out)
    print(f"CPU: {h.model} ({h.system} {h.machine})", file=out)
    if "amx_tile" not in h.flags:
        print("This CPU has no AMX (amx_tile is not in /proc/cpuinfo): no tile instruction can run here.", file=out)
    status = 0
    width = max(len(m) for m in INSTRUCTIONS)
    # Every instruction a dtype of an instruction profile runs (the parts of a composite record,
    # such as complex FP16's, are run through it).
    reachable = {id(i): i for p in PROFILES.values() if p.library is None for i in p.dtypes.values()}
    for instr in reachable.values():
        name = instr.mnemonic.ljust(width)
        if not usable(instr):
            missing = lacks(instr) or ("tile data permission (refused by the kernel)",)
            todo = list(plan(instr, target))
            n = sum(p[1] * p[3] for p in todo)
            if generator(instr) is None and not needs(instr):  # ACE's outer products: proposed, no CPU has them
                why = "no CPU implements it (a proposed instruction), so there is no silicon to ask"
            elif generator(instr) is None:
                why = f"tilegemm has no native program for it yet (it would need {', '.join(needs(instr))})"
            else:
                why = f"this host lacks {', '.join(missing)} (needs {', '.join(needs(instr))})"
            print(
                f"{name}  not run: {why}; "
                f"would compare {n:,} outputs in {len(todo)} cases: {', '.join(families(instr))}",
                file=out,
            )
            continue
        res = check(instr, target, seed)
        fams = ", ".join(f"{f} {ok:,}/{n:,}" for f, (ok, n) in res.by_family.items())
        # NaN payloads are in the verdict and also reported apart: a host whose silicon has
        # another NaN rule (a new AMX part, say) shows it at once, as such.
        payloads = (
            f"; NaN payload or sign differs in {res.nan_payloads:,} of {res.nans:,} NaN outputs" if res.nans else ""
        )
        print(
            f"{name}  {res.identical:,} of {res.compared:,} outputs identical "
            f"({res.cases} cases, {res.seconds:.1f} s; {fams}){payloads}",
            file=out,
        )
        if not res.ok:
            status = 1
            for line in res.failures[:10]:
                print(f"    DIFFERS {line}", file=out)
    return status

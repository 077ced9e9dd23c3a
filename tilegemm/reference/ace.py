"""The ACE outer products (AVX10 AI Compute Extensions), one instruction at a time, and the GEMM.

Slow on purpose. Each function here is one instruction on one palette-2 tile: C is 16 x 16
dwords, A and B are zmm registers (64 bytes each), ``zA.dword[i]`` row i's K slice and
``zB.dword[j]`` column j's (``docs/ace.md``):

- :func:`top4_int`: TOP4BSSD / BSUD / BUSD / BUUD, ``C += sum of 4 byte products``, modulo 2^32.
- :func:`top4mx`: TOP4MXHF8PS / BF8PS / HBF8PS / BHF8PS / BSSPS. The four products and both
  block scales (E8M0, read from the block-scale register through imm8) meet in one exact value,
  rounded **once** (``fp8.round_scaled``: ties to even, flush to zero, overflow to infinity), then
  one binary32 add into C with DAZ. FP8 codes are read by their formula, NaN and infinity codes
  included, unless ``ace_fp8_specials="ieee_like"``.
- :func:`top2bf16`: TOP2BF16PS, one BF16 pair per dword, in each reading of ``ace_top2bf16``.

The GEMM functions (:func:`top4_int_gemm`, :func:`top4mx_gemm`, :func:`top2bf16_gemm`) cut C into
16 x 16 tiles and K into steps of one group (4 elements, 2 for BF16), in increasing order, one
instruction each: a 32-element MX block is 8 roundings, not one. The last step is padded with
zero codes and runs. For MX, a tile's block-scale register holds the scales of 4 consecutive
blocks (A's in the half A is read from, B's in the other) and step ``k0`` selects block
``k0 // 32`` with imm8, as a kernel would arrange them.
"""

from __future__ import annotations

import numpy as np

from ..ace import E8M0_NAN
from ..formats import NumberFormat, daz
from ..kernels import ace as _k
from ..kernels import exact as _exact
from ..kernels import rounding
from ..kernels._cache import lazy_vectorize
from .amx import wrap32
from .binary32 import INDEF, add32_read, add32_x86, fma32_read, fma32_x86
from .fp8 import FINITE, NAN, POS_INF, fix, kinds
from .trace import Op

# The kernel modules the ufuncs inline: a change to one recompiles the cached code.
_DEPENDS = (_k, _exact, rounding)

__all__ = [
    "TILE",
    "zmm",
    "scale_groups",
    "imm8_for",
    "reserved_imm8",
    "top4_int",
    "top4_int_rows",
    "top4mx",
    "top4mx_rows",
    "round_exact",
    "top2bf16",
    "top2bf16_rows",
    "top4_int_gemm",
    "top4mx_gemm",
    "top4mx_gemm_tiles",
    "top2bf16_gemm",
    "fma32_ieee",
]

TILE = 16
_DEFAULT_FIELDS = "A=[1:0],B=[4:3]"
#: imm8 fields of the scale groups, by ace_scale_imm_fields value: (A's shift, B's shift), 2 bits each.
_FIELDS = {"A=[1:0],B=[4:3]": (0, 3), "A=[5:4],B=[1:0]": (4, 0)}


def zmm(x, what: str = "zmm") -> np.ndarray:
    """A zmm register's 64 bytes (uint8) from any 64-byte array; ``ValueError`` otherwise."""
    x = np.asarray(x)
    if x.nbytes != 64 or x.dtype.kind not in "iuf" and x.dtype.type.__module__ != "ml_dtypes":
        raise ValueError(f"{what} must be a numpy array of 64 bytes (a zmm register), got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x).view(np.uint8).reshape(64)


def scale_groups(imm8: int, fields: str = _DEFAULT_FIELDS) -> tuple[int, int]:
    """(A's scale group, B's scale group) that an MX outer product's imm8 selects."""
    sa, sb = _FIELDS[fields]
    return (imm8 >> sa) & 3, (imm8 >> sb) & 3


def imm8_for(ga: int, gb: int, fields: str = _DEFAULT_FIELDS) -> int:
    """The imm8 that selects groups ``ga`` and ``gb`` (no reserved bit set)."""
    sa, sb = _FIELDS[fields]
    return (ga << sa) | (gb << sb)


def reserved_imm8(imm8: int, fields: str = _DEFAULT_FIELDS) -> int:
    """The imm8 bits no scale group field uses."""
    sa, sb = _FIELDS[fields]
    return imm8 & ~((3 << sa) | (3 << sb)) & 0xFF


# -- the instructions --------------------------------------------------------------------------------


def top4_int_rows(c: np.ndarray, a: np.ndarray, b: np.ndarray, fa: NumberFormat, fb: NumberFormat) -> np.ndarray:
    """One TOP4B*D step for M x N outputs: ``a`` (M, 4) and ``b`` (4, N) bytes, read as ``fa`` and
    ``fb`` (S8 or U8: the letters of the mnemonic), ``c`` (M, N) int32; modulo 2^32."""
    a = np.asarray(a).view(fa.storage).astype(np.int64)
    b = np.asarray(b).view(fb.storage).astype(np.int64)
    acc = np.asarray(c, np.int64).copy()
    for e in range(4):
        acc += a[:, None, e] * b[None, e, :]
    return wrap32(acc)


def top4_int(c: np.ndarray, za, zb, fa: NumberFormat, fb: NumberFormat) -> np.ndarray:
    """TOP4B[SU][SU]D on a 16 x 16 int32 tile: ``C[i][j] += sum_e ext(zA.byte[4i+e]) *
    ext(zB.byte[4j+e])``, modulo 2^32."""
    return top4_int_rows(c, zmm(za, "zA").reshape(TILE, 4), zmm(zb, "zB").reshape(TILE, 4).T, fa, fb)


def _fixes(codes: np.ndarray, fmt: NumberFormat, every_code: bool) -> np.ndarray:
    """Exact integers ``value * 2^shift`` (Python ints): an 8-bit float by its formula, MXINT8 the
    byte as a signed integer."""
    if fmt.minifloat is None:
        return codes.view(np.int8).astype(object)
    return fix(codes, fmt.minifloat, every_code=every_code).astype(object)


def _shift(fmt: NumberFormat) -> int:
    return fmt.minifloat.fix_shift if fmt.minifloat is not None else fmt.fixed_point


@lazy_vectorize(["float32(int64, int64, int64)"], _DEPENDS)
def _round_limbs(hi, lo, e):
    return _exact.round_scaled(hi, lo, e)


def round_exact(sop: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``RNE32(sop * 2^e)`` for arrays of exact Python integers ``sop``: 24 significant bits, ties
    to even, then flush below 2^-126 and infinity from 2^128; +0 for 0. The integers go to the
    compiled rounding (``fp8.round_scaled``'s twin, tested against it) as two int64 limbs."""
    hi = (sop >> 32).astype(np.int64)
    lo = (sop & 0xFFFFFFFF).astype(np.int64)
    return np.asarray(_round_limbs(hi, lo, np.asarray(e, np.int64)), np.float32)


def top4mx_rows(
    c: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    sa: np.ndarray,
    sb: np.ndarray,
    fa: NumberFormat,
    fb: NumberFormat,
    *,
    ace_fp8_specials: str = "arithmetic",
    ace_e8m0_nan_result: str = "0x7FC00000",
    ace_dst_nan: str = "propagate",
) -> np.ndarray:
    """The arithmetic of one MX outer-product step for M x N outputs: ``a`` (M, 4) and ``b``
    (4, N) codes, ``sa`` (M,) and ``sb`` (N,) the E8M0 scales each row and column reads, ``c``
    (M, N) float32. Returns the new C."""
    sa = np.asarray(sa).astype(np.int64)
    sb = np.asarray(sb).astype(np.int64)
    ieee = ace_fp8_specials == "ieee_like"
    xa, xb = _fixes(a, fa, not ieee), _fixes(b.T, fb, not ieee)  # (M, 4), (N, 4)
    sop = sum(xa[:, None, e] * xb[None, :, e] for e in range(4))  # exact integers
    exps = sa[:, None] + sb[None, :] - 254 - (_shift(fa) + _shift(fb))
    s = round_exact(sop, exps)  # one rounding; sop = 0 gives +0
    if ieee:  # AMX-FP8's rules: a NaN, Inf * 0 or +Inf with -Inf give INDEF; an infinity, itself
        assert fa.minifloat is not None and fb.minifloat is not None  # ieee_like: FP8 formats only
        ka, kb = kinds(a, fa.minifloat), kinds(b.T, fb.minifloat)
        nan = np.zeros(s.shape, bool)
        pinf = np.zeros(s.shape, bool)
        ninf = np.zeros(s.shape, bool)
        for e in range(4):
            kx, ky = ka[:, None, e], kb[None, :, e]
            zero_x = (kx == FINITE) & (xa[:, None, e] == 0)
            zero_y = (ky == FINITE) & (xb[None, :, e] == 0)
            inf = (kx >= POS_INF) | (ky >= POS_INF)
            nan |= (kx == NAN) | (ky == NAN) | (inf & (zero_x | zero_y))
            negative = (a[:, None, e] >> 7) != (b.T[None, :, e] >> 7)
            pinf |= inf & ~negative
            ninf |= inf & negative
        nan |= pinf & ninf
        s = np.where(nan, INDEF.view(np.float32), np.where(pinf, np.inf, np.where(ninf, -np.inf, s))).astype(np.float32)
    out = add32_x86(daz(c), s)  # DAZ on C; a NaN C comes out quieted, else a NaN s
    if ace_dst_nan == "indefinite":
        out = np.where(np.isnan(c), INDEF.view(np.float32), out)
    nan_scale = (sa == 0xFF)[:, None] | (sb == 0xFF)[None, :]  # C not read
    return np.where(nan_scale, np.uint32(int(ace_e8m0_nan_result, 16)).view(np.float32), out).astype(np.float32)


def top4mx(
    c: np.ndarray,
    za,
    zb,
    h,
    l,
    imm8: int,
    fa: NumberFormat,
    fb: NumberFormat,
    *,
    ace_scale_imm_fields: str = _DEFAULT_FIELDS,
    ace_bsr_a_half: str = "high",
    **switches,
) -> np.ndarray:
    """One TOP4MX*PS on a 16 x 16 float32 tile ``c``; ``h``, ``l``: the block-scale register's
    halves (64 E8M0 bytes each); imm8 selects each side's scale group. Returns the new tile."""
    ga, gb = scale_groups(imm8, ace_scale_imm_fields)
    a_half, b_half = (h, l) if ace_bsr_a_half == "high" else (l, h)
    sa = zmm(a_half, "BSR half").reshape(TILE, 4)[:, ga]  # row i: byte 4i + gA
    sb = zmm(b_half, "BSR half").reshape(TILE, 4)[:, gb]  # column j: byte 4j + gB
    a = zmm(za, "zA").reshape(TILE, 4)  # dword i: row i's four K elements
    b = zmm(zb, "zB").reshape(TILE, 4).T  # dword j: column j's
    return top4mx_rows(c, a, b, sa, sb, fa, fb, **switches)


@lazy_vectorize(["uint32(uint32, uint32, uint32)"], _DEPENDS)
def _fma32_ieee_bits(a, b, c):
    return _k.x86_fma(a, b, c, True)


def fma32_ieee(a, b, c) -> np.ndarray:
    """``a * b + c`` rounded once to IEEE binary32 (ties to even, denormals kept, no DAZ), with
    x86's NaN rules. Broadcasts like a ufunc."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float32) for x in (a, b, c)))
    return _fma32_ieee_bits(a.view(np.uint32), b.view(np.uint32), c.view(np.uint32)).view(np.float32)


def top2bf16_rows(c: np.ndarray, a: np.ndarray, b: np.ndarray, *, ace_top2bf16: str = "sde") -> np.ndarray:
    """One TOP2BF16PS step for M x N outputs: ``a`` (M, 2) and ``b`` (2, N) BF16 codes (uint16),
    ``c`` (M, N) float32. Returns the new C."""
    a = (np.asarray(a, np.uint16).astype(np.uint32) << 16).view(np.float32)
    b = (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
    a0, a1 = a[:, None, 0], a[:, None, 1]
    b0, b1 = b[None, 0, :], b[None, 1, :]
    c = np.asarray(c, np.float32)
    minus0 = np.float32(-0.0)  # x*y + (-0) is the rounded product, its sign of zero kept
    with np.errstate(all="ignore"):
        if ace_top2bf16 == "sde":  # no DAZ; RNE32 with FTZ each; x86 NaN order
            p0 = fma32_x86(a0, b0, minus0)
            s = fma32_x86(a1, b1, p0)
            return add32_x86(c, s)
        if ace_top2bf16 == "gcc_chain":  # C + a0*b0, then C + a1*b1, each one IEEE rounding
            return fma32_ieee(a1, b1, fma32_ieee(a0, b0, c))
        a0, a1, b0, b1, c = daz(a0), daz(a1), daz(b0), daz(b1), daz(c)
        if ace_top2bf16 == "spec":  # DAZ; each product rounded (FTZ); their sum; C + s
            p0 = fma32_read(a0, b0, minus0)
            p1 = fma32_read(a1, b1, minus0)
            r = add32_read(c, add32_read(p0, p1))
        else:  # rs: IEEE products and sums, denormals kept inside; the sums flushed
            p0 = fma32_ieee(a0, b0, minus0)
            p1 = fma32_ieee(a1, b1, minus0)
            s = daz(fma32_ieee(p0, np.float32(1.0), p1))
            r = daz(fma32_ieee(c, np.float32(1.0), s))
    return np.where(np.isnan(r), INDEF.view(np.float32), r).astype(np.float32)


def top2bf16(c: np.ndarray, za, zb, *, ace_top2bf16: str = "sde") -> np.ndarray:
    """One TOP2BF16PS on a 16 x 16 float32 tile ``c``: each dword of zA and zB is a BF16 pair,
    element 0 in bits 15:0. Returns the new tile."""
    a = zmm(za, "zA").view("<u2").reshape(TILE, 2)
    b = zmm(zb, "zB").view("<u2").reshape(TILE, 2).T
    return top2bf16_rows(c, a, b, ace_top2bf16=ace_top2bf16)


# -- the GEMM, cut into outer products ----------------------------------------------------------------
# Every output's steps are the same instructions in the same order whichever 16 x 16 tile holds it,
# so the GEMM functions run each step on all of C at once (``*_rows``); top4mx_gemm_tiles runs the
# MX GEMM tile by tile through the block-scale register and imm8, as a kernel arranges them.


def _steps(instr, A: np.ndarray, B: np.ndarray):
    """(k0, A's columns, B's rows) of each step, the last one padded with zero codes."""
    K = A.shape[1]
    r = instr.group
    Kp = -(-K // r) * r
    a = np.zeros((A.shape[0], Kp), A.dtype)
    b = np.zeros((Kp, B.shape[1]), B.dtype)
    a[:, :K], b[:K] = A, B
    for k0 in range(0, Kp, r):
        yield k0, a[:, k0 : k0 + r], b[k0 : k0 + r]


def top4_int_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, trace=None) -> np.ndarray:
    """``C + A @ B`` through TOP4B*D outer products, modulo 2^32. ``A``, ``B``: codes. ``trace``
    (:class:`tilegemm.reference.trace.Trace`) records output [0, 0]'s outer products."""
    K = A.shape[1]
    if trace is not None:
        trace.start(C, "i32")
    for k0, a, b in _steps(instr, A, B):
        new = top4_int_rows(C, a, b, instr.a, instr.b)
        if trace is not None:
            xs = np.asarray(a[0]).view(instr.a.storage).astype(np.int64)
            ys = np.asarray(b[:, 0]).view(instr.b.storage).astype(np.int64)
            trace.int_op(instr.mnemonic, range(k0, k0 + instr.group), "C", xs, ys, C, new, "wrap32")
            trace.state(min(k0 + instr.group, K), new)
        C = new
    return C


def _bf16_values(codes) -> list[np.float32]:
    return [np.float32(x) for x in (np.asarray(codes, np.uint16).astype(np.uint32) << 16).view(np.float32)]


def _trace_top2bf16(trace, k0: int, a, b, c, result, reading: str) -> None:
    """Output [0, 0]'s operations in one TOP2BF16PS step, in the reading's order; the last one
    writes ``result`` (the step's value, from :func:`top2bf16_rows`)."""
    a0, a1 = _bf16_values(a[0])
    b0, b1 = _bf16_values(b[:, 0])
    c = np.float32(c)
    m0 = np.float32(-0.0)
    one = np.float32(1.0)
    what = "TOP2BF16PS"
    with np.errstate(all="ignore"):
        if reading == "sde":
            p0 = fma32_x86(a0, b0, m0)
            s = fma32_x86(a1, b1, p0)
            trace.float_op(f"{what} a0*b0", (k0,), "p0", (a0, b0, m0), (a0, b0, m0), p0, "fma32 ftz")
            trace.float_op(f"{what} a1*b1 + p0", (k0 + 1,), "s", (a1, b1, p0), (a1, b1, p0), s, "fma32 ftz")
            trace.float_op(f"{what} C + s", (), "C", (c, s), (c, s), result, "add32 ftz")
        elif reading == "gcc_chain":
            t = fma32_ieee(a0, b0, c)
            trace.float_op(f"{what} C + a0*b0", (k0,), "C", (a0, b0, c), (a0, b0, c), t, "fma32")
            trace.float_op(f"{what} C + a1*b1", (k0 + 1,), "C", (a1, b1, t), (a1, b1, t), result, "fma32")
        else:
            given = (a0, a1, b0, b1, c)
            ra0, ra1, rb0, rb1, rc = (np.float32(daz(x)) for x in given)  # type: ignore[arg-type]
            ieee = reading == "rs"
            fma = fma32_ieee if ieee else fma32_read
            p0, p1 = fma(ra0, rb0, m0), fma(ra1, rb1, m0)
            s = daz(fma32_ieee(p0, one, p1)) if ieee else add32_read(p0, p1)
            rule = "fma32" if ieee else "fma32 daz ftz"
            trace.float_op(f"{what} a0*b0", (k0,), "p0", (a0, b0, m0), (ra0, rb0, m0), p0, rule)
            trace.float_op(f"{what} a1*b1", (k0 + 1,), "p1", (a1, b1, m0), (ra1, rb1, m0), p1, rule)
            trace.float_op(f"{what} p0 + p1", (), "s", (p0, p1), (p0, p1), s, "add32 daz ftz")
            trace.float_op(f"{what} C + s", (), "C", (c, s), (rc, s), result, "add32 daz ftz")


def top2bf16_gemm(
    instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, ace_top2bf16: str = "sde", trace=None
) -> np.ndarray:
    """``C + A @ B`` through TOP2BF16PS outer products. ``A``, ``B``: BF16 codes (uint16).
    ``trace`` records output [0, 0]'s operations in the chosen reading's order."""
    C = np.asarray(C, np.float32)
    K = A.shape[1]
    if trace is not None:
        trace.start(C, "f32")
    for k0, a, b in _steps(instr, A, B):
        new = top2bf16_rows(C, a, b, ace_top2bf16=ace_top2bf16)
        if trace is not None:
            _trace_top2bf16(trace, k0, a, b, C[0, 0], new[0, 0], ace_top2bf16)
            trace.state(min(k0 + instr.group, K), new)
        C = new
    return C


def _scale_codes(instr, scales, M: int, K: int, N: int):
    blocks = -(-K // instr.scale_block)
    sa, sb = (None, None) if scales is None else scales
    sa = np.full((M, blocks), 0x7F, np.uint8) if sa is None else np.asarray(sa, np.uint8)
    sb = np.full((blocks, N), 0x7F, np.uint8) if sb is None else np.asarray(sb, np.uint8)
    return sa, sb


def _trace_top4mx(trace, instr, k0: int, a, b, sa: int, sb: int, c, result, switches) -> None:
    """Output [0, 0]'s MX step as two operations: the scaled sum of the four products rounded once
    (read as its binary64 head and tail; ``exact`` holds the sum, None where a NaN scale, or a NaN
    or infinite code under ``ace_fp8_specials="ieee_like"``, decides it), then the add into C."""
    from fractions import Fraction

    one = np.zeros((1, 1), np.float32)
    s = top4mx_rows(one, a[:1], b[:, :1], np.array([sa]), np.array([sb]), instr.a, instr.b, **switches)[0, 0]
    ieee = switches.get("ace_fp8_specials", "arithmetic") == "ieee_like"
    special = E8M0_NAN in (int(sa), int(sb))
    if ieee and instr.a.minifloat is not None:
        ka, kb = kinds(a[:1], instr.a.minifloat), kinds(b[:, :1].T, instr.b.minifloat)
        special |= bool((ka != FINITE).any() or (kb != FINITE).any())
    exact, head, tail = None, float("nan"), 0.0
    events: tuple[str, ...] = ()
    if not special:
        xa, xb = _fixes(a[:1], instr.a, True)[0], _fixes(b[:, :1].T, instr.b, True)[0]
        e = int(sa) + int(sb) - 254 - (_shift(instr.a) + _shift(instr.b))
        exact = Fraction(int(sum(x * y for x, y in zip(xa, xb)))) * Fraction(2) ** e
        head = float(exact)
        tail = float(exact - Fraction(head))
        if np.isinf(s):
            events = ("overflow",)
        elif s == 0 and exact != 0:
            events = ("FTZ",)
        elif Fraction(float(s)) != exact:
            events = ("rounding",)
    k = tuple(range(k0, k0 + instr.group))
    what = instr.mnemonic
    trace.ops.append(Op(f"{what} scaled sum", k, "s", "round once ftz", (head, tail), (head, tail), exact, s, events))
    c = np.float32(c)
    trace.float_op(f"{what} C + s", (), "C", (c, s), (np.float32(daz(c)), s), result, "add32 daz ftz")


def top4mx_gemm(
    instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, scales=None, trace=None, **switches
) -> np.ndarray:
    """``C + A @ B`` through TOP4MX*PS outer products. ``A``, ``B``: codes; ``scales``: E8M0
    codes ``(sa (M, blocks), sb (blocks, N))``, either None (1.0). The step at ``k0`` reads block
    ``k0 // 32`` of each row's and column's scales: one rounding per step, 8 per block. ``trace``
    records output [0, 0]'s steps."""
    M, K = A.shape
    sa, sb = _scale_codes(instr, scales, M, K, B.shape[1])
    C = np.asarray(C, np.float32)
    if trace is not None:
        trace.start(C, "f32")
    for k0, a, b in _steps(instr, np.asarray(A).view(np.uint8), np.asarray(B).view(np.uint8)):
        block = k0 // instr.scale_block
        new = top4mx_rows(C, a, b, sa[:, block], sb[block], instr.a, instr.b, **switches)
        if trace is not None:
            _trace_top4mx(trace, instr, k0, a, b, sa[0, block], sb[block, 0], C[0, 0], new[0, 0], switches)
            trace.state(min(k0 + instr.group, K), new)
        C = new
    return C


def _half(scales: np.ndarray, first: int) -> np.ndarray:
    """64 BSR bytes: byte ``4i + g`` the scale of row (or column) i for block ``first + g`` (0x7F
    past the operand)."""
    out = np.full((TILE, 4), 0x7F, np.uint8)
    window = scales[:TILE, first : first + 4]
    out[: window.shape[0], : window.shape[1]] = window
    return out.reshape(64)


def top4mx_gemm_tiles(
    instr,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    *,
    scales=None,
    ace_scale_imm_fields: str = _DEFAULT_FIELDS,
    ace_bsr_a_half: str = "high",
    **switches,
) -> np.ndarray:
    """:func:`top4mx_gemm` tile by tile through the instruction itself: every 4 blocks a tile's
    block-scale register is loaded (BSRMOVF) with its rows' and columns' scales of those blocks,
    each in the half the instruction reads A's or B's from under ``ace_bsr_a_half``, and step
    ``k0`` selects block ``(k0 // 32) % 4`` for both with imm8 under ``ace_scale_imm_fields``. A
    kernel places each scale where the instruction reads it, so neither reading changes a bit."""
    M, K = A.shape
    N = B.shape[1]
    sa, sb = _scale_codes(instr, scales, M, K, N)
    Mp, Np = -(-M // TILE) * TILE, -(-N // TILE) * TILE
    out = np.zeros((Mp, Np), np.float32)
    out[:M, :N] = C
    a_all = np.zeros((Mp, K), np.uint8)
    b_all = np.zeros((K, Np), np.uint8)
    a_all[:M], b_all[:, :N] = np.asarray(A).view(np.uint8), np.asarray(B).view(np.uint8)
    for i0 in range(0, Mp, TILE):
        for j0 in range(0, Np, TILE):
            tile = out[i0 : i0 + TILE, j0 : j0 + TILE]
            steps = _steps(instr, a_all[i0 : i0 + TILE], b_all[:, j0 : j0 + TILE])
            for k0, a, b in steps:
                block = k0 // instr.scale_block
                if k0 % (4 * instr.scale_block) == 0:  # BSRMOVF: the next 4 blocks' scales
                    h_a, l_b = _half(sa[i0 : i0 + TILE], block), _half(sb[:, j0 : j0 + TILE].T, block)
                    h, l = (h_a, l_b) if ace_bsr_a_half == "high" else (l_b, h_a)
                za = np.ascontiguousarray(a)  # dword i = row i's 4 elements
                zb = np.ascontiguousarray(b.T)  # dword j = column j's
                imm8 = imm8_for(block % 4, block % 4, ace_scale_imm_fields)
                tile = top4mx(
                    tile,
                    za,
                    zb,
                    h,
                    l,
                    imm8,
                    instr.a,
                    instr.b,
                    ace_scale_imm_fields=ace_scale_imm_fields,
                    ace_bsr_a_half=ace_bsr_a_half,
                    **switches,
                )
            out[i0 : i0 + TILE, j0 : j0 + TILE] = tile
    return out[:M, :N]

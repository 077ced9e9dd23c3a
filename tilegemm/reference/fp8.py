"""TDPBF8PS, TDPBHF8PS, TDPHBF8PS, TDPHF8PS (AMX-FP8), one instruction at a time, and the GEMM.

Slow on purpose, and exact by construction: every finite 8-bit float is an integer times a power
of two, so the products of one instruction are summed as Python integers (no rounding, no size
limit: E5M2 x E5M2 sums reach 2^70) and the sum is rounded to binary32 once
(``docs/amx-fp8.md``). The four instructions differ only in the formats of A and B: the first
letter after TDP is A's (B: E5M2 "BF8", H: E4M3 "HF8"), the second B's.

Reusable pieces, one implementation each (``tilegemm.kernels.exact`` holds their compiled twins):

- :func:`fix` and :func:`kinds`: an 8-bit float code as its exact fixed-point integer
  (value * 2^fix_shift) and as finite / NaN / +Inf / -Inf.
- :func:`round_scaled`: the binary32 nearest (ties to even) to an exact integer times 2^e, with
  AMX's flush of tiny results and overflow to infinity.

Layout (VNNI-4, as INT8): ``a.row[m].byte[4k+j] = A[m][k0+4k+j]`` and
``b.row[k].byte[4n+j] = B[k0+4k+j][n]``. The GEMM steps K by 64, the last step covering
ceil(remaining / 4) quads with the missing bytes 0x00 (+0, which changes no bit).
"""

from __future__ import annotations

import math

import numpy as np

from ..formats import Minifloat, daz
from .amx import _steps, _vnni, pad_k
from .binary32 import INDEF, add32_read

__all__ = ["FINITE", "NAN", "POS_INF", "NEG_INF", "fix", "kinds", "round_scaled", "tdpfp8ps", "tdpfp8_gemm"]

FINITE, NAN, POS_INF, NEG_INF = 0, 1, 2, 3
_NONE, _PLUS, _MINUS, _CANCELLED = 0, 1, 2, 3  # fp8_inf_cancel="sde_revive": per-output Inf state


def _fields(codes, fmt: Minifloat):
    c = np.asarray(codes).astype(np.int64) & 0xFF
    w = fmt.mantissa_bits
    return c >> 7, (c >> w) & ((1 << fmt.exponent_bits) - 1), c & ((1 << w) - 1)


def kinds(codes, fmt: Minifloat) -> np.ndarray:
    """FINITE, NAN, POS_INF or NEG_INF for each code (uint8 array-like) of format ``fmt``.

    E5M2 (``ieee_specials``): the largest exponent is an infinity when the mantissa is 0, else a
    NaN. E4M3 "fn": 0x7F and 0xFF are NaN, and nothing is infinite.
    """
    sign, e, f = _fields(codes, fmt)
    top = e == (1 << fmt.exponent_bits) - 1
    if fmt.ieee_specials:
        nan, inf = top & (f != 0), top & (f == 0)
    else:
        nan, inf = top & (f == (1 << fmt.mantissa_bits) - 1), np.zeros(np.shape(e), bool)
    return np.where(nan, NAN, np.where(inf, np.where(sign == 1, NEG_INF, POS_INF), FINITE)).astype(np.int8)


def fix(codes, fmt: Minifloat, every_code: bool = False) -> np.ndarray:
    """The exact integer ``value * 2^fmt.fix_shift`` of each finite code (int64; 0 for NaN and Inf).

    ``fix(b) = +/-((e ? f | 2^w : f) << (e ? e - 1 : 0))`` with w mantissa bits: a normal code's
    significand with its hidden bit, shifted by its exponent; a denormal's mantissa as it is.
    ``every_code``: the formula for every code, the NaN and infinity codes included (ACE's MX outer
    products read E4M3 0x7F as 480 and E5M2 0x7C as 65536).
    """
    sign, e, f = _fields(codes, fmt)
    mag = np.where(e > 0, (f | (1 << fmt.mantissa_bits)) << np.maximum(e - 1, 0), f)
    if not every_code:
        mag = np.where(kinds(codes, fmt) == FINITE, mag, 0)
    return np.where(sign == 1, -mag, mag)


def round_scaled(acc: int, e: int) -> np.float32:
    """The binary32 nearest to the exact ``acc * 2^e`` (``acc`` a Python integer of any size):
    round to 24 significant bits, ties to even, with an unbounded exponent; then a magnitude of
    2^128 or more is an infinity and one below 2^-126 a zero of its sign (flush to zero after
    rounding). ``acc == 0`` gives +0."""
    acc = int(acc)
    if acc == 0:
        return np.float32(0.0)
    mag = abs(acc)
    shift = max(mag.bit_length() - 24, 0)
    q, rem = mag >> shift, mag & ((1 << shift) - 1)
    half = 1 << shift >> 1
    if shift and (rem > half or (rem == half and q & 1)):
        q += 1  # may reach 2^24: still exact below
    top = q.bit_length() - 1 + shift + e  # exponent of the rounded value's leading bit
    sign = -1.0 if acc < 0 else 1.0
    if top >= 128:
        return np.float32(sign * math.inf)
    if top < -126:
        return np.float32(sign * 0.0)
    return np.float32(sign * math.ldexp(q, shift + e))  # at most 24 bits, a binary32 normal: exact


_round_all = np.frompyfunc(round_scaled, 2, 1)


def tdpfp8ps(
    dst: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    fa: Minifloat,
    fb: Minifloat,
    *,
    fp8_inf_cancel: str = "strict",
    fp8_dst_daz: bool = True,
) -> np.ndarray:
    """One TDP*F8PS: the new dst (M x N float32).

    ``a``: M x 4*K4 codes of format ``fa``; ``b``: K4 x N x 4 codes of format ``fb`` (VNNI).
    All 4*K4 products of each output are summed exactly, rounded once, and added to dst once.
    A NaN input, a NaN dst, Inf * 0, or +Inf with -Inf (``fp8_inf_cancel="strict"``) give the
    default NaN; dst's NaN is not propagated.
    """
    a = np.asarray(a, np.uint8)
    b = np.asarray(b, np.uint8)
    m, n = dst.shape
    xa, ka, sa = fix(a, fa), kinds(a, fa), a >> 7
    yb, kb, sb = fix(b, fb), kinds(b, fb), b >> 7
    nan = np.isnan(dst)
    acc = np.zeros((m, n), object)  # exact Python integers
    pinf = np.zeros((m, n), bool)
    ninf = np.zeros((m, n), bool)
    state = np.zeros((m, n), np.int8)
    for k in range(b.shape[0]):
        for j in range(4):
            x, kx, sx = xa[:, 4 * k + j, None], ka[:, 4 * k + j, None], sa[:, 4 * k + j, None]
            y, ky, sy = yb[None, k, :, j], kb[None, k, :, j], sb[None, k, :, j]
            either_nan = (kx == NAN) | (ky == NAN)
            either_inf = ~either_nan & ((kx >= POS_INF) | (ky >= POS_INF))
            inf_times_zero = either_inf & (((kx == FINITE) & (x == 0)) | ((ky == FINITE) & (y == 0)))
            nan |= either_nan | inf_times_zero
            inf = either_inf & ~inf_times_zero
            negative = sx != sy
            ninf |= inf & negative
            pinf |= inf & ~negative
            own = np.where(negative, _MINUS, _PLUS)
            revived = np.where((state == _NONE) | (state == _CANCELLED) | (state == own), own, _CANCELLED)
            state = np.where(inf, revived, state).astype(np.int8)
            finite = ~either_nan & ~either_inf
            acc = acc + np.where(finite, x.astype(object) * y.astype(object), 0)
        if fp8_inf_cancel == "sde_revive":
            nan |= state == _CANCELLED  # cancelled after this dword's four products
    s = _round_all(acc, -(fa.fix_shift + fb.fix_shift)).astype(np.float32)
    if fp8_inf_cancel == "strict":
        nan |= pinf & ninf
        s = np.where(pinf, np.inf, np.where(ninf, -np.inf, s))
    else:
        s = np.where(state == _PLUS, np.inf, np.where(state == _MINUS, -np.inf, s))
    d = daz(dst) if fp8_dst_daz else np.asarray(dst, np.float32)
    with np.errstate(all="ignore"):
        r = add32_read(d, np.asarray(s, np.float32))  # one add, FTZ
    return np.where(nan | np.isnan(r), INDEF.view(np.float32), r).astype(np.float32)


def tdpfp8_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, **switches) -> np.ndarray:
    """``C + A @ B`` through TDP*F8PS tile multiplies. ``A``, ``B``: 8-bit codes."""
    kg, steps = _steps(instr, A.shape[1])
    a = pad_k(A, 1, kg)  # code 0x00 is +0 in both formats
    b = pad_k(B, 0, kg)
    for k0, k1 in steps:
        C = tdpfp8ps(C, a[:, k0:k1], _vnni(b[k0:k1], instr.group), instr.a.minifloat, instr.b.minifloat, **switches)
    return C

"""Scalar binary32 arithmetic with AMX's rounding rules, exact on any CPU state.

``fma32`` and ``add32`` are one IEEE binary32 operation each, round-to-nearest-even, with
MXCSR.DAZ|FTZ behaviour (docs/semantics.md, section 1): a tiny result (below 2^-126 after rounding
to 24 bits with an unbounded exponent) becomes a zero of its sign. They are computed in binary64
with an error-free TwoSum, so they neither read nor depend on the caller's MXCSR, and they do not
rely on the CPU having an FMA unit.

Why this is exact: the operands are binary32 values, and a product of two BF16/FP16 values has at
most 22 significant bits, so ``a * b`` is exact in binary64 and far from its overflow and
underflow. ``s = fl64(p + c)`` may round, but TwoSum gives the exact error ``t`` with
``p + c = s + t``. Rounding binary64 to binary32 can only go wrong when ``s`` sits exactly on a
binary32 midpoint (binary64 rounding never crosses one, since midpoints are binary64 numbers);
then the sign of ``t`` decides. This module must stay free of ``fastmath``: TwoSum depends on the
operations happening exactly as written.

A NaN result is not left to the binary64 arithmetic: which operand's NaN a binary64 multiply or
add returns depends on the order in which the compiler hands the operands to the instruction, and
LLVM treats both as commutative. ``nan_fma32`` and ``nan_add32`` give the NaN an x86 core returns
(docs/semantics.md, "NaN bits"), so every path that runs these functions (the scalar kernels and,
through ``tilegemm.reference.binary32``, the reference) follows one rule.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rounding import bits_f32, f32_bits

# Smallest normal binary32, and the largest value whose 24-bit rounding is still below it:
# 2^-126 - 2^-151 is the midpoint between 2^-126 - 2^-150 and 2^-126 and rounds (to even) up.
_MIN_NORMAL = 2.0**-126
_TINY_EDGE = 2.0**-126 - 2.0**-151
# Halfway between FLT_MAX and 2^128: at or above it binary32 rounding gives infinity.
_OVERFLOW_EDGE = 2.0**128 - 2.0**103
_FLT_MAX = float(np.finfo(np.float32).max)


@njit(cache=True)
def two_sum(x, y):
    """s = fl64(x + y) and t with x + y = s + t exactly (Knuth's TwoSum)."""
    s = x + y
    bb = s - x
    t = (x - (s - bb)) + (y - bb)
    return s, t


@njit(cache=True)
def round_ftz(s, t):
    """The binary32 result of the exact value s + t: RNE, tininess after rounding, FTZ.

    Small enough for LLVM to inline into each caller's loop: the common case, a normal result
    that the conversion of ``s`` rounds correctly. The rest is :func:`_round_ftz_edges`, a call."""
    r = np.float32(s)
    a = abs(s)
    if (t == 0.0 or np.float64(r) == s) and _MIN_NORMAL <= a < _OVERFLOW_EDGE:
        return r
    return _round_ftz_edges(s, t)


@njit(cache=True)
def _round_ftz_edges(s, t):
    """:func:`round_ftz` where ``s`` is not finite, the result is tiny or overflows, or ``s``
    was rounded and may be a tie that ``t`` breaks."""
    if not math.isfinite(s):
        return np.float32(s)
    a = abs(s)
    if a < _MIN_NORMAL:
        # The exact value is below 2^-126 (s is a faithful binary64 rounding of it, and 2^-126 is
        # a binary64 number). It is tiny unless it rounds up to 2^-126 at 24 bits.
        if a > _TINY_EDGE or (a == _TINY_EDGE and (t == 0.0 or (t > 0.0) == (s > 0.0))):
            return np.float32(math.copysign(_MIN_NORMAL, s))
        return np.float32(math.copysign(0.0, s))
    if a >= _OVERFLOW_EDGE:
        if a == _OVERFLOW_EDGE and t != 0.0 and (t > 0.0) != (s > 0.0):
            return np.float32(math.copysign(_FLT_MAX, s))
        return np.float32(math.copysign(math.inf, s))
    r = np.float32(s)
    r64 = np.float64(r)
    if t == 0.0 or r64 == s:
        return r
    # s was rounded to r; if s is exactly the midpoint between r and its neighbour towards s,
    # the conversion broke the tie to even and the sign of t must decide instead.
    d = s - r64
    m, e = math.frexp(r64)
    spacing = math.ldexp(1.0, e - 24)  # ulp of r: r in [2^(e-1), 2^e) has 24 significant bits
    if abs(m) == 0.5 and (d > 0.0) != (r64 > 0.0):
        spacing *= 0.5  # below a power of two the binary32 grid is twice as fine
    if abs(d) * 2.0 == spacing and (t > 0.0) == (d > 0.0):
        return np.float32(r64 + math.copysign(spacing, d))
    return r


#: x86's default NaN ("QNaN floating-point indefinite"), and the quiet bit a NaN result gets.
INDEF_BITS = 0xFFC00000
QUIET_BIT = 0x00400000


@njit(cache=True)
def quiet(x):
    """The binary32 NaN ``x`` with its quiet bit set, sign and payload kept."""
    return bits_f32(f32_bits(np.float32(x)) | np.uint32(QUIET_BIT))


@njit(cache=True)
def nan_fma32(a, b, c):
    """The NaN x86 returns where ``fma32(a, b, c)`` is a NaN: the first of the multiplicands
    ``a``, ``b`` that is a NaN, quieted; else a NaN addend ``c``, quieted, even when ``a * b`` is
    Inf * 0; else (Inf * 0, Inf - Inf) the default NaN."""
    if a != a:
        return quiet(a)
    if b != b:
        return quiet(b)
    if c != c:
        return quiet(c)
    return bits_f32(np.uint32(INDEF_BITS))


@njit(cache=True)
def nan_add32(x, y):
    """The NaN x86 returns where ``add32(x, y)`` is a NaN: the first operand that is a NaN,
    quieted; else (Inf - Inf) the default NaN."""
    if x != x:
        return quiet(x)
    if y != y:
        return quiet(y)
    return bits_f32(np.uint32(INDEF_BITS))


@njit(cache=True)
def fma32(a, b, c):
    """fma32(a, b, c) = round32(a * b + c), one rounding, FTZ (operands already DAZ-read); a
    NaN result as x86 gives it (``nan_fma32``)."""
    p = np.float64(a) * np.float64(b)
    s, t = two_sum(p, np.float64(c))
    if s != s:
        return nan_fma32(a, b, c)
    return round_ftz(s, t)


@njit(cache=True)
def add32(x, y):
    """add32(x, y) = round32(x + y), FTZ (operands already DAZ-read); a NaN result as x86 gives
    it (``nan_add32``)."""
    s, t = two_sum(np.float64(x), np.float64(y))
    if s != s:
        return nan_add32(x, y)
    return round_ftz(s, t)


# -- 8-bit floats and exact fixed-point sums (AMX-FP8) ----------------------------------------------
# The compiled twins of tilegemm.reference.fp8.fix/kinds and round_scaled (tested against them).

FP8_FINITE, FP8_NAN, FP8_POS_INF, FP8_NEG_INF = 0, 1, 2, 3


@njit(cache=True)
def fp8_fix(code, ebits, mbits, ieee):
    """``(kind, fix)`` of an 8-bit float code: kind FP8_FINITE, FP8_NAN, FP8_POS_INF or
    FP8_NEG_INF; fix the exact integer value * 2^(bias + mbits - 1) of a finite code (else 0).
    ``ieee``: the largest exponent holds infinities and NaNs (E5M2); otherwise only the all-ones
    codes are NaN (E4M3 "fn")."""
    c = np.int64(code) & 0xFF
    sign = c >> 7
    e = (c >> mbits) & ((1 << ebits) - 1)
    f = c & ((1 << mbits) - 1)
    if e == (1 << ebits) - 1:
        if ieee:
            if f != 0:
                return FP8_NAN, np.int64(0)
            return (FP8_NEG_INF if sign else FP8_POS_INF), np.int64(0)
        if f == (1 << mbits) - 1:
            return FP8_NAN, np.int64(0)
    mag = ((f | (1 << mbits)) << (e - 1)) if e > 0 else f
    return FP8_FINITE, (-mag if sign else mag)


@njit(cache=True)
def _bit_length(x):
    """Bits of a non-negative int64 (0 for 0)."""
    n = 0
    for s in (32, 16, 8, 4, 2, 1):
        if x >> s:
            x >>= s
            n += s
    return n + x


@njit(cache=True)
def round_scaled(hi, lo, e):
    """The binary32 nearest to the exact ``(hi * 2^32 + lo) * 2^e`` (int64 hi and lo, any signs,
    |hi| < 2^62): 24 significant bits, ties to even, unbounded exponent; then a magnitude from
    2^128 is an infinity and one below 2^-126 a zero of its sign. Zero gives +0."""
    hi = hi + (lo >> 32)  # carry, so that 0 <= lo < 2^32
    lo = lo & 0xFFFFFFFF
    if hi == 0 and lo == 0:
        return np.float32(0.0)
    neg = hi < 0
    if neg:  # magnitude = mh * 2^32 + ml, 0 <= ml < 2^32
        mh, ml = (-hi, np.int64(0)) if lo == 0 else (-hi - 1, (np.int64(1) << 32) - lo)
    else:
        mh, ml = hi, lo
    n = _bit_length(mh) + 32 if mh else _bit_length(ml)
    shift = max(n - 24, 0)
    if shift == 0:
        q = ml
    else:
        if shift > 32:
            q = mh >> (shift - 32)
            rb = (mh >> (shift - 33)) & 1
            sticky = (mh & ((np.int64(1) << (shift - 33)) - 1)) != 0 or ml != 0
        elif shift == 32:
            q = mh
            rb = ml >> 31
            sticky = (ml & 0x7FFFFFFF) != 0
        else:
            q = (mh << (32 - shift)) | (ml >> shift)
            rb = (ml >> (shift - 1)) & 1
            sticky = (ml & ((np.int64(1) << (shift - 1)) - 1)) != 0
        if rb and (sticky or (q & 1)):
            q += 1  # may reach 2^24: still exact below
    top = _bit_length(q) - 1 + shift + e
    if top >= 128:
        return np.float32(-math.inf if neg else math.inf)
    if top < -126:
        return np.float32(-0.0 if neg else 0.0)
    v = math.ldexp(np.float64(q), shift + e)  # at most 24 bits, a binary32 normal: exact
    return np.float32(-v if neg else v)

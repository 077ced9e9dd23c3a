"""An independent, exact oracle for one binary32 operation with DAZ/FTZ, by rational arithmetic.

It shares no code with ``tilegemm.reference`` or ``kernels/exact.py``: values become
``fractions.Fraction``, the exact result is rounded to a 24-bit significand with an unbounded
exponent (ties to even), tininess is judged after that rounding, and overflow follows IEEE 754.
Slow; meant for scalar cases.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

F32_MAX = Fraction(2) ** 128 - Fraction(2) ** 104


def _read(x: float) -> float:
    """DAZ: a binary32 denormal is read as a zero of its sign."""
    x = float(np.float32(x))
    if x != 0 and abs(x) < 2.0**-126:
        return math.copysign(0.0, x)
    return x


def _round24(q: Fraction) -> Fraction:
    """Round a non-zero rational to 24 significant bits, ties to even (unbounded exponent)."""
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    # q in [2^e, 2^(e+1)): scale so that the significand is an integer with 24 bits.
    scaled = q / Fraction(2) ** (e - 23)
    n = math.floor(scaled)
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return sign * n * Fraction(2) ** (e - 23)


def exact_op(a: float, b: float, c: float, *, read_ab=True) -> np.float32:
    """binary32 result of a * b + c (one rounding), DAZ on operands, FTZ on the result."""
    if read_ab:
        a, b = _read(a), _read(b)
    c = _read(c)
    vals = (a, b, c)
    if any(math.isnan(v) or math.isinf(v) for v in vals):
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        prod_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
        both_neg = prod_neg and math.copysign(1, c) < 0
        return np.float32(-0.0 if both_neg else 0.0)
    r = _round24(q)
    if abs(r) < Fraction(2) ** -126:
        return np.float32(-0.0 if r < 0 else 0.0)
    if abs(r) > F32_MAX:
        return np.float32(-np.inf if r < 0 else np.inf)
    return np.float32(float(r))


def round_ieee(q: Fraction, p: int, emin: int, emax: int) -> float:
    """A rational rounded to nearest-even in a binary format with ``p`` significant bits, normal
    exponents ``emin .. emax``, subnormals kept (no flush) and overflow to infinity; as a float."""
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    scaled = q / quantum
    n = math.floor(scaled)
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = n * quantum
    if r >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(r)


#: x86's default NaN ("QNaN floating-point indefinite"), as the binary64 that holds it.
INDEF = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]


def x86_nan(a: float, b: float, c: float) -> float:
    """The NaN an x86 FMA returns for ``a * b + c`` (Intel SDM, SIMD floating-point exceptions;
    measured on AMD Zen 4): the first NaN multiplicand, else a NaN addend (even against Inf * 0),
    else the default NaN. Values held in binary64, where a widened NaN is already quiet."""
    for v in (a, b, c):
        if math.isnan(v):
            return v
    return INDEF


def ieee_fma(a: float, b: float, c: float, p: int = 24, emin: int = -126, emax: int = 127) -> float:
    """IEEE ``a * b + c`` with one rounding to the format (binary32 by default; binary16 with
    ``p=11, emin=-14, emax=15``), no DAZ, no FTZ. Special values follow binary64 arithmetic, and
    an exact zero is -0 only when both the product and ``c`` are -0."""
    if any(math.isnan(v) or math.isinf(v) for v in (a, b, c)):
        r = a * b + c
        return x86_nan(a, b, c) if math.isnan(r) else r
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        prod_neg = math.copysign(1, a) * math.copysign(1, b) < 0
        return -0.0 if prod_neg and math.copysign(1, c) < 0 else 0.0
    r = round_ieee(q, p, emin, emax)
    return math.copysign(0.0, q) if r == 0 else r

"""AMX-TF32: TMMULTF32PS, readably (docs/amx-tf32.md).

Each instruction covers up to 16 K elements (the last one fewer). For every element of dst:

    tmp = +0
    for each of its K elements:  tmp = fma32(tf32(a), tf32(b), tmp)      # RNE, FTZ after rounding
    dst = add32(tmp, read(dst))                                          # read: DAZ by default

``tf32`` quiets a signalling NaN, then clears the low 13 significand bits (denormals keep theirs).
A NaN result is the first NaN operand in the order a, b, tmp (then dst for the add), quieted; with
no NaN operand, Inf * 0 and Inf - Inf give the default NaN 0xFFC00000. The arithmetic of one
``fma32`` / ``add32`` is ``tilegemm.reference.binary32``'s (RNE, FTZ), applied here to operands
that are already read (TF32 inputs keep their denormals). ``tf32_rounding="single"`` sums the
instruction's products exactly (rationals) and rounds once; an exact zero sum is +0.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..formats import daz, tf32_truncate
from .binary32 import INDEF, add32_read, fma32_read

__all__ = ["tf32", "tmmultf32ps", "tmmultf32ps_gemm"]

_K = 16
_QUIET = np.uint32(0x00400000)


def tf32(codes) -> np.ndarray:
    """binary32 bits -> the TF32 values TMMULTF32PS reads, as float32."""
    return tf32_truncate(np.asarray(codes, np.uint32)).view(np.float32)


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _quiet(x) -> np.ndarray:
    return (_bits(x) | _QUIET).view(np.float32)


def _fma(a, b, t) -> np.ndarray:
    """fma32(a, b, t) on values already read, NaN as the contract orders it."""
    with np.errstate(all="ignore"):
        r = np.asarray(fma32_read(a, b, t), np.float32)
        inf_zero = (np.isinf(a) & (b == 0)) | ((a == 0) & np.isinf(b))
    out = np.where(np.isnan(r) | inf_zero, INDEF.view(np.float32), r)  # Inf * 0, Inf - Inf
    out = np.where(np.isnan(t), t, out)  # tmp is a result: quiet already
    out = np.where(np.isnan(b), _quiet(b), out)
    return np.where(np.isnan(a), _quiet(a), out).astype(np.float32)


def _add(t, c) -> np.ndarray:
    """add32(t, c) on values already read: t's NaN, else c's quieted, else Inf - Inf: default NaN."""
    with np.errstate(all="ignore"):
        r = np.asarray(add32_read(t, c), np.float32)
    out = np.where(np.isnan(r), INDEF.view(np.float32), r)
    out = np.where(np.isnan(c), _quiet(c), out)
    return np.where(np.isnan(t), t, out).astype(np.float32)


def _round_exact(x: Fraction) -> np.float32:
    """An exact non-zero rational to binary32: RNE, a result tiny after rounding to 24 bits (an
    unbounded exponent) flushed to a zero of its sign, overflow to infinity; zero is +0."""
    if x == 0:
        return np.float32(0.0)
    sign, m = (-1 if x < 0 else 1), abs(x)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    q = m / Fraction(2) ** (e - 23)  # in [2^23, 2^24)
    n, rem = divmod(q.numerator, q.denominator)
    if 2 * rem > q.denominator or (2 * rem == q.denominator and n % 2):
        n += 1
    if n == 1 << 24:
        n, e = 1 << 23, e + 1
    if e < -126:
        return np.float32(0.0 * sign)
    if e > 127:
        return np.float32(sign * np.inf)
    return np.float32(sign * n * 2.0 ** (e - 23))


def _single(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """tmp of ``tf32_rounding="single"``: a (M, k), b (k, N) values already read."""
    M, k = a.shape
    N = b.shape[1]
    out = np.zeros((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            x, y = a[m], b[:, n]
            nan = [v for pair in zip(x, y) for v in pair if np.isnan(v)]
            if nan:
                out[m, n] = _quiet(np.float32(nan[0]))
                continue
            with np.errstate(all="ignore"):
                p = x.astype(np.float64) * y.astype(np.float64)  # exact: 22 significant bits at most
            if np.any((np.isinf(x) & (y == 0)) | ((x == 0) & np.isinf(y))) or (
                np.any(p == np.inf) and np.any(p == -np.inf)
            ):
                out[m, n] = INDEF.view(np.float32)
            elif np.any(np.isinf(p)):
                out[m, n] = p[np.isinf(p)][0]
            else:
                out[m, n] = _round_exact(sum((Fraction(float(v)) for v in p), Fraction(0)))
    return out


def tmmultf32ps(
    C: np.ndarray,
    a_codes: np.ndarray,
    b_codes: np.ndarray,
    dst_daz: bool = True,
    single: bool = False,
    *,
    trace=None,
    k0: int = 0,
):
    """One TMMULTF32PS: C (M x N float32) with A (M x k) and B (k x N) binary32 bits, k <= 16.
    ``trace`` records output [0, 0]'s operations (K indices from ``k0``); the operands it shows
    are the TF32 values read (the truncation is the input's conversion, not a flush)."""
    a, b = tf32(a_codes), tf32(b_codes)
    if single:
        tmp = _single(a, b)  # one rounding: no per-element operation to record
    else:
        tmp = np.zeros(C.shape, np.float32)
        for k in range(a.shape[1]):
            new = _fma(a[:, k : k + 1], b[k : k + 1, :], tmp)
            if trace is not None:
                ops = (a[:, k : k + 1], b[k : k + 1, :], tmp)
                trace.float_op("fma32", (k0 + k,), "tmp", ops, ops, new, "fma32 ftz")
            tmp = new
    read = daz(C) if dst_daz else np.asarray(C, np.float32)
    out = _add(tmp, read)
    if trace is not None:
        trace.float_op(
            "add32 tmp + C", (), "C", (tmp, C), (tmp, read), out, "add32 daz ftz" if dst_daz else "add32 ftz"
        )
    return out


def tmmultf32ps_gemm(
    instr,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    tf32_dst_daz: bool = True,
    tf32_rounding: str = "each_step",
    trace=None,
) -> np.ndarray:
    """``C + A @ B`` as a sequence of TMMULTF32PS, 16 K elements each (the last one fewer)."""
    if trace is not None:
        trace.start(C, "f32")
    for k0 in range(0, A.shape[1], _K):
        k1 = min(k0 + _K, A.shape[1])
        C = tmmultf32ps(C, A[:, k0:k1], B[k0:k1], tf32_dst_daz, tf32_rounding == "single", trace=trace, k0=k0)
        if trace is not None:
            trace.state(k1, C)
    return C

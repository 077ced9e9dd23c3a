"""The readable specification: what every tilegemm kernel must return, bit for bit.

This module is ``SEMANTICS.md`` written in NumPy, one instruction at a time. It is slow on
purpose: every binary32 operation is spelled out (``fma32``, ``add32``), DAZ and FTZ are explicit,
and the GEMM is cut into tile multiplies exactly as the seed's kernels cut it. The fast kernels in
``tilegemm.kernels`` are tested against it; it is tested against hand-worked SDM cases and an
independent exact-rational oracle.

How a binary32 operation is computed without an FMA unit or any reliance on MXCSR: the operands
are binary32 (or BF16/FP16) values, so ``a * b`` is exact in binary64; ``s = fl64(p + c)`` with
its exact error ``t`` (TwoSum) represents ``p + c`` exactly, and rounding ``s + t`` to 24 bits only
needs ``t`` when ``s`` lies on a binary32 midpoint. The compiled kernels' exact path
(``kernels/exact.py``) follows the same steps in scalar code.
"""

from __future__ import annotations

import numpy as np

from .formats import Format, daz, get_format

__all__ = ["matmul", "fma32", "add32", "daz", "tdp_float", "tdp_int", "vdpbf16ps"]

_MIN_NORMAL = 2.0**-126
_TINY_EDGE = 2.0**-126 - 2.0**-151  # rounds (to even) up to 2^-126 at 24 bits
_OVERFLOW_EDGE = 2.0**128 - 2.0**103  # halfway between FLT_MAX and 2^128
_FLT_MAX = float(np.finfo(np.float32).max)


# --------------------------------------------------------------------------------------------
# binary32 arithmetic with DAZ/FTZ
# --------------------------------------------------------------------------------------------


def _two_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl64(x + y) and the exact error t, x + y = s + t (Knuth)."""
    s = x + y
    bb = s - x
    t = (x - (s - bb)) + (y - bb)
    return s, t


def _round_ftz(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """binary32 rounding (RNE) of the exact value s + t, then FTZ with tininess after rounding."""
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.abs(s)
        r = s.astype(np.float32)
        r64 = r.astype(np.float64)
        # A tie that binary64 created: s is exactly halfway between r and its neighbour, and t
        # says on which side the exact value lies.
        d = s - r64
        m, e = np.frexp(r64)
        spacing = np.ldexp(1.0, e - 24)
        towards_zero = (d > 0) != (r64 > 0)
        spacing = np.where((np.abs(m) == 0.5) & towards_zero, spacing / 2, spacing)
        tie_broken_wrongly = (t != 0) & (d != 0) & (np.abs(d) * 2 == spacing) & ((t > 0) == (d > 0))
        r = np.where(tie_broken_wrongly, (r64 + np.copysign(spacing, d)).astype(np.float32), r)
        # Overflow: at or above the midpoint FLT_MAX | 2^128 the result is infinite, unless the
        # exact value is just below an exact-midpoint s.
        over = np.isfinite(s) & (a >= _OVERFLOW_EDGE)
        stays_finite = over & (a == _OVERFLOW_EDGE) & (t != 0) & ((t > 0) != (s > 0))
        r = np.where(over, np.copysign(np.float32(np.inf), s).astype(np.float32), r)
        r = np.where(stays_finite, np.copysign(np.float32(_FLT_MAX), s).astype(np.float32), r)
        # Below 2^-126: tiny (-> signed zero) unless 24-bit rounding reaches 2^-126.
        below = a < _MIN_NORMAL
        up = below & ((a > _TINY_EDGE) | ((a == _TINY_EDGE) & ((t == 0) | ((t > 0) == (s > 0)))))
        r = np.where(below, np.copysign(0.0, s).astype(np.float32), r)
        r = np.where(up, np.copysign(_MIN_NORMAL, s).astype(np.float32), r)
    return r.astype(np.float32)


def fma32(a, b, c) -> np.ndarray:
    """One binary32 fused multiply-add, RNE, DAZ on the operands, FTZ on the result."""
    return _fma(daz(a), daz(b), daz(c))


def _fma(a, b, c) -> np.ndarray:
    """fma32 on operands that were already read (DAZ applied where the instruction applies it)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore"):
        s, t = _two_sum(a * b, c)  # a * b is exact in binary64
    return _round_ftz(s, t)


def add32(x, y) -> np.ndarray:
    """One binary32 addition, RNE, DAZ on the operands, FTZ on the result."""
    x, y = (daz(v).astype(np.float64) for v in (x, y))
    with np.errstate(invalid="ignore"):
        s, t = _two_sum(x, y)
    return _round_ftz(s, t)


# --------------------------------------------------------------------------------------------
# The instructions, on arrays of any M x N (a tile is the case M, N <= 16)
# --------------------------------------------------------------------------------------------


def tdp_float(dst: np.ndarray, a: np.ndarray, b: np.ndarray, *, denormals_in: bool = False) -> np.ndarray:
    """TDPBF16PS / TDPFP16PS: ``dst (M x N) += a (M x 2*K4) @ b`` with b in VNNI form (K4 x N x 2).

    ``a`` and ``b`` hold the BF16/FP16 inputs as exact binary32 values. BF16 inputs are read with
    DAZ; FP16 inputs keep their denormals (``denormals_in=True``: they are normal numbers in
    binary32 anyway, so DAZ only has to be skipped). Returns the new dst.
    """
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if not denormals_in:
        a, b = daz(a), daz(b)
    m, n = dst.shape
    e = np.zeros((m, n), np.float32)  # fresh +0 partial sums for even ...
    o = np.zeros((m, n), np.float32)  # ... and odd elements of each pair
    for k in range(b.shape[0]):
        # e and o come out of FTZ'd operations, so they are never denormal: no DAZ needed.
        e = _fma(a[:, 2 * k, None], b[None, k, :, 0], e)
        o = _fma(a[:, 2 * k + 1, None], b[None, k, :, 1], o)
    return add32(dst, add32(e, o))


def tdp_int(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TDPB[SU][SU]D: ``dst (M x N, int32) += a (M x 4*K4) @ b`` with b in VNNI form (K4 x N x 4).

    ``a`` and ``b`` are int8 or uint8 arrays; their dtype is the signedness the instruction names.
    The sum wraps modulo 2^32.
    """
    acc = dst.astype(np.int64)
    for k in range(b.shape[0]):
        for j in range(4):
            acc += a[:, 4 * k + j, None].astype(np.int64) * b[None, k, :, j].astype(np.int64)
    return _wrap32(acc)


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (((x + 2**31) % 2**32) - 2**31).astype(np.int32)


def vdpbf16ps(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """VDPBF16PS, lane-wise: ``dst = fma32(a_odd, b_odd, dst)`` then ``fma32(a_even, b_even, dst)``.

    ``a`` and ``b`` are broadcast-compatible arrays whose last axis is the BF16 pair (even, odd).
    """
    dst = fma32(a[..., 1], b[..., 1], dst)
    return fma32(a[..., 0], b[..., 0], dst)


# --------------------------------------------------------------------------------------------
# GEMM, cut into tile multiplies as SEMANTICS.md "How tilegemm maps a GEMM onto instructions"
# --------------------------------------------------------------------------------------------


def matmul(a, b, dtype: str = "bf16", c=None, isa: str = "amx") -> np.ndarray:
    """The exact result of ``c + a @ b`` as the AMX instruction sequence computes it.

    Parameters
    ----------
    a, b : array_like, 2-D (M x K and K x N)
        Converted to ``dtype`` once, as :func:`tilegemm.matmul` converts them.
    dtype : str
        One of :data:`tilegemm.DTYPES`.
    c : array_like, optional
        The starting C (float32 or int32, M x N) of an accumulate chain; +0 / 0 when omitted.
    isa : {"amx", "avx512"}
        ``"avx512"`` (bf16 only) uses VDPBF16PS instead of TDPBF16PS.

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm import reference
    >>> reference.matmul(np.ones((2, 3)), np.ones((3, 2)))
    array([[3., 3.],
           [3., 3.]], dtype=float32)
    """
    fmt = get_format(dtype)
    A = fmt.to_element(np.asarray(a), "a")
    B = fmt.to_element(np.asarray(b), "b", b_side=True)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"reference.matmul takes 2-D operands with matching K, got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), fmt.out) if c is None else np.array(c, dtype=fmt.out).reshape(M, N)
    if K == 0:
        return C
    if isa == "avx512":
        return _matmul_avx512(fmt, A, B, C)
    if isa != "amx":
        raise ValueError(f"unknown isa {isa!r}; valid: 'amx', 'avx512'")
    g = fmt.group
    kg = -(-K // g) * g  # K completed to whole pairs/quads with zeros (the tail rule)
    A = _pad(_values(fmt, A), (M, kg))
    B = _pad(_values(fmt, B), (kg, N))
    for k0 in range(0, kg, fmt.k_step):
        k1 = min(k0 + fmt.k_step, kg)
        a_tile = A[:, k0:k1]
        b_vnni = B[k0:k1].reshape((k1 - k0) // g, g, N).transpose(0, 2, 1)  # b.row[k].elem[g*n+j]
        if fmt.is_float:
            C = tdp_float(C, a_tile, b_vnni, denormals_in=fmt.name == "fp16")
        else:
            C = tdp_int(C, a_tile, b_vnni)
    return C


def _values(fmt: Format, x: np.ndarray) -> np.ndarray:
    """Elements as the instruction reads them before DAZ: exact float32, or the integers."""
    if fmt.is_float:
        return x.astype(np.float32)  # BF16 and FP16 both widen exactly
    return x


def _pad(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def _matmul_avx512(fmt: Format, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    if fmt.name != "bf16":
        raise ValueError(f"isa='avx512' models VDPBF16PS and takes dtype 'bf16' only, got {fmt.name!r}")
    K = A.shape[1]
    A = _pad(daz(A.astype(np.float32)), (A.shape[0], K + K % 2))
    B = _pad(daz(B.astype(np.float32)), (K + K % 2, B.shape[1]))
    C = daz(C)
    for k in range(0, A.shape[1], 2):
        pair_a = A[:, k : k + 2][:, None, :]  # (M, 1, 2): broadcast along N
        pair_b = B[k : k + 2].T[None, :, :]  # (1, N, 2)
        C = vdpbf16ps(C, pair_a, pair_b)
    return C

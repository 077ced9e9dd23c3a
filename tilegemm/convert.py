"""Compiled element conversions, and A laid out as tile panels in one pass.

Every conversion works on bit patterns with integer instructions, so the caller's MXCSR (DAZ in
particular) cannot change a value on the way (docs/semantics.md, section 1: FP16 denormal inputs are kept). Each
rule is written once, as a Numba ufunc usable from NumPy and from compiled code alike:

- ``f32_to_bf16``: binary32 -> BF16, round to nearest even, as ``ml_dtypes.bfloat16`` does.
- ``f32_to_fp16``: binary32 -> binary16, round to nearest even, as ``numpy.float16`` does.
- ``bf16_to_f32_daz``: BF16 -> binary32, exact, with a denormal read as a zero of its sign (DAZ).
- ``bf16_to_f32``: BF16 -> binary32, exact, denormals kept (the paths that widen BF16 themselves).
- ``fp16_to_f32``: binary16 -> binary32, exact, denormals kept (they are normal in binary32).
- ``f32_to_e5m2`` / ``f32_to_e4m3fn``: binary32 -> the 8-bit floats, round to nearest even, as
  ``ml_dtypes.float8_e5m2`` / ``float8_e4m3fn`` do (overflow: infinity / NaN).

``pack_a_float`` / ``pack_a_int`` write A into the kernels' panel layout
``(nA, M_tiles, K_steps, 16, k_step)`` (one contiguous tile of A per 16 rows and K step, as a
``TILELOADD`` of A would see it; zero padding already in place) and, for floats, return the
exponent range the fast-path proof needs, in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, vectorize

__all__ = [
    "f32_to_bf16",
    "bf16_to_f32_daz",
    "bf16_to_f32",
    "fp16_to_f32",
    "pack_a_float",
    "pack_a_int",
    "pack_b",
    "exponent_bounds",
    "f32_to_fp16",
    "MODE_F32_TO_BF16",
    "MODE_BF16",
    "MODE_FP16",
    "MODE_F32_TO_FP16",
    "f32_to_e5m2",
    "f32_to_e4m3fn",
    "MODE_BF16_KEEP",
    "MODE_F32_TO_BF16_KEEP",
]

MODE_F32_TO_BF16, MODE_BF16, MODE_FP16, MODE_F32_TO_FP16 = 0, 1, 2, 3
# BF16 with denormals kept (no DAZ), for the paths that widen BF16 to binary32 by a shift.
MODE_BF16_KEEP, MODE_F32_TO_BF16_KEEP = 4, 5


@vectorize(["uint16(uint32)"], cache=True)
def f32_to_bf16(bits):
    """binary32 bits -> BF16 bits, RNE; NaN stays a (quiet) NaN of the same sign."""
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0:
        return np.uint16(((bits >> 16) & 0x8000) | 0x7FC0)
    return np.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


@vectorize(["uint16(uint32)"], cache=True)
def f32_to_fp16(bits):
    """binary32 bits -> binary16 bits, RNE, overflow to infinity, denormals rounded in place."""
    sign = (bits >> 16) & 0x8000
    ax = bits & 0x7FFFFFFF
    if ax > 0x7F800000:  # NaN: a quiet NaN of the same sign
        return np.uint16(sign | 0x7E00)
    if ax >= 0x477FF000:  # 65520 and up (the midpoint 65504 | 65536 ties to even): infinity
        return np.uint16(sign | 0x7C00)
    if ax >= 0x38800000:  # a binary16 normal: rebias the exponent, round 13 bits away
        return np.uint16(sign | ((ax - 0x38000000 + 0x0FFF + ((ax >> 13) & 1)) >> 13))
    if ax <= 0x33000000:  # at most 2^-25, the midpoint 0 | 2^-24: zero
        return np.uint16(sign)
    e = ax >> 23
    mant = (ax & 0x7FFFFF) | 0x800000  # value = mant * 2^(e - 150) = mant >> (126 - e) units of 2^-24
    shift = 126 - e
    r = mant >> shift
    rem = mant & ((np.uint32(1) << shift) - 1)
    half = np.uint32(1) << (shift - 1)
    if rem > half or (rem == half and (r & 1) == 1):
        r += 1
    return np.uint16(sign | r)


@vectorize(["uint32(uint16)"], cache=True)
def bf16_to_f32_daz(h):
    """BF16 bits -> binary32 bits, exact; a BF16 denormal becomes a zero of its sign."""
    b = np.uint32(h) << 16
    if (b & 0x7F800000) == 0:
        return b & 0x80000000
    return b


@vectorize(["uint32(uint16)"], cache=True)
def bf16_to_f32(h):
    """BF16 bits -> binary32 bits, exact, denormals kept (a left shift by 16)."""
    return np.uint32(h) << 16


@vectorize(["uint32(uint16)"], cache=True)
def fp16_to_f32(h):
    """binary16 bits -> binary32 bits, exact, denormals kept."""
    h32 = np.uint32(h)
    sign = (h32 & 0x8000) << 16
    exp = (h32 >> 10) & 0x1F
    man = h32 & 0x3FF
    if exp == 0x1F:
        return sign | 0x7F800000 | (man << 13)
    if exp != 0:
        return sign | ((exp + 112) << 23) | (man << 13)
    if man == 0:
        return sign
    e = np.uint32(113)  # value = man * 2^-24: normalise the top set bit into the hidden bit
    while (man & 0x400) == 0:
        man <<= 1
        e -= 1
    return sign | (e << 23) | ((man & 0x3FF) << 13)


@njit(cache=True, inline="always")
def _exponent_update(bits, lo, hi):
    """Fold one binary32 pattern's biased exponent into (lo, hi), skipping zeros, infinities and
    NaNs. A denormal counts as biased exponent 0 (below every normal), so that the fast-path
    proof sees it. Branch-free, so the loops around it vectorize."""
    e = np.int32((bits >> 23) & 0xFF)
    live = (bits & 0x7FFFFFFF) != 0 and e != 255
    return min(lo, e if live else 255), max(hi, e if live else 0)


@njit(cache=True, parallel=True)
def pack_a_float(src, mode, dst):
    """src (nA, M, K) bits (uint32 binary32 for MODE_F32_TO_*, else uint16) -> dst panels.

    ``dst`` is uint32 (the float32 bits) of shape (nA, MT, KB, 16, k_step), zero-filled. Returns
    the smallest and largest unbiased exponent of the non-zero finite values (min > max: none).
    """
    nA, M, K = src.shape
    k_step = dst.shape[4]
    lo = np.full(nA * M, 255, np.int32)
    hi = np.zeros(nA * M, np.int32)
    for row in prange(nA * M):
        a = row // M
        m = row % M
        rlo, rhi = 255, 0
        for kb in range(-(-K // k_step)):
            out = dst[a, m // 16, kb, m % 16]
            seg = src[a, m, kb * k_step : min(K, (kb + 1) * k_step)]
            # One loop per mode, so that each is a straight, vectorizable loop.
            if mode == MODE_F32_TO_BF16:
                for kin in range(seg.size):
                    out[kin] = bf16_to_f32_daz(f32_to_bf16(np.uint32(seg[kin])))
            elif mode == MODE_BF16:
                for kin in range(seg.size):
                    out[kin] = bf16_to_f32_daz(np.uint16(seg[kin]))
            elif mode == MODE_F32_TO_FP16:
                for kin in range(seg.size):
                    out[kin] = fp16_to_f32(f32_to_fp16(np.uint32(seg[kin])))
            elif mode == MODE_BF16_KEEP:
                for kin in range(seg.size):
                    out[kin] = np.uint32(np.uint16(seg[kin])) << 16
            elif mode == MODE_F32_TO_BF16_KEEP:
                for kin in range(seg.size):
                    out[kin] = np.uint32(f32_to_bf16(np.uint32(seg[kin]))) << 16
            else:
                for kin in range(seg.size):
                    out[kin] = fp16_to_f32(np.uint16(seg[kin]))
            for kin in range(seg.size):
                rlo, rhi = _exponent_update(out[kin], rlo, rhi)
        lo[row] = rlo
        hi[row] = rhi
    return lo.min() - 127, hi.max() - 127


@njit(cache=True, parallel=True)
def pack_b(src, dst):
    """src (nB, K, N) bits -> dst (nB, KB, NB, 16, 16, group) VNNI blocks, zero-filled beyond B.

    Block (kb, nb), row r, column n, slot j holds ``B[kb*16*group + r*group + j][nb*16 + n]``
    (docs/semantics.md, section 2). ``dst`` must be zero-filled."""
    nB, K, N = src.shape
    KB, NB, group = dst.shape[1], dst.shape[2], dst.shape[5]
    for job in prange(nB * KB):
        b = job // KB
        kb = job % KB
        for r in range(16):
            for j in range(group):
                k = kb * 16 * group + r * group + j
                if k >= K:
                    break
                for nb in range(NB):
                    for n in range(min(16, N - nb * 16)):
                        dst[b, kb, nb, r, n, j] = src[b, k, nb * 16 + n]


@njit(cache=True, parallel=True)
def exponent_bounds(bits):
    """Smallest and largest biased exponent of the non-zero finite binary32 values in ``bits``
    (a flat uint32 array), in one pass without temporaries; (255, 0) when there are none."""
    chunks = 64
    lo = np.full(chunks, 255, np.int32)
    hi = np.zeros(chunks, np.int32)
    size = bits.size
    step = -(-size // chunks)
    for c in prange(chunks):
        rlo, rhi = 255, 0
        for i in range(c * step, min(size, (c + 1) * step)):
            rlo, rhi = _exponent_update(bits[i], rlo, rhi)
        lo[c] = rlo
        hi[c] = rhi
    return lo.min(), hi.max()


@njit(cache=True, parallel=True)
def pack_a_int(src, dst):
    """src (nA, M, K) int8/uint8 -> dst panels (nA, MT, KB, 16, 64), zero-filled."""
    nA, M, K = src.shape
    k_step = dst.shape[4]
    for row in prange(nA * M):
        a = row // M
        m = row % M
        for kb in range(-(-K // k_step)):
            out = dst[a, m // 16, kb, m % 16]
            for kin in range(min(k_step, K - kb * k_step)):
                out[kin] = src[a, m, kb * k_step + kin]


@njit(cache=True, inline="always")
def _f32_to_fp8(bits, mbits, bias, ieee):
    """binary32 bits -> an 8-bit float code (``mbits`` mantissa bits, ``bias``), RNE from the
    exact value, as ml_dtypes converts: a NaN becomes sign|0x7E (E5M2) or sign|0x7F (E4M3 "fn");
    an infinity or an overflow becomes an infinity (``ieee``) or sign|0x7F."""
    sign = np.uint32((bits >> 24) & 0x80)
    ax = np.int64(bits & 0x7FFFFFFF)
    top = 0x7C if ieee else 0x7F  # the first code that is not a finite number
    if ax > 0x7F800000:
        return np.uint8(sign | (0x7E if ieee else 0x7F))
    e = ax >> 23
    tgt = e - 127 + bias  # the target's biased exponent, normal from 1
    if tgt >= 1:
        shift = 23 - mbits
        q = (ax >> shift) - ((127 - bias) << mbits)  # exponent rebiased, mantissa truncated
    else:
        mant = (ax & 0x7FFFFF) | (0x800000 if e > 0 else 0)
        shift = 150 - (e if e > 0 else 1) - bias - mbits + 1  # value / smallest denormal
        if shift > 40:
            return np.uint8(sign)
        q = mant >> shift  # a denormal code; rounding up may reach the smallest normal: fine
        ax = mant
    rem = ax & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    return np.uint8(sign | min(q, top))


@vectorize(["uint8(uint32)"], cache=True)
def f32_to_e5m2(bits):
    """binary32 bits -> E5M2 code, RNE, overflow to infinity (as ml_dtypes.float8_e5m2)."""
    return _f32_to_fp8(bits, 2, 15, True)


@vectorize(["uint8(uint32)"], cache=True)
def f32_to_e4m3fn(bits):
    """binary32 bits -> E4M3 "fn" code, RNE, overflow to NaN (as ml_dtypes.float8_e4m3fn)."""
    return _f32_to_fp8(bits, 3, 7, False)

"""Compiled element conversions, and A laid out as tile panels in one pass.

Every conversion works on bit patterns, with integer instructions or with floating-point operations
whose operands and results are binary32 normals, so the caller's MXCSR (DAZ in particular) cannot
change a value on the way (docs/semantics.md, section 1: FP16 denormal inputs are kept). Each
rule is written once, in ``tilegemm.kernels.rounding`` (the kernels pack A with the same functions),
and made a NumPy ufunc here:

- ``f32_to_bf16``: binary32 -> BF16, round to nearest even, as ``ml_dtypes.bfloat16`` does.
- ``f32_to_fp16``: binary32 -> binary16, round to nearest even, as ``numpy.float16`` does.
- ``bf16_to_f32_daz``: BF16 -> binary32, exact, with a denormal read as a zero of its sign (DAZ).
- ``bf16_to_f32``: BF16 -> binary32, exact, denormals kept (the paths that widen BF16 themselves).
- ``fp16_to_f32``: binary16 -> binary32, exact, denormals kept (they are normal in binary32).
- ``f32_round_fp16``: binary32 -> binary32 rounded to the nearest binary16 value, the two above in
  one step (what packing float32 A for FP16 needs).
- ``f32_to_e5m2`` / ``f32_to_e4m3fn``: binary32 -> the 8-bit floats, round to nearest even, as
  ``ml_dtypes.float8_e5m2`` / ``float8_e4m3fn`` do (overflow: infinity / NaN).

``block_exponents`` and ``column_sums`` make the per-block tables of a packed B that the blocked
kernels read (``tilegemm.PackedB.block_exponents`` / ``column_sums``).

``pack_a_float`` / ``pack_a_int`` write A into the superblock loop's panel layout
``(nA, M_tiles, K_steps, 16, k_step)`` (one contiguous tile of A per 16 rows and K step, as a
``TILELOADD`` of A would see it; zero padding already in place) and, for floats, return the
exponent range the fast-path proof needs, in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import rounding
from .kernels._cache import lazy_vectorize, stamp_with_dependencies

__all__ = [
    "f32_to_bf16",
    "bf16_to_f32_daz",
    "bf16_to_f32",
    "fp16_to_f32",
    "f32_round_fp16",
    "pack_a_float",
    "pack_a_int",
    "pack_b",
    "exponent_bounds",
    "block_exponents",
    "column_sums",
    "f32_to_fp16",
    "MODE_F32_TO_BF16",
    "MODE_BF16",
    "MODE_FP16",
    "MODE_F32_TO_FP16",
    "f32_to_e5m2",
    "f32_to_e4m3fn",
    "MODE_BF16_KEEP",
    "MODE_F32_TO_BF16_KEEP",
    "MODE_BITS32",
]

# The kernel module whose functions this one inlines: a change to it recompiles the cached code.
_DEPENDS = (rounding,)

MODE_F32_TO_BF16, MODE_BF16, MODE_FP16, MODE_F32_TO_FP16 = 0, 1, 2, 3
# BF16 with denormals kept (no DAZ), for the paths that widen BF16 to binary32 by a shift.
MODE_BF16_KEEP, MODE_F32_TO_BF16_KEEP = 4, 5
# binary32 bits laid out as they are: a format without a mode of its own, widened beforehand.
MODE_BITS32 = 6
# binary32 bits truncated to TF32 on the way (AMX-TF32's A), in the same pass as the layout.
MODE_TF32 = 7


@lazy_vectorize(["uint16(uint32)"], _DEPENDS)
def f32_to_bf16(bits):
    """binary32 bits -> BF16 bits, RNE; NaN stays a (quiet) NaN of the same sign."""
    return rounding.f32_to_bf16(bits)


@lazy_vectorize(["uint16(uint32)"], _DEPENDS)
def f32_to_fp16(bits):
    """binary32 bits -> binary16 bits, RNE, overflow to infinity, denormals rounded in place."""
    return rounding.f32_to_fp16(bits)


@lazy_vectorize(["uint32(uint32)"], _DEPENDS)
def f32_round_fp16(bits):
    """binary32 bits -> binary32 bits of the nearest binary16 value (RNE, overflow to infinity)."""
    return rounding.f32_round_fp16(bits)


@lazy_vectorize(["uint32(uint16)"], _DEPENDS)
def bf16_to_f32_daz(h):
    """BF16 bits -> binary32 bits, exact; a BF16 denormal becomes a zero of its sign."""
    return rounding.bf16_to_f32_daz(h)


@lazy_vectorize(["uint32(uint16)"], _DEPENDS)
def bf16_to_f32(h):
    """BF16 bits -> binary32 bits, exact, denormals kept (a left shift by 16)."""
    return np.uint32(h) << 16


@lazy_vectorize(["uint32(uint16)"], _DEPENDS)
def fp16_to_f32(h):
    """binary16 bits -> binary32 bits, exact, denormals kept."""
    return rounding.fp16_to_f32(h)


@njit(cache=True, inline="always")
def _exponent_update(bits, lo, hi):
    """Fold one binary32 pattern's biased exponent into (lo, hi), skipping zeros, infinities and
    NaNs. A denormal counts as biased exponent 0 (below every normal), so that the fast-path
    proof sees it. Branch-free, so the loops around it vectorize."""
    e = np.int32((bits >> 23) & 0xFF)
    live = (bits & 0x7FFFFFFF) != 0 and e != 255
    return min(lo, e if live else 255), max(hi, e if live else 0)


@njit(cache=True, nogil=True)
def pack_a_float(w, nw, src, mode, dst):
    """src (nA, M, K) bits (uint32 binary32 for MODE_F32_TO_* and MODE_BITS32, else uint16) -> dst panels.

    ``dst`` is uint32 (the float32 bits) of shape (nA, MT, KB, 16, k_step), zero-filled. Worker
    ``w`` of ``nw`` (``tilegemm.workers``) packs its share of the rows and returns the smallest
    and largest unbiased exponent of their non-zero finite values (min > max: none).
    """
    nA, M, K = src.shape
    k_step = dst.shape[4]
    rlo, rhi = 255, 0
    for row in range(nA * M * w // nw, nA * M * (w + 1) // nw):
        a = row // M
        m = row % M
        for kb in range(-(-K // k_step)):
            out = dst[a, m // 16, kb, m % 16]
            seg = src[a, m, kb * k_step : min(K, (kb + 1) * k_step)]
            # One loop per mode, so that each is a straight, vectorizable loop.
            if mode == MODE_F32_TO_BF16:
                for kin in range(seg.size):
                    out[kin] = rounding.bf16_to_f32_daz(rounding.f32_to_bf16(np.uint32(seg[kin])))
            elif mode == MODE_BF16:
                for kin in range(seg.size):
                    out[kin] = rounding.bf16_to_f32_daz(np.uint16(seg[kin]))
            elif mode == MODE_F32_TO_FP16:
                for kin in range(seg.size):
                    out[kin] = rounding.f32_round_fp16(np.uint32(seg[kin]))
            elif mode == MODE_BF16_KEEP:
                for kin in range(seg.size):
                    out[kin] = np.uint32(np.uint16(seg[kin])) << 16
            elif mode == MODE_F32_TO_BF16_KEEP:
                for kin in range(seg.size):
                    out[kin] = np.uint32(rounding.f32_to_bf16(np.uint32(seg[kin]))) << 16
            elif mode == MODE_BITS32:
                for kin in range(seg.size):
                    out[kin] = np.uint32(seg[kin])
            elif mode == MODE_TF32:
                for kin in range(seg.size):
                    out[kin] = rounding.f32_to_tf32(np.uint32(seg[kin]))
            else:
                for kin in range(seg.size):
                    out[kin] = rounding.fp16_to_f32(np.uint16(seg[kin]))
            for kin in range(seg.size):
                rlo, rhi = _exponent_update(out[kin], rlo, rhi)
    return rlo - 127, rhi - 127


@njit(cache=True, nogil=True)
def pack_b(w, nw, src, dst):
    """src (nB, K, N) bits -> dst (nB, KB, NB, 16, 16, group) VNNI blocks, zero-filled beyond B.

    Block (kb, nb), row r, column n, slot j holds ``B[kb*16*group + r*group + j][nb*16 + n]``
    (docs/semantics.md, section 2). ``dst`` must be zero-filled. Worker ``w`` of ``nw``."""
    nB, K, N = src.shape
    KB, NB, group = dst.shape[1], dst.shape[2], dst.shape[5]
    for job in range(nB * KB * w // nw, nB * KB * (w + 1) // nw):
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


@njit(cache=True, nogil=True)
def exponent_bounds(w, nw, bits):
    """Smallest and largest biased exponent of the non-zero finite binary32 values in worker
    ``w`` of ``nw``'s share of ``bits`` (a flat uint32 array), in one pass without temporaries;
    (255, 0) when there are none."""
    rlo, rhi = 255, 0
    for i in range(bits.size * w // nw, bits.size * (w + 1) // nw):
        rlo, rhi = _exponent_update(bits[i], rlo, rhi)
    return rlo, rhi


@njit(cache=True, nogil=True)
def pack_a_int(w, nw, src, dst):
    """src (nA, M, K) int8/uint8 -> dst panels (nA, MT, KB, 16, 64), zero-filled; worker ``w`` of ``nw``."""
    nA, M, K = src.shape
    k_step = dst.shape[4]
    for row in range(nA * M * w // nw, nA * M * (w + 1) // nw):
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


@lazy_vectorize(["uint8(uint32)"], _DEPENDS)
def f32_to_e5m2(bits):
    """binary32 bits -> E5M2 code, RNE, overflow to infinity (as ml_dtypes.float8_e5m2)."""
    return _f32_to_fp8(bits, 2, 15, True)


@lazy_vectorize(["uint8(uint32)"], _DEPENDS)
def f32_to_e4m3fn(bits):
    """binary32 bits -> E4M3 "fn" code, RNE, overflow to NaN (as ml_dtypes.float8_e4m3fn)."""
    return _f32_to_fp8(bits, 3, 7, False)


@njit(cache=True, nogil=True)
def block_exponents(w, nw, codes, fp16, out):
    """The block exponent table of packed 16-bit float blocks.

    ``codes``: (nB, KB, NB, 512) uint16, one tile block per (kb, nb); ``out``: (nB, KB, NB) int16,
    set to the smallest biased binary32 exponent of the block's non-zero finite values as the
    instruction reads them (BF16 with DAZ, FP16 widened exactly), 255 where there is none, and -1
    for a BF16 block holding a denormal or a block holding a NaN (the blocked kernels send it to
    their exact path: a fast body's FMA picks between two NaNs by the compiler's operand order).
    Worker ``w`` of ``nw``."""
    nB, KB, NB = out.shape
    for job in range(nB * KB * w // nw, nB * KB * (w + 1) // nw):
        b = job // KB
        kb = job % KB
        for nb in range(NB):
            blk = codes[b, kb, nb]
            lo = 255
            den = False
            nan_above = np.uint32(0x7C00) if fp16 else np.uint32(0x7F80)
            if fp16:
                for i in range(blk.size):
                    e = np.int32((rounding.fp16_to_f32(blk[i]) >> np.uint32(23)) & np.uint32(0xFF))
                    lo = min(lo, 255 if (e == 0 or e == 255) else e)
            else:
                # branch-free, so that it vectorizes (with short-circuit tests it ran an element
                # at a time: 1.2 ms for a 1024 x 1024 B, a tenth of the BF16 call that packs it)
                bad = 0
                for i in range(blk.size):
                    h = np.int32(blk[i])
                    e = (h >> 7) & 0xFF
                    bad |= ((e == 0) & ((h & 0x7F) != 0)) | ((h & 0x7FFF) > 0x7F80)
                    lo = min(lo, e if np.uint32(e - 1) < np.uint32(254) else 255)
                den = bad != 0
            if fp16:
                for i in range(blk.size):
                    den = den or (np.uint32(blk[i]) & np.uint32(0x7FFF)) > nan_above
            out[b, kb, nb] = -1 if den else lo


@njit(cache=True, nogil=True)
def column_sums(w, nw, blocks, out):
    """``out[b, n]``: the sum over K of column n of packed INT8 blocks, modulo 2^32.

    ``blocks``: (nB, KB, NB, 16, 16, 4) int8 or uint8 (quads of column n at ``[..., n, :]``),
    ``out``: (nB, NB * 16) int32. Worker ``w`` of ``nw``."""
    nB, KB, NB = blocks.shape[0], blocks.shape[1], blocks.shape[2]
    for job in range(nB * NB * w // nw, nB * NB * (w + 1) // nw):
        b = job // NB
        nb = job % NB
        for n in range(16):
            total = np.int64(0)
            for kb in range(KB):
                for q in range(16):
                    for j in range(4):
                        total += np.int64(blocks[b, kb, nb, q, n, j])
            out[b, nb * 16 + n] = np.int32(total)  # the low 32 bits: the sum modulo 2^32


for _fn in (pack_a_float, pack_b, pack_a_int, exponent_bounds, block_exponents, column_sums):
    stamp_with_dependencies(_fn, _DEPENDS)

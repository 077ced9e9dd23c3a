"""The float32 operations of oneDNN's brgemm epilogue, on bit patterns, exact on any CPU state.

oneDNN's AMX brgemm matmul (``docs/onednn.md``) leaves the tiles for three kinds of plain
AVX-512 arithmetic, all under the MXCSR PyTorch runs with by default (round to nearest even, no
DAZ, no FTZ):

- ``vaddps``: a block's tile result added to the float32 C buffer, the parallel-K buffers added
  to each other, and the sum post-op (``dst + C``, with C the bf16 value read back from dst):
  IEEE binary32 addition with gradual underflow.
- ``vfmadd231ps``: the sum post-op with a scale other than 1 (``addmm(..., beta=0.5)``): one
  IEEE binary32 fused multiply-add, gradual underflow.
- ``vcvtneps2bf16``: the bf16 output, rounded to nearest even; a denormal input is read as a
  zero of its sign and a NaN is quieted (Intel SDM, VCVTNEPS2BF16, ``convert_fp32_to_bfloat16``).

``c10_bf16`` is the bf16 rounding of PyTorch's own kernels (the ``avx2`` host, where no oneDNN
runs): denormals kept, every NaN the same.

Unlike the tile multiplies (``exact.py``: DAZ/FTZ), these keep denormals. They are computed
from and into bit patterns: operands are decoded with integer operations, the arithmetic runs in
binary64 with an error-free TwoSum (no binary64 value here is ever below 2^-149, so DAZ/FTZ
cannot act on one), and the binary32 result is rounded and encoded with integer operations. So
no bit depends on the caller's MXCSR. This module must stay free of ``fastmath``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import exact, rounding
from ._cache import lazy_vectorize
from .exact import two_sum

# The kernel modules the ufuncs inline: a change to one recompiles the cached code.
_DEPENDS = (exact, rounding)

_SIGN = np.uint32(0x80000000)
_QNAN = np.uint32(0xFFC00000)  # x86's "real indefinite": inf - inf, 0 * inf
_TWO_149 = 2.0**149
_MIN_NORMAL = 2.0**-126


@njit(cache=True)
def decode(bits):
    """binary32 bits -> the float64 of the same value (denormals kept); inf/NaN as float64 too."""
    e = (bits >> 23) & 0xFF
    m = bits & 0x7FFFFF
    if e == 0xFF:
        v = math.inf if m == 0 else math.nan
    elif e == 0:
        v = math.ldexp(float(m), -149)
    else:
        v = math.ldexp(float(m | 0x800000), int(e) - 150)
    return -v if (bits & _SIGN) != 0 else v


@njit(cache=True)
def encode(s, t):
    """binary32 bits of the exact value ``s + t`` (``s = fl64(s + t)``, finite, TwoSum's pair):
    round to nearest even with gradual underflow, overflow to infinity."""
    if s == 0.0:
        return _SIGN if math.copysign(1.0, s) < 0 else np.uint32(0)
    sign = _SIGN if s < 0 else np.uint32(0)
    a = abs(s)
    ta = t if s > 0 else -t  # the error, positive when the exact value is farther from 0
    if a < _MIN_NORMAL:
        q = a * _TWO_149  # units of 2^-149, exact
        expo = 0
    else:
        _, ex = math.frexp(a)  # a in [2^(ex-1), 2^ex)
        expo = ex - 1 + 127  # biased binary32 exponent
        q = math.ldexp(a, 23 - (ex - 1))  # the significand in [2^23, 2^24), exact
    n = math.floor(q)
    f = q - n
    # |ta| is at most half a binary64 ulp of s, far below the binary32 grid: it decides ties only.
    if f > 0.5 or (f == 0.5 and (ta > 0.0 or (ta == 0.0 and n % 2 == 1))):
        n += 1
    n = np.uint32(n)
    if expo == 0:
        return sign | n  # n = 2^23 encodes the smallest normal
    if n == np.uint32(1 << 24):
        n = np.uint32(1 << 23)
        expo += 1
    if expo >= 255:
        return sign | np.uint32(0x7F800000)
    return sign | (np.uint32(expo) << 23) | (n - np.uint32(1 << 23))


@njit(cache=True)
def _nan_result(x, y):
    """SSE/AVX NaN propagation: the first NaN operand, quieted."""
    if ((x & 0x7F800000) == 0x7F800000) and (x & 0x7FFFFF) != 0:
        return x | np.uint32(0x400000)
    return y | np.uint32(0x400000)


@njit(cache=True)
def _is_nan(x):
    return ((x & 0x7F800000) == 0x7F800000) and (x & 0x7FFFFF) != 0


@njit(cache=True)
def add_bits(x, y):
    """``vaddps`` on one lane: IEEE binary32 ``x + y``, RNE, denormals kept."""
    if _is_nan(x) or _is_nan(y):
        return _nan_result(x, y)
    a = decode(x)
    b = decode(y)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and (a > 0) != (b > 0):
            return _QNAN
        return x if math.isinf(a) else y
    s, t = two_sum(a, b)
    return encode(s, t)


@njit(cache=True)
def fma_bits(x, y, z):
    """``vfmadd231ps`` on one lane: IEEE binary32 ``x * y + z`` with one rounding, denormals kept.

    A product of two binary32 values has at most 48 significant bits and lies within binary64's
    range, so it is exact in binary64; TwoSum then gives the exact sum."""
    if _is_nan(x) or _is_nan(y) or _is_nan(z):
        return _nan_result(x, _nan_result(y, z))
    a = decode(x)
    b = decode(y)
    c = decode(z)
    if math.isinf(a) or math.isinf(b):
        if a == 0.0 or b == 0.0:
            return _QNAN
        p_sign = (a < 0) != (b < 0)
        if math.isinf(c) and (c < 0) != p_sign:
            return _QNAN
        return np.uint32(0xFF800000) if p_sign else np.uint32(0x7F800000)
    if math.isinf(c):
        return z
    p = a * b  # exact; a signed zero when a or b is zero, as IEEE multiplies
    s, t = two_sum(p, c)
    return encode(s, t)


@njit(cache=True, inline="always")
def _host_sum_exact(x, y, s):
    """Whether ``s``, the host's binary32 sum of bits ``x`` and ``y``, is IEEE's on every CPU and
    under every FTZ/DAZ setting: ``x`` and ``y`` zeros or normal numbers, and ``s`` a normal
    number or a zero they explain (``x == -y``; a zero FTZ made of a denormal is not). Integer
    operations only, so that the loop over a row vectorizes."""
    ex = x & 0x7F800000
    ey = y & 0x7F800000
    es = s & 0x7F800000
    plain_x = ((ex != 0) & (ex != 0x7F800000)) | ((x & 0x7FFFFFFF) == 0)
    plain_y = ((ey != 0) & (ey != 0x7F800000)) | ((y & 0x7FFFFFFF) == 0)
    normal_s = (es != 0) & (es != 0x7F800000)
    cancel = ((s & 0x7FFFFFFF) == 0) & (((x ^ 0x80000000) == y) | (((x | y) & 0x7FFFFFFF) == 0))
    return plain_x & plain_y & (normal_s | cancel)


@njit(cache=True, inline="always")
def _add_row(xb, yb, rb, w):
    """``rb[:w] = xb[:w] + yb[:w]`` on binary32 bits (``rb`` another row than the operands): the
    host's addition where it is exact on every CPU, :func:`add_bits` on the lanes where it may
    not be. Two loops, the sums and then the check, because LLVM vectorizes neither loop when
    they are one (a store beside a reduction)."""
    xf = xb.view(np.float32)
    yf = yb.view(np.float32)
    rf = rb.view(np.float32)
    for j in range(w):
        rf[j] = xf[j] + yf[j]
    bad = np.uint32(0)
    for j in range(w):
        bad |= np.uint32(1) - np.uint32(_host_sum_exact(xb[j], yb[j], rb[j]))
    if bad:
        for j in range(w):
            if not _host_sum_exact(xb[j], yb[j], rb[j]):
                rb[j] = add_bits(xb[j], yb[j])


@njit(cache=True, parallel=True)
def add_lanes(x, y, out):
    """binary32 bits ``out = x + y`` on 2-D uint32 arrays, C-contiguous, each of ``out``'s rows or
    one row (broadcast along the rows); ``out`` may be ``x`` or ``y``. The host's own binary32
    addition gives most lanes, :func:`add_bits` the rest.

    IEEE addition of zeros and normal numbers to a normal result, or to a zero when the operands
    cancel exactly, is the same on every CPU and under every FTZ/DAZ setting: those act only on
    denormals. So only lanes with a denormal, an infinity or a NaN among the operands, or a
    result that is not normal (a denormal, or a zero the operands do not explain, which FTZ may
    have made of one; under DAZ a denormal compares equal to zero and fails the same test), take
    the bit-level rule. A row is summed into a buffer first, so that an ``out`` that is an operand
    still holds the operands when a lane needs the rule."""
    rows, cols = out.shape
    xstep = 1 if x.shape[0] > 1 else 0
    ystep = 1 if y.shape[0] > 1 else 0
    per = max(1, 4096 // max(cols, 1))  # rows per task: short rows (lanes of 16) share a buffer
    for task in prange((rows + per - 1) // per):
        r = np.empty(cols, np.uint32)
        for i in range(task * per, min(rows, (task + 1) * per)):
            _add_row(x[i * xstep], y[i * ystep], r, cols)
            out[i, :] = r


#: Columns per task of :func:`add_tree`: the leaves and every sum of a strip of 256 stay in L2
#: (64 leaves and 63 sums: 127 KiB).
TREE_STRIP = 256


@njit(cache=True, parallel=True)
def add_tree(leaves, ops, out):
    """A fixed tree of binary32 additions over the rows of ``leaves`` (n, X) uint32, C-contiguous,
    into ``out`` (X,): addition ``i`` adds values ``ops[i, 0]`` and ``ops[i, 1]`` in that order,
    where value ``v < n`` is ``leaves[v]`` and ``v >= n`` is the sum of addition ``v - n``; the
    last addition's sum is the result. Each addition is :func:`add_lanes`' on every lane, so the
    bits are those of the same additions made one array at a time; a strip of columns at a time,
    so that the tree's sums never leave the cache."""
    n, X = leaves.shape
    nops = ops.shape[0]
    for task in prange((X + TREE_STRIP - 1) // TREE_STRIP):
        x0 = task * TREE_STRIP
        w = min(X, x0 + TREE_STRIP) - x0
        val = np.empty((n + nops, TREE_STRIP), np.uint32)
        for v in range(n):
            val[v, :w] = leaves[v, x0 : x0 + w]
        for i in range(nops):
            _add_row(val[ops[i, 0]], val[ops[i, 1]], val[n + i], w)
        out[x0 : x0 + w] = val[n + nops - 1, :w]


@lazy_vectorize(["uint32(uint32, uint32)"], _DEPENDS)
def vaddps(x, y):
    """binary32 bits ``x + y`` (IEEE, RNE, gradual underflow), lane by lane."""
    return add_bits(x, y)


@lazy_vectorize(["uint32(uint32, uint32, uint32)"], _DEPENDS)
def vfmadd(x, y, z):
    """binary32 bits ``x * y + z`` (IEEE, one rounding, gradual underflow), lane by lane."""
    return fma_bits(x, y, z)


@lazy_vectorize(["uint16(uint32)"], _DEPENDS)
def vcvtneps2bf16(bits):
    """binary32 bits -> bf16 bits as VCVTNEPS2BF16: a NaN keeps its sign and top payload bits and
    is quieted; zero and denormal inputs become a zero of their sign; the rest round to nearest
    even (an integer add of 0x7FFF plus the kept lowest bit, as the SDM writes it)."""
    e = bits & 0x7F800000
    if e == 0x7F800000:
        if (bits & 0x7FFFFF) != 0:
            return np.uint16((bits >> 16) | 0x40)
        return np.uint16(bits >> 16)
    if e == 0:
        return np.uint16((bits >> 16) & 0x8000)
    return np.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


@lazy_vectorize(["uint16(uint32)"], _DEPENDS)
def c10_bf16(bits):
    """binary32 bits -> bf16 bits as PyTorch's ``c10::BFloat16`` rounds where oneDNN does not
    (``c10/util/BFloat16.h``, ``round_to_nearest_even``): every NaN becomes 0x7FC0, and the rest
    round to nearest even on the bit pattern, denormals kept."""
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0:
        return np.uint16(0x7FC0)
    return np.uint16((np.uint64(bits) + 0x7FFF + ((bits >> 16) & 1)) >> 16)


@lazy_vectorize(["uint16(uint32)"], _DEPENDS)
def bf16_keep_denormals(bits):
    """binary32 bits -> bf16 bits as oneDNN converts without AVX512_BF16 (``gemm:jit:bf16``;
    ``jit_avx512_core_bf16cvt.hpp`` 104-136): round to nearest even on the bit pattern, denormals
    kept, a NaN quieted keeping its sign and top payload bits."""
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0:
        return np.uint16((bits >> 16) | 0x40)
    return np.uint16((np.uint64(bits) + 0x7FFF + ((bits >> 16) & 1)) >> 16)

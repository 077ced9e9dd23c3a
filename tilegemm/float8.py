"""Compiled conversions of 8-bit float codes (AMX-FP8's E5M2 and E4M3), ``convert``'s twin for them.

- :func:`decode_table`: the 256 values of a format as binary64 (exact: every 8-bit float is), NaN
  and infinities included, made once per format from the compiled decode of
  ``tilegemm.kernels.exact.fp8_fix`` (the twin of ``tilegemm.reference.fp8.fix``).
- :func:`pack_a`: A's codes as the kernels' binary64 tile panels ``(nA, M_tiles, K_steps, 16, 64)``,
  zero-padded, with the exponent range the fast-path proof needs, in one pass.

This module rearranges and widens exact values; it never rounds (``formats`` converts user values
to codes, as ml_dtypes does).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from .formats import NumberFormat
from .kernels import exact
from .kernels._cache import stamp_with_dependencies

__all__ = ["decode_table", "exponent_table", "pack_a"]

#: Exponent-table entry of a code whose value is zero, NaN or infinite (no exponent to bound).
NO_EXPONENT = np.int16(-32768)


@njit(cache=True)
def _table(ebits, mbits, ieee, shift):
    out = np.empty(256, np.float64)
    scale = 2.0**-shift
    for c in range(256):
        kind, fx = exact.fp8_fix(c, ebits, mbits, ieee)
        if kind == exact.FP8_NAN:
            out[c] = np.nan
        elif kind == exact.FP8_POS_INF:
            out[c] = np.inf
        elif kind == exact.FP8_NEG_INF:
            out[c] = -np.inf
        else:  # |fx| < 2^32 times a power of two: exact; code 0x80 is -0
            out[c] = math.copysign(np.float64(abs(fx)) * scale, -1.0 if c & 0x80 else 1.0)
    return out


@functools.cache
def decode_table(fmt: NumberFormat) -> np.ndarray:
    """The binary64 value of every code 0..255 of an 8-bit float format (read-only)."""
    mf = fmt.minifloat
    if mf is None:
        raise ValueError(f"format {fmt.name!r} is not an 8-bit float")
    t = _table(mf.exponent_bits, mf.mantissa_bits, mf.ieee_specials, mf.fix_shift)
    t.flags.writeable = False
    return t


@functools.cache
def exponent_table(fmt: NumberFormat) -> np.ndarray:
    """The unbiased binary exponent of every code's value, :data:`NO_EXPONENT` where the value is
    zero, NaN or infinite (int16, read-only)."""
    v = decode_table(fmt)
    live = np.isfinite(v) & (v != 0)
    e = np.full(256, NO_EXPONENT, np.int16)
    e[live] = np.frexp(v[live])[1] - 1
    e.flags.writeable = False
    return e


@njit(cache=True, parallel=True)
def _pack_a(src, values, exps, dst):
    nA, M, K = src.shape
    k_step = dst.shape[4]
    lo = np.full(nA * M, 32767, np.int32)
    hi = np.full(nA * M, -32768, np.int32)
    for row in prange(nA * M):
        a = row // M
        m = row % M
        seen = np.zeros(256, np.uint8)  # the row's codes; their exponents after the copy, which stays branch-free
        for kb in range(-(-K // k_step)):
            out = dst[a, m // 16, kb, m % 16]
            for kin in range(min(k_step, K - kb * k_step)):
                c = src[a, m, kb * k_step + kin]
                out[kin] = values[c]
                seen[c] = 1
        rlo, rhi = 32767, -32768
        for c in range(256):
            e = exps[c]
            if seen[c] and e != -32768:
                rlo = min(rlo, e)
                rhi = max(rhi, e)
        lo[row] = rlo
        hi[row] = rhi
    return lo.min(), hi.max()


def pack_a(src: np.ndarray, fmt: NumberFormat, dst: np.ndarray) -> tuple[int, int] | None:
    """``src`` (nA, M, K) codes -> ``dst`` (nA, MT, KB, 16, k_step) binary64 panels, zero-filled
    beforehand. Returns the smallest and largest exponent of the non-zero finite values (None:
    there are none)."""
    lo, hi = _pack_a(src, decode_table(fmt), exponent_table(fmt), dst)
    return None if lo > hi else (int(lo), int(hi))


for _fn in (_table, _pack_a):
    stamp_with_dependencies(_fn, (exact,))  # a change to the inlined fp8_fix recompiles them

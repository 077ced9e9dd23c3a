"""Compiled conversions of 8-bit float codes (AMX-FP8's E5M2 and E4M3), ``convert``'s twin for them.

- :func:`decode_table`: the 256 values of a format as binary64 (exact: every 8-bit float is), NaN
  and infinities included, made once per format from the compiled decode of
  ``tilegemm.kernels.exact.fp8_fix`` (the twin of ``tilegemm.reference.fp8.fix``).
- :func:`pack_a`: A's codes as the kernels' binary64 (or binary32) tile panels ``(nA, M_tiles,
  K_steps, 16, 64)``, zero-padded, with the exponent range the fast-path proof needs, in one pass.

This module rearranges and widens exact values; it never rounds (``formats`` converts user values
to codes, as ml_dtypes does).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from . import workers
from .formats import NumberFormat, kernel_input
from .kernels import exact
from .kernels._cache import stamp_with_dependencies

__all__ = ["decode_table", "pack_a"]


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
def decode_table(fmt: NumberFormat, dtype: type | str = np.float64) -> np.ndarray:
    """The value of every code 0..255 of an 8-bit float format as binary64, or as binary32
    (``dtype``; exact too: every 8-bit float is a binary32 normal), read-only. A NaN code's value
    is the quiet NaN 0x7FC00000: every instruction that reads these tables writes the default NaN
    for a NaN input (AMX-FP8, ACE's ``ieee_like``), so no payload is ever read."""
    mf = fmt.minifloat
    if mf is None:
        raise ValueError(f"format {fmt.name!r} is not an 8-bit float")
    t = _table(mf.exponent_bits, mf.mantissa_bits, mf.ieee_specials, mf.fix_shift).astype(dtype)
    t.flags.writeable = False
    return t


def pack_a(src: np.ndarray, fmt: NumberFormat, dst: np.ndarray) -> tuple[int, int] | None:
    """``src`` (nA, M, K) codes -> ``dst`` (nA, MT, KB, 16, k_step) panels of binary64 or binary32
    values (both exact), zero-filled beforehand. Returns the smallest and largest exponent of the
    non-zero finite values (None: there are none)."""
    values = decode_table(fmt, np.float32 if dst.dtype == np.float32 else np.float64)
    src = kernel_input(src)
    if dst.dtype == np.float32:
        how = (dst.view(np.int32), np.int64(23), np.int64(0xFF), 127)
    else:
        how = (dst.view(np.int64), np.int64(52), np.int64(0x7FF), 1023)
    shares = workers.run(_pack_a, workers.count(src.size), src, values, *how)
    lo, hi = min(s[0] for s in shares), max(s[1] for s in shares)
    return None if lo > hi else (int(lo), int(hi))


@njit(cache=True, nogil=True)
def _pack_a(w, nw, src, values, bits, shift, top, bias):
    """Worker ``w`` of ``nw``'s rows of the panels as integers (``bits``: ``dst`` viewed as int64
    or int32, ``values`` the table of its float type): an exponent field is ``(b >> shift) & top``,
    with ``top`` for NaN/Inf."""
    nA, M, K = src.shape
    k_step = bits.shape[4]
    vbits = values.view(bits.dtype)
    # Biased exponents of the rows' values: zeros (0) and NaN/Inf (top) left out by selects, so
    # that both loops vectorize (every 8-bit float value is a binary32 and binary64 normal).
    elo, ehi = top, np.int64(0)
    for row in range(nA * M * w // nw, nA * M * (w + 1) // nw):
        a = row // M
        m = row % M
        for kb in range(-(-K // k_step)):
            out = bits[a, m // 16, kb, m % 16]
            n = min(k_step, K - kb * k_step)
            codes = src[a, m, kb * k_step : kb * k_step + n]
            for kin in range(n):
                out[kin] = vbits[codes[kin]]
            for kin in range(n):
                e = (np.int64(out[kin]) >> shift) & top
                elo = min(elo, e if e != 0 else top)
                ehi = max(ehi, e if e != top else 0)
    return (elo - bias, ehi - bias) if elo <= ehi else (np.int64(32767), np.int64(-32768))


for _fn in (_table, _pack_a):
    stamp_with_dependencies(_fn, (exact,))  # a change to the inlined fp8_fix recompiles them

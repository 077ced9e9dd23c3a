"""TDPBF16PS / TDPFP16PS tile loops: C superblocks in parallel, one tile multiply at a time.

Both dtypes reach these loops as exact float32 values (BF16 with DAZ already applied, FP16
widened with its denormals kept), so one kernel serves both. Two variants of the tile multiply:

- exact (variant 0): every operation through ``exact.fma32`` / ``exact.add32``; handles denormal
  results (FTZ), overflowing products next to infinite sums, and the odd-K padded pair.
- fast (variant 1): plain float32 FMA chains. Used only after the per-call range proof in
  ``tilegemm.dispatch.fast_path_ok`` (the "prove per call" option of PERF-NOTES.md): all values
  are then multiples of a grid u >= 2^-126, so no result is tiny and FTZ/DAZ never act, and no
  product overflows, so a fused and an unfused multiply-add give the same bits. We chose the
  proof over setting MXCSR in worker threads because it needs no per-thread state, cannot leak
  flags to the caller, and LLVM may move float operations across an ``ldmxcsr`` it does not
  know to be a barrier. Under the proof a partial sum is never -0 (it starts at +0 and no result
  flushes), so running the zero pairs that pad K to a whole tile step changes no bit either.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .exact import add32, fma32

_TILE = 16
_PAIRS = 16  # a full tile multiply: 16 rows of 64 bytes = 16 pairs along K


@njit(cache=True, inline="always", fastmath={"contract"})
def _tile_fast(A, ai, m0, mr, k0, B, bi, kb, nbk, C, ci, n0, nc, acc):
    for mm in range(mr):
        m = m0 + mm
        for n in range(_TILE):
            acc[0, n] = 0.0
            acc[1, n] = 0.0
        for p in range(_PAIRS):
            ae = A[ai, m, k0 + 2 * p]
            ao = A[ai, m, k0 + 2 * p + 1]
            for n in range(_TILE):
                acc[0, n] += ae * B[bi, kb, nbk, p, n, 0]
                acc[1, n] += ao * B[bi, kb, nbk, p, n, 1]
        for n in range(nc):
            C[ci, m, n0 + n] += acc[0, n] + acc[1, n]


@njit(cache=True, inline="always")
def _tile_exact(A, ai, m0, mr, k0, npairs, B, bi, kb, nbk, C, ci, n0, nc):
    for mm in range(mr):
        m = m0 + mm
        for n in range(nc):
            e = np.float32(0.0)
            o = np.float32(0.0)
            for p in range(npairs):
                e = fma32(A[ai, m, k0 + 2 * p], B[bi, kb, nbk, p, n, 0], e)
                o = fma32(A[ai, m, k0 + 2 * p + 1], B[bi, kb, nbk, p, n, 1], o)
            C[ci, m, n0 + n] = add32(C[ci, m, n0 + n], add32(e, o))


@njit(cache=True, parallel=True)
def gemm_float(A, B, C, ia, ib, k, rows, cols, variant):
    nC, M, N = C.shape
    KB = B.shape[1]
    sm = -(-M // (_TILE * rows))
    sn = -(-N // (_TILE * cols))
    for job in prange(nC * sm * sn):
        ci = job // (sm * sn)
        bm = (job // sn) % sm
        bn = job % sn
        ai = ia[ci]
        bi = ib[ci]
        acc = np.empty((2, _TILE), np.float32)
        for kb in range(KB):
            k0 = kb * 2 * _PAIRS
            npairs = min(_PAIRS, (k - k0 + 1) // 2)  # the tail rule: ceil(remaining / 2) pairs
            for r in range(rows):
                m0 = (bm * rows + r) * _TILE
                if m0 >= M:
                    break
                mr = min(_TILE, M - m0)
                for c in range(cols):
                    n0 = (bn * cols + c) * _TILE
                    if n0 >= N:
                        break
                    nc = min(_TILE, N - n0)
                    if variant == 1:
                        _tile_fast(A, ai, m0, mr, k0, B, bi, kb, n0 // _TILE, C, ci, n0, nc, acc)
                    else:
                        _tile_exact(A, ai, m0, mr, k0, npairs, B, bi, kb, n0 // _TILE, C, ci, n0, nc)

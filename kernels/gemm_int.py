"""TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD tile loops: C superblocks in parallel.

Integer sums modulo 2^32 do not depend on their order, so the kernel may sum a tile multiply's
quads in whatever order vectorizes best; only the final narrowing to int32 (which wraps, as the
instruction does) fixes the bits. Signedness comes from the operand arrays' dtypes (int8 or
uint8), so one kernel serves all four instructions.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_TILE = 16
_QUADS = 16  # a full tile multiply: 16 rows of 64 bytes = 16 quads along K


@njit(cache=True, inline="always")
def _tile(A, ai, m0, mr, k0, B, bi, kb, nbk, C, ci, n0, nc):
    for mm in range(mr):
        m = m0 + mm
        for n in range(nc):
            s = np.int64(0)
            for q in range(_QUADS):
                for j in range(4):
                    s += np.int64(A[ai, m, k0 + 4 * q + j]) * np.int64(B[bi, kb, nbk, q, n, j])
            C[ci, m, n0 + n] = np.int32(np.int64(C[ci, m, n0 + n]) + s)  # wraps modulo 2^32


@njit(cache=True, parallel=True)
def gemm_int(A, B, C, ia, ib, k, rows, cols, variant):
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
        for kb in range(KB):
            k0 = kb * 4 * _QUADS
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
                    _tile(A, ai, m0, mr, k0, B, bi, kb, n0 // _TILE, C, ci, n0, nc)

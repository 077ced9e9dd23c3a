"""oneDNN's bf16 gemm:jit kernels (an AVX-512 host without AVX512_BF16), in their order of sums.

The compiled twins of :mod:`tilegemm.reference.gemm_jit` (its docstring gives the orders and
their source): :func:`gemm` (K blocks, each a chain of emulated VDPBF16PS pairs from +0, added
as ``C = block + C``), :func:`gemv_t` (16 lanes over pairs, then a tree) and :func:`gemv_n`
(groups of 8 along K). Each step is one binary32 operation, computed as a binary64 sum rounded
once by :func:`tilegemm.kernels.aten.r32` (exact for bf16 operands, as there).

The operands are bf16 codes (uint16), read through ``V``, the table of the 65536 codes' values as
float64 (``tilegemm.kernels.aten.VALUES``): no pass over the operands converts them first.

Which NaN a step returns when more than one is in flight follows the instruction's operands:
the two factors of ``vfmadd231ps`` before the accumulator, in the order each kernel passes them
(the recordings of NaN edge cases decide it; :mod:`tilegemm.reference.gemm_jit`), and an
addition's first operand. The kernels pick it explicitly (:func:`_fma`, :func:`_add`): LLVM may
swap the operands of a binary64 addition, which would change the NaN returned.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .aten import r32

_ROWS = 4
_COLS = 256
#: x86's default NaN ("real indefinite", 0xFFC00000 as binary32) as a binary64 constant: what an
#: invalid operation gives on the modelled Xeons, whatever the host's own default NaN (AArch64's is
#: positive), so the kernels return it rather than the NaN the host's arithmetic made.
_QNAN = float(np.array([0xFFF8000000000000], np.uint64).view(np.float64)[0])


@njit(cache=True)
def _fma(acc, x, y):
    """``round32(x * y + acc)``; a NaN result is the first NaN of ``x``, ``y``, ``acc`` (else the
    x86's default NaN, :data:`_QNAN`, that ``inf * 0`` or ``inf - inf`` gives)."""
    s = x * y + acc
    if s != s:
        if x != x:
            return x
        if y != y:
            return y
        if acc != acc:
            return acc
        return _QNAN
    return r32(s)


@njit(cache=True)
def _add(x, y):
    """``round32(x + y)``; a NaN result is ``x`` if it is one, else ``y``, else :data:`_QNAN`."""
    s = x + y
    if s != s:
        if x != x:
            return x
        if y != y:
            return y
        return _QNAN
    return r32(s)


@njit(cache=True, parallel=True)
def gemm(A, B, V, out, kp, b, m0, m1, n0, n1):
    """``out[b, m0:m1, n0:n1]`` = the gemm driver's result for rows ``m0:m1`` of ``A[b]``
    ((nb, M, K)) and columns ``n0:n1`` of ``B[b]`` ((nb, K, N)), with K blocks of ``kp``."""
    K = A.shape[2]
    mblocks = (m1 - m0 + _ROWS - 1) // _ROWS
    nblocks = (n1 - n0 + _COLS - 1) // _COLS
    for job in prange(mblocks * nblocks):
        i0 = m0 + (job // nblocks) * _ROWS
        j0 = n0 + (job % nblocks) * _COLS
        rows = min(i0 + _ROWS, m1) - i0
        w = min(j0 + _COLS, n1) - j0
        acc = np.zeros((_ROWS, _COLS))
        C = np.zeros((_ROWS, _COLS))
        for k0 in range(0, K, kp):
            k1 = min(k0 + kp, K)
            acc[:] = 0.0
            for k in range(k0, k1, 2):
                for i in range(rows):
                    lo = V[A[b, i0 + i, k]]
                    if k + 1 < k1:  # the weights are the first factor
                        hi = V[A[b, i0 + i, k + 1]]
                        for j in range(w):
                            acc[i, j] = _fma(acc[i, j], V[B[b, k + 1, j0 + j]], hi)
                    else:  # the lone k of an odd block: its pair's weight is +0
                        for j in range(w):
                            acc[i, j] = _fma(acc[i, j], 0.0, lo)
                    for j in range(w):
                        acc[i, j] = _fma(acc[i, j], V[B[b, k, j0 + j]], lo)
            for i in range(rows):
                for j in range(w):
                    C[i, j] = acc[i, j] if k0 == 0 else _add(acc[i, j], C[i, j])
        for i in range(rows):
            for j in range(w):
                out[b, i0 + i, j0 + j] = np.float32(C[i, j])


@njit(cache=True, parallel=True)
def gemv_t(A, W, V, out, b, m, n0, n1):
    """``out[b, m, n0:n1]`` by the ``trans`` gemv kernel: row ``m`` of ``A[b]`` against rows
    ``n0:n1`` of ``W[b]`` ((nb, N, K), the weights stored N x K)."""
    K = A.shape[2]
    for j in prange(n0, n1):
        lanes = np.zeros(16)
        for i in range(0, K, 32):
            for l in range(16):
                k = i + 2 * l
                if k + 1 < K:  # the weights are the first factor
                    lanes[l] = _fma(lanes[l], V[W[b, j, k + 1]], V[A[b, m, k + 1]])
                else:  # past K: zeros on both sides
                    lanes[l] = _fma(lanes[l], 0.0, 0.0)
                if k < K:
                    lanes[l] = _fma(lanes[l], V[W[b, j, k]], V[A[b, m, k]])
                else:
                    lanes[l] = _fma(lanes[l], 0.0, 0.0)
        t0 = _add(lanes[8], lanes[0])
        t1 = _add(lanes[9], lanes[1])
        t2 = _add(lanes[10], lanes[2])
        t3 = _add(lanes[11], lanes[3])
        t4 = _add(lanes[12], lanes[4])
        t5 = _add(lanes[13], lanes[5])
        t6 = _add(lanes[14], lanes[6])
        t7 = _add(lanes[15], lanes[7])
        s = _add(_add(_add(t0, t1), _add(t2, t3)), _add(_add(t4, t5), _add(t6, t7)))
        out[b, m, j] = np.float32(_add(s, 0.0))


@njit(cache=True, parallel=True)
def gemv_n(A, B, V, out, b, m, n0, n1):
    """``out[b, m, n0:n1]`` by the ``n`` gemv kernel: row ``m`` of ``A[b]`` by columns ``n0:n1``
    of ``B[b]`` ((nb, K, N)), K in groups of 8, each summed from +0 and added as ``y = g + y``."""
    K = A.shape[2]
    for j in prange(n0, n1):
        y = 0.0
        for g0 in range(0, K, 8):
            g1 = min(K, g0 + 8)
            acc = 0.0
            for k in range(g0, g1, 2):  # x is the first factor here
                if k + 1 < g1:
                    acc = _fma(acc, V[A[b, m, k + 1]], V[B[b, k + 1, j]])
                else:
                    acc = _fma(acc, 0.0, 0.0)
                acc = _fma(acc, V[A[b, m, k]], V[B[b, k, j]])
            y = _add(acc, y)
        out[b, m, j] = np.float32(y)

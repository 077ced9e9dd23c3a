"""oneDNN's bf16 gemm on an AVX-512 host without AVX512_BF16 (``gemm:jit:bf16``), written out.

On a Xeon from Skylake-SP to Ice Lake (ISA ``avx512_core``, or ``avx512_core_vnni``) oneDNN's
matmul primitive for bf16 is ``gemm:jit:bf16`` (``src/cpu/matmul/gemm_bf16_matmul.cpp``), not
brgemm. Sources at oneDNN v3.12 (commit 80afa71049), under ``src/cpu/x64/gemm/``:

- **Threads.** The primitive shares ``batch * M * N`` outputs between its threads
  (``balance211``) and each thread makes single-threaded gemm calls on its share: whole
  matrices, runs of whole rows, or a piece of one row (``gemm_bf16_matmul.cpp`` 279-377;
  :func:`tilegemm.onednn.schedule.gemm_pieces`). So the threads never split K; they only decide
  which rows are a gemv call (a piece of one row, gemm's ``n = 1``).
- **gemm** (``gemm_driver.cpp``, kernel ``bf16/jit_avx512_core_gemm_bf16bf16f32_kern.cpp``): K
  in blocks (:func:`tilegemm.onednn.schedule.gemm_k_blocks`); each block's sum starts at +0
  and takes the pairs ``(k, k + 1)`` from the block's start as VDPBF16PS does, emulated with two
  FMAs: ``fma(a[k+1], b[k+1], acc)``, then ``fma(a[k], b[k], acc)`` (``dot_product``, kernel
  79-85; ``bf16_emulation_t::vdpbf16ps``, ``jit_avx512_core_bf16cvt.hpp`` 70-83). A lone last
  ``k`` of an odd block pairs with a +0 weight: ``fma(+0, a[k], acc)`` first (kernel 242-269).
  Block 0 is stored, each later one added: ``C = block + C`` (``gemm_driver.cpp`` 670-675).
- **gemv with the weights stored N x K** (``F.linear``, ``x @ w.T``; the ``trans`` kernel,
  ``bf16/jit_avx512_core_gemv_bf16bf16f32_kern.cpp`` 286-399): 16 lanes, lane ``l`` takes
  ``k = 32 i + 2 l + 1`` then ``32 i + 2 l`` (K padded with zeros to 32); then
  ``t[l] = lane[l + 8] + lane[l]`` and ``((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))``
  (an addition's first operand is the first written, for the NaN it returns).
- **gemv with the weights K x N** (``matmul``, ``bmm``, ``addmm``; the ``n`` kernel, 125-284):
  K in groups of 8, each group's sum from +0 over its pairs as above (a lone last ``k`` after
  ``acc + 0``), then ``y = group + y``.
- **Epilogue** (``jit_gemm_inner_product_utils.cpp`` 549-560, 761-780): the sum post-op adds
  the bf16 bias or ``c`` as ``acc + c`` (or ``fma(c, beta, acc)``), then binary32 -> bf16 by
  the integer add of ``0x7FFF`` plus the kept lowest bit (denormals kept), a NaN quieted with its
  sign and payload (``jit_avx512_core_bf16cvt.hpp`` 104-136).

Every operation is binary32, round to nearest even, denormals kept (no DAZ, no FTZ). Where
more than one NaN is in flight, an FMA returns the first of its two factors, then its
accumulator; the order of the factors is the weights first in the gemm kernel and the ``trans``
gemv, and ``x`` first in the ``n`` gemv. The source does not say it (the emulation's FMAs pass
their operands through shuffled registers); PyTorch's outputs on NaN edge cases, recorded on an
AMD EPYC Zen 4 under ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``, pick it among the six orders. As in
:mod:`tilegemm.reference.aten`, a fused step is a float64 sum rounded once, which is the
correctly rounded result for bf16 operands. Slow on purpose: :mod:`tilegemm.onednn` must
return the same bits.
"""

from __future__ import annotations

import numpy as np

from ..kernels import onednn as _epilogue
from ..onednn.schedule import Plan, gemm_k_blocks, gemm_pieces

__all__ = ["block", "gemm", "gemv_t", "gemv_n", "compute", "round_bf16"]

F32 = np.float32


#: x86's default NaN ("real indefinite"): ``inf * 0`` and ``inf - inf`` on the modelled Xeons,
#: whatever the default NaN of the host numpy runs on.
_QNAN = np.uint32(0xFFC00000).view(F32)


def _first_nan(s: np.ndarray, *ops) -> np.ndarray:
    """``s`` where it is a number; where it is a NaN, the first NaN of ``ops`` (quieted), or
    :data:`_QNAN` (an invalid operation) where none is."""
    nan = np.isnan(s)
    if not nan.any():
        return s
    out = s.copy()
    out[nan] = _QNAN
    for x in ops:
        x = np.broadcast_to(np.asarray(x, np.float64).astype(F32), s.shape)
        pick = nan & np.isnan(x)
        out[pick] = x[pick]
        nan &= ~pick
    return out


def _fma(acc: np.ndarray, x, y) -> np.ndarray:
    """``vfmadd231ps``: ``round32(x * y + acc)``, one rounding; a NaN is the first of ``x``,
    ``y``, ``acc`` (the factors come first, as the silicon's recordings show)."""
    s = (np.asarray(x, np.float64) * np.asarray(y, np.float64) + acc.astype(np.float64)).astype(F32)
    return _first_nan(s, x, y, acc)


def _add(x: np.ndarray, y) -> np.ndarray:
    """``vaddps`` / ``vhaddps``: ``round32(x + y)``; a NaN is ``x``'s first."""
    s = (np.asarray(x, np.float64) + np.asarray(y, np.float64)).astype(F32)
    return _first_nan(s, x, y)


def block(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """One K block of the gemm kernel: ``A`` (M, k) by ``B`` (k, N), from +0, pair by pair."""
    kb = A.shape[1]
    acc = np.zeros((A.shape[0], B.shape[1]), F32)
    for k in range(0, kb, 2):  # the weights are the first factor
        if k + 1 < kb:
            acc = _fma(acc, B[None, k + 1], A[:, k + 1, None])
        else:  # the lone k: its pair's weight is +0
            acc = _fma(acc, np.zeros((1, B.shape[1])), A[:, k, None])
        acc = _fma(acc, B[None, k], A[:, k, None])
    return acc


def gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The gemm driver on (M, K) by (K, N): its blocks, ``C = block + C``."""
    C = None
    for k0, k1 in gemm_k_blocks(A.shape[1]):
        r = block(A[:, k0:k1], B[k0:k1])
        C = r if C is None else _add(r, C)
    assert C is not None
    return C


def gemv_t(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The ``trans`` gemv kernel: ``x`` (K,) against the rows of ``W`` (N, K) -> (N,)."""
    K = x.shape[0]
    Kp = -(-K // 32) * 32
    xp = np.zeros(Kp)
    xp[:K] = x
    Wp = np.zeros((W.shape[0], Kp))
    Wp[:, :K] = W
    lanes = [np.zeros(W.shape[0], F32) for _ in range(16)]
    for i in range(0, Kp, 32):
        for l in range(16):  # the weights are the first factor
            k = i + 2 * l
            lanes[l] = _fma(_fma(lanes[l], Wp[:, k + 1], xp[k + 1]), Wp[:, k], xp[k])
    t = [_add(lanes[l + 8], lanes[l]) for l in range(8)]
    u = [_add(t[2 * i], t[2 * i + 1]) for i in range(4)]
    acc = _add(_add(u[0], u[1]), _add(u[2], u[3]))
    return _add(acc, np.zeros_like(acc))  # y = fma(acc, 1, y = +0)


def gemv_n(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The ``n`` gemv kernel: ``x`` (K,) by ``W`` (K, N) -> (N,), in groups of 8 along K."""
    K = x.shape[0]
    y = np.zeros(W.shape[1], F32)
    for g0 in range(0, K, 8):
        g1 = min(K, g0 + 8)
        acc = np.zeros_like(y)
        for k in range(g0, g1, 2):
            if k + 1 < g1:  # x is the first factor here
                acc = _fma(acc, x[k + 1], W[k + 1])
            else:
                acc = _fma(acc, np.zeros_like(acc), 0.0)
            acc = _fma(acc, x[k], W[k])
        y = _add(acc, y)  # vfmadd231ps(y, acc, 1)
    return y


def round_bf16(x) -> np.ndarray:
    """binary32 -> bf16 as oneDNN's converter without AVX512_BF16: round to nearest even on the bit
    pattern (denormals kept, overflow to infinity), a NaN quieted keeping its sign and payload."""
    u = np.ascontiguousarray(x, F32).view(np.uint32)
    r = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(u.view(F32))
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def compute(a, b, p: Plan, *, c=None, beta: float = 1.0) -> np.ndarray:
    """The bf16 bits (uint16) of plan ``p`` (``p.kernel == "gemm"``) on values ``a`` (batch, M, K)
    and ``b`` (batch, K, N) (float arrays holding bf16 values), with ``c`` broadcast to the
    result (values) as the sum post-op's input."""
    A = np.asarray(a, np.float64)
    B = np.asarray(b, np.float64)
    batch, M, K = A.shape
    N = B.shape[2]
    out = np.zeros((batch, M, N), F32)
    for bi, m0, m1, n0, n1 in gemm_pieces(batch, M, N, p.onednn_threads):
        if m1 - m0 > 1:
            out[bi, m0:m1, n0:n1] = gemm(A[bi, m0:m1], B[bi, :, n0:n1])
        elif p.b_transposed:
            out[bi, m0, n0:n1] = gemv_t(A[bi, m0], B[bi, :, n0:n1].T)
        else:
            out[bi, m0, n0:n1] = gemv_n(A[bi, m0], B[bi, :, n0:n1])
    if c is not None:
        prev = np.broadcast_to(np.asarray(c, F32), out.shape)
        if beta == 1:
            out = _add(out, prev)
        else:
            bits = _epilogue.vfmadd(prev.view(np.uint32), np.float32(beta).view(np.uint32), out.view(np.uint32))
            out = bits.view(F32)
    return round_bf16(out)

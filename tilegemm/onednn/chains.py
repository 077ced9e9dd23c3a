"""The fused-multiply-add orders of the gemm:jit and ATen hosts, as batched ``fp32_fma`` calls.

On an ``avx512_core`` host (oneDNN's gemm:jit) and an ``avx2`` host (PyTorch's own kernels)
every output is a set of float32 chains, each a run of fused multiply-adds from +0 over some of
the K indices in some order, followed by float32 additions in a fixed tree
(:mod:`tilegemm.reference.gemm_jit`, :mod:`tilegemm.reference.aten`). A chain over the indices
``ks`` is exactly ``tilegemm.matmul(A[:, ks], B[ks], isa="fp32_fma")``: that profile is one
binary32 FMA per K element in K order, denormals kept (``docs/isa-profiles.md``). So each
kernel's chains become one batched call of the library's own FMA kernels, the chains as the
batch, and the tree becomes :func:`tilegemm.onednn.vaddps` calls on whole arrays (ATen's tree of
64 accumulators one :func:`float32.add_tree` pass).

ATen's ``transa`` and ``notrans`` run before any of this as the host's own binary32 steps where
:func:`binary32_steps_hold` proves them exact (``kernels.aten.transa_fast`` and
``notrans_fast``); the batched forms here take the operands that proof refuses. Two cases are
left to the compiled kernels of ``tilegemm.kernels.aten`` and ``tilegemm.kernels.gemm_jit``,
which take every element one by one (the functions here return None for them):

- operands that hold a NaN: where two NaNs meet, the bits depend on which operand each kernel's
  instruction names first, which a batched product does not keep (NaNs that arithmetic makes
  are all the same default NaN, so infinities are fine);
- ATen's unfused tails (a product rounded, then added) where a product of the tail's elements
  is not a binary32 normal number: elsewhere rounding the product changes nothing, so the
  unfused step is the fused one.
"""

from __future__ import annotations

import numpy as np

from ..api import matmul as _tile_matmul
from ..formats import bf16_dtype
from .float32 import add_tree, vaddps
from .schedule import gemm_k_blocks

__all__ = ["notrans", "transa", "gemm", "GemmWeights", "binary32_steps_hold"]

_BF = bf16_dtype()
#: Output floats of one batched call at most (64 MiB): larger products are cut along N.
_MAX_OUT = 16 << 20


def _fma(a: np.ndarray, b: np.ndarray, threads, out=None) -> np.ndarray:
    """The float32 chains ``a @ b`` (batched), K in order, each from +0 (or ``out``)."""
    if out is not None:
        return _tile_matmul(a, b, "bf16", isa="fp32_fma", threads=threads, out=out, accumulate=True)
    return _tile_matmul(a, b, "bf16", isa="fp32_fma", threads=threads)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32)


def _holds_nan(codes: np.ndarray) -> bool:
    return bool(np.any((codes & np.uint16(0x7FFF)) > 0x7F80))


def _products_normal(A: np.ndarray, B: np.ndarray) -> bool:
    """Whether every nonzero finite product ``A[..., k] * B[..., k, :]`` is a binary32 normal
    number (``A`` (nb, M, k), ``B`` (nb, k, N), bf16 codes): then rounding it changes nothing."""
    if A.shape[-1] == 0:
        return True
    a = np.abs(A.view(_BF).astype(np.float64))
    b = np.abs(B.view(_BF).astype(np.float64))
    a[~np.isfinite(a)] = 0.0  # an infinite product is the same rounded or not
    b[~np.isfinite(b)] = 0.0
    amax, bmax = a.max(axis=(0, 1)), b.max(axis=(0, 2))
    a[a == 0] = np.inf
    b[b == 0] = np.inf
    amin, bmin = a.min(axis=(0, 1)), b.min(axis=(0, 2))
    big = np.all(amax * bmax < 2.0**128)
    small = np.all(~np.isfinite(amin) | ~np.isfinite(bmin) | (amin * bmin >= 2.0**-126))
    return bool(big and small)


def _exponents(codes: np.ndarray) -> tuple[int, int, bool]:
    """The smallest and largest biased exponent of the nonzero bf16 ``codes`` (255 for NaN and
    infinity), and whether one of them is a denormal; (255, 0, False) where all are zero."""
    from ..kernels.aten import exponent_range

    lo, hi, denormal = exponent_range(np.ravel(codes))
    return int(lo), int(hi), bool(denormal)


def binary32_steps_hold(A: np.ndarray, W: np.ndarray) -> bool:
    """Whether ATen's orders may run as the host's own binary32 steps (``kernels.aten.transa_fast``
    and ``notrans_fast``) on bf16 codes ``A`` (..., K) and ``W`` (either layout): no
    denormal, infinity or NaN among them (DAZ would zero a denormal operand; an infinity makes
    NaNs, whose bits are the host's), every product zero or a multiple of 2^-126, and no sum able
    to reach 2^128. A bf16 value of biased exponent e is a multiple of 2^(e - 134), so a product
    is a multiple of 2^(ea + eb - 268); and any sum of K products, each below
    2^(ea + eb - 252), rounded K times, stays below 2^(ea + eb - 252 + bit_length(K) + 1)."""
    K = A.shape[-1]
    amin, amax, adenormal = _exponents(A)
    wmin, wmax, wdenormal = _exponents(W)
    if amin > amax or wmin > wmax:  # an operand of zeros: every product is zero
        return not (adenormal or wdenormal) and amax < 255 and wmax < 255
    return (
        not (adenormal or wdenormal)
        and amax < 255
        and wmax < 255
        and amin + wmin >= 268 - 126
        and amax + wmax - 252 + K.bit_length() + 1 <= 127
    )


def _columns(N: int, per_column: int) -> list[slice]:
    """N cut so that ``per_column * width`` output floats stay under :data:`_MAX_OUT`."""
    width = max(1, min(N, _MAX_OUT // max(1, per_column)))
    return [slice(j, min(j + width, N)) for j in range(0, N, width)]


def notrans(A: np.ndarray, B: np.ndarray, threads=None) -> np.ndarray | None:
    """ATen's ``notrans`` order (4 partial sums, the ``K % 4`` tail unfused into the first) on
    bf16 codes ``A`` (nb, M, K) and ``B`` (nb, K, N): float32 bits (nb, M, N), or None."""
    nb, M, K = A.shape
    N = B.shape[2]
    main = K - K % 4
    if _holds_nan(A) or _holds_nan(B) or not _products_normal(A[..., main:], B[:, main:]):
        return None
    P = np.zeros((4, nb, M, N), np.float32)
    if main:
        a4 = A[..., :main].reshape(nb, M, main // 4, 4).transpose(3, 0, 1, 2).reshape(4 * nb, M, main // 4)
        b4 = B[:, :main].reshape(nb, main // 4, 4, N).transpose(2, 0, 1, 3).reshape(4 * nb, main // 4, N)
        P = _fma(np.ascontiguousarray(a4).view(_BF), np.ascontiguousarray(b4).view(_BF), threads).reshape(4, nb, M, N)
    if main < K:  # the tail, into partial 0: fused equals unfused here (_products_normal)
        p0 = np.ascontiguousarray(P[0])
        _fma(np.ascontiguousarray(A[..., main:]).view(_BF), np.ascontiguousarray(B[:, main:]).view(_BF), threads, p0)
        P[0] = p0
    s = vaddps(vaddps(_bits(P[0]), _bits(P[1])), _bits(P[2]))
    return vaddps(s, _bits(P[3]))


def _lanes8(v: list[np.ndarray]) -> np.ndarray:
    """The horizontal sum of 8 lanes: ``h[i] = v[i] + v[i + 4]``, then ``(h0 + h2) + (h1 + h3)``."""
    h = [vaddps(v[i], v[i + 4]) for i in range(4)]
    return vaddps(vaddps(h[0], h[2]), vaddps(h[1], h[3]))


def _transa_tree() -> np.ndarray:
    """The additions that fold ATen's 64 AVX2 accumulators (register ``t // 8``, lane ``t % 8``)
    into one sum, as :func:`float32.add_tree` takes them: registers ``r[i] += r[i + step]`` for
    step 4, 2, 1, then the 8 lanes of ``r[0]`` as :func:`_lanes8` adds them."""
    ops: list[tuple[int, int]] = []

    def add(x: int, y: int) -> int:
        ops.append((x, y))
        return 64 + len(ops) - 1

    regs = [[8 * r + lane for lane in range(8)] for r in range(8)]
    for step in (4, 2, 1):
        regs = [[add(regs[r][lane], regs[r + step][lane]) for lane in range(8)] for r in range(step)]
    v = regs[0]
    h = [add(v[i], v[i + 4]) for i in range(4)]
    left = add(h[0], h[2])
    add(left, add(h[1], h[3]))
    return np.array(ops, np.int64)


_TRANSA_TREE = _transa_tree()


def transa(A: np.ndarray, W: np.ndarray, threads=None) -> np.ndarray | None:
    """ATen's ``transa`` order (the AVX2 dot product: 8 x 8 lanes over blocks of 64, 8 lanes over
    blocks of 16, an unfused scalar tail) on bf16 codes ``A`` (nb, M, K) and ``W`` (nb, N, K):
    float32 bits (nb, M, N), or None."""
    nb, M, K = A.shape
    N = W.shape[1]
    main, mid = K - K % 64, K - K % 16
    if _holds_nan(A) or _holds_nan(W) or not _products_normal(A[..., mid:], np.swapaxes(W[..., mid:], 1, 2)):
        return None
    out = np.empty((nb, M, N), np.uint32)
    for cols in _columns(N, 64 * nb * M):
        Wc = W[:, cols]
        n = Wc.shape[1]
        if main:  # register t // 8, lane t % 8 takes k = 64 i + t
            a64 = A[..., :main].reshape(nb, M, main // 64, 64).transpose(3, 0, 1, 2).reshape(64 * nb, M, main // 64)
            w64 = Wc[..., :main].reshape(nb, n, main // 64, 64).transpose(3, 0, 2, 1).reshape(64 * nb, main // 64, n)
            R = _bits(_fma(np.ascontiguousarray(a64).view(_BF), np.ascontiguousarray(w64).view(_BF), threads))
            total = add_tree(R.reshape(64, nb, M, n), _TRANSA_TREE)
        else:
            total = np.zeros((nb, M, n), np.uint32)
        if mid > main:  # lane t takes k = main + 8 i + t
            c = (mid - main) // 8
            a8 = A[..., main:mid].reshape(nb, M, c, 8).transpose(3, 0, 1, 2).reshape(8 * nb, M, c)
            w8 = Wc[..., main:mid].reshape(nb, n, c, 8).transpose(3, 0, 2, 1).reshape(8 * nb, c, n)
            T = _bits(_fma(np.ascontiguousarray(a8).view(_BF), np.ascontiguousarray(w8).view(_BF), threads))
            total = vaddps(total, _lanes8(list(T.reshape(8, nb, M, n))))
        else:
            # No block of 16: ATen still adds its 8 lanes of +0, which leaves every sum as it is
            # but -0 (-0 + +0 = +0). The sums are quiet NaNs or numbers, so that is all it does.
            total = np.where(total == np.uint32(0x80000000), np.uint32(0), total)
        if mid < K:  # the scalar tail, unfused: the same as fused here (_products_normal)
            acc = np.ascontiguousarray(total).view(np.float32)
            wt = np.ascontiguousarray(np.swapaxes(Wc[..., mid:], 1, 2))
            _fma(np.ascontiguousarray(A[..., mid:]).view(_BF), wt.view(_BF), threads, acc)
            total = _bits(acc)
        out[..., cols] = total
    return out


def _pairs_swapped(X: np.ndarray, k0: int, k1: int, zero_lone: bool = False) -> np.ndarray:
    """``X[..., k0:k1]`` (bf16 codes) with each pair ``(k, k + 1)`` as ``(k + 1, k)``; a lone last
    ``k`` becomes ``(k, k)`` (A's side) or ``(+0, k)`` (the weights' side, ``zero_lone``)."""
    p = (k1 - k0) // 2
    lone = (k1 - k0) % 2
    out = np.empty(X.shape[:-1] + (2 * p + 2 * lone,), np.uint16)
    src = X[..., k0 : k0 + 2 * p]
    if p and src.strides[-1] == 2 and src.ctypes.data % 4 == 0:
        # each pair as one 32-bit word, its halves exchanged (a rotation by 16, whatever the
        # byte order): a third of the time of the strided copy below on rows of activations
        w = src.view(np.uint32)
        o = out[..., : 2 * p].view(np.uint32)
        np.left_shift(w, 16, out=o)
        o |= w >> 16
    else:
        out[..., : 2 * p].reshape(X.shape[:-1] + (p, 2))[...] = src.reshape(X.shape[:-1] + (p, 2))[..., ::-1]
    if lone:
        out[..., -1] = X[..., k1 - 1]
        out[..., -2] = 0 if zero_lone else X[..., k1 - 1]
    return out


class GemmWeights:
    """B of the gemm:jit order, prepared once for many calls: its bf16 codes (nb, K, N), whether
    they hold a NaN, and for each K block (``gemm_k_blocks``) its rows with each pair swapped,
    packed for the ``fp32_fma`` chains. :func:`gemm` with ``weights`` does only A's half of the
    work per call; ``tilegemm.onednn.pack_weights(b, "gemm")`` makes one."""

    def __init__(self, codes: np.ndarray) -> None:
        from ..packing import pack_codes

        self.codes = np.array(codes, np.uint16)  # (..., K, N), a copy: never a view of the caller's memory
        self.shape = codes.shape
        B = codes.reshape((-1,) + codes.shape[-2:])
        self.nan = _holds_nan(B)
        self.blocks = [] if self.nan else [pack_codes(b, "fp32_fma", "bf16") for b in _swapped_blocks(B)]


def _swapped_blocks(B: np.ndarray):
    """B's K blocks (nb, k, N), each pair of rows swapped as the gemm:jit kernel reads them, a lone
    last row after a row of +0 (bf16 codes, C-contiguous)."""
    W = np.swapaxes(B, 1, 2)  # where B is a transposed view, its rows are contiguous along K
    for k0, k1 in gemm_k_blocks(B.shape[1]):
        if W.flags.c_contiguous:
            b = np.swapaxes(_pairs_swapped(W, k0, k1, zero_lone=True), 1, 2)
        else:  # row-major B: swap its rows (the same permutation along B's K axis)
            b = np.moveaxis(_pairs_swapped(np.moveaxis(B, 1, -1), k0, k1, zero_lone=True), -1, 1)
        yield np.ascontiguousarray(b)


def gemm(A: np.ndarray, B: np.ndarray, threads=None, weights: GemmWeights | None = None) -> np.ndarray | None:
    """oneDNN gemm:jit's gemm kernel on every row (K blocks, each block's pairs odd element
    first, a lone last element after a +0 weight; ``C = block + C``) on bf16 codes ``A``
    (nb, M, K) and ``B`` (nb, K, N) (or B's ``weights``, prepared before): float32 bits
    (nb, M, N), or None."""
    if _holds_nan(A) or (weights.nan if weights is not None else _holds_nan(B)):
        return None
    bs = iter(weights.blocks) if weights is not None else _swapped_blocks(B)
    C = None
    for (k0, k1), b in zip(gemm_k_blocks(A.shape[2]), bs):
        a = _pairs_swapped(A, k0, k1)
        r = _bits(_fma(a.view(_BF), b if weights is not None else b.view(_BF), threads))
        C = r if C is None else vaddps(r, C)
    return C

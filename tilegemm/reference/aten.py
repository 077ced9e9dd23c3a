"""PyTorch's own bf16 CPU gemm (an AVX2 server), written out: the order of every float32 sum.

Where oneDNN declines bf16 (a CPU without AVX-512: EPYC Rome and Milan, Haswell and Broadwell
Xeons), PyTorch runs its own kernels (``aten/src/ATen/native/cpu/BlasKernel.cpp`` and
``ReducedPrecisionFloatGemvFastPathKernel.cpp``). Each output is one float32 dot product of
bf16 values; which kernel computes it, and so the order of its additions, depends on how the
operands are laid out (``docs/onednn.md``, "The avx2 host"):

- ``"notrans"`` (``a @ b`` with ``b`` row-major: ``matmul``, ``mm``, ``addmm``, ``bmm``):
  ``sum`` with four partial sums; product ``l`` goes to partial ``l % 4`` up to the last whole
  group of four (fused multiply-adds), the remaining ``K % 4`` to partial 0 (each product
  rounded, then added); then ``((p0 + p1) + p2) + p3``.
- ``"transa"`` (``b`` stored transposed, both operands contiguous along K: ``F.linear``,
  ``x @ w.T``, ``q @ k.transpose(-1, -2)``): the AVX2 dot product. Blocks of 64 go to 8
  registers of 8 lanes (product ``l`` to register ``(l % 64) // 8``, lane ``l % 8``); the
  registers are added as a tree (``r[i] += r[i + 4]``, ``r[i] += r[i + 2]``, ``r0 += r1``) and
  the lanes of ``r0`` likewise (``h[i] = v[i] + v[i + 4]``, then ``(h0 + h2) + (h1 + h3)``);
  blocks of 16 after the last 64 go to one 8-lane register (product ``j`` to lane ``j % 8``),
  reduced the same way and added (also when no block of 16 ran); these are fused
  multiply-adds. The last ``K % 16`` products are rounded and added one by one.
- ``"sequential"`` (a batched product whose ``K * M * N`` is below 400: PyTorch's small
  ``bmm`` kernel): one sum, each product rounded and then added.

Every operation is binary32 with round-to-nearest-even and gradual underflow (no DAZ, no FTZ).
A product of two bf16 values is exact in binary32 unless it overflows or underflows, so fused
and unfused steps differ only there (a product past FLT_MAX is an infinity when rounded on its
own; a tiny one a zero of its sign): which steps are fused was found on the recording machine's
PyTorch with products that overflow and underflow. A fused step is computed here as a float64
sum rounded once to float32, which is the correctly rounded result: a product of two bf16 values
has at most 16 significant bits and the partial sum 24, and rounding their exact binary64 sum
(53 >= 2 * 24 + 1 bits) to binary32 never differs from rounding the exact sum (double rounding
is innocuous at that precision). Then ``alpha * dot`` (alpha is 1), the input ``c`` (bias or
``addmm``'s input) as ``fma(beta, c, dot)``, and the rounding to bf16 of ``c10::BFloat16``: to
nearest even with denormals kept, every NaN becoming 0x7FC0.

Slow on purpose: :mod:`tilegemm.onednn` must return the same bits.
"""

from __future__ import annotations

import numpy as np

from ..formats import BF16, bf16_dtype
from ..kernels import onednn as _epilogue
from ..onednn.schedule import aten_kernel

__all__ = ["KERNELS", "dot", "matmul", "compute", "round_bf16"]

#: The kernels, by the name :func:`tilegemm.onednn.schedule.aten_kernel` gives.
KERNELS = ("notrans", "transa", "sequential")


def _fma(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``round32(a * b + acc)`` elementwise (the module docstring: one rounding)."""
    return (acc.astype(np.float64) + a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)


def _add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)


def _mul_add(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``round32(round32(a * b) + acc)``: the product rounded on its own (it differs from the
    fused step only where ``a * b`` overflows or underflows binary32)."""
    return _add(acc, (a.astype(np.float64) * b.astype(np.float64)).astype(np.float32))


def _lanes(v: list[np.ndarray]) -> np.ndarray:
    """An 8-lane register's horizontal sum: ``h[i] = v[i] + v[i + 4]``, ``(h0 + h2) + (h1 + h3)``."""
    h = [_add(v[i], v[i + 4]) for i in range(4)]
    return _add(_add(h[0], h[2]), _add(h[1], h[3]))


def dot(a: np.ndarray, b: np.ndarray, kernel: str) -> np.ndarray:
    """float32 dot products of the rows of ``a`` (..., K) and ``b`` (..., K) (values exact in
    float32, broadcast against each other), summed in ``kernel``'s order."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    K = a.shape[-1]
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    zero = np.zeros(shape, np.float32)
    if kernel == "sequential":
        acc = zero
        for l in range(K):
            acc = _mul_add(acc, a[..., l], b[..., l])
        return acc
    if kernel == "notrans":
        p = [zero] * 4
        main = K - K % 4
        for l in range(main):
            p[l % 4] = _fma(p[l % 4], a[..., l], b[..., l])
        for l in range(main, K):
            p[0] = _mul_add(p[0], a[..., l], b[..., l])
        return _add(_add(_add(p[0], p[1]), p[2]), p[3])
    if kernel != "transa":
        raise ValueError(f"unknown kernel {kernel!r}; the kernels are {', '.join(KERNELS)}")
    regs = [[zero] * 8 for _ in range(8)]  # regs[r][lane]
    main = K - K % 64
    for l in range(main):
        r, lane = (l % 64) // 8, l % 8
        regs[r][lane] = _fma(regs[r][lane], a[..., l], b[..., l])
    for step in (4, 2, 1):  # the register tree: r[i] += r[i + step]
        for i in range(step):
            regs[i] = [_add(x, y) for x, y in zip(regs[i], regs[i + step])]
    total = _lanes(regs[0])
    mid = K - K % 16
    tail = [zero] * 8
    for l in range(main, mid):
        tail[(l - main) % 8] = _fma(tail[(l - main) % 8], a[..., l], b[..., l])
    total = _add(total, _lanes(tail))  # even when no block of 16 ran: -0 + +0 is +0
    for l in range(mid, K):
        total = _mul_add(total, a[..., l], b[..., l])
    return total


def vaddps(x, y) -> np.ndarray:
    """IEEE binary32 ``x + y`` (shared with :mod:`tilegemm.reference.onednn`)."""
    x, y = (np.asarray(v, np.float32) for v in (x, y))
    return _epilogue.vaddps(x.view(np.uint32), y.view(np.uint32)).view(np.float32)


def vfmadd(x, y, z) -> np.ndarray:
    """IEEE binary32 ``x * y + z``, one rounding (shared with :mod:`tilegemm.reference.onednn`)."""
    x, y, z = (np.asarray(v, np.float32) for v in (x, y, z))
    return _epilogue.vfmadd(x.view(np.uint32), y.view(np.uint32), z.view(np.uint32)).view(np.float32)


def round_bf16(x) -> np.ndarray:
    """float32 -> bf16 bits (uint16) as ``c10::BFloat16``'s ``round_to_nearest_even``: every NaN
    is 0x7FC0; otherwise round to nearest even on the bit pattern, denormals kept."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (bits & 0x7F800000) == 0x7F800000
    nan &= (bits & 0x7FFFFF) != 0
    return np.where(nan, np.uint16(0x7FC0), out)


def matmul(a, b, *, c=None, beta: float = 1.0, b_transposed: bool = False) -> np.ndarray:
    """The bf16 result of ``c * beta + a @ b`` as PyTorch's own CPU gemm computes it.

    ``a`` is (M, K) or (batch, M, K), ``b`` (K, N) or (batch, K, N), both rounded once to bf16
    (a 2-D ``b`` with a 3-D ``a``: one problem of ``batch * M`` rows, as ``torch.matmul`` folds
    it). ``b_transposed``: ``b`` is stored transposed (the weight of ``F.linear``). ``c`` is
    rounded to bf16 and broadcast to the result. Returns ml_dtypes.bfloat16."""
    A = BF16.to_codes(np.asarray(a), "a", "bf16")
    B = BF16.to_codes(np.asarray(b), "b", "bf16")
    if A.ndim not in (2, 3) or B.ndim not in (2, 3) or A.shape[-1] != B.shape[-2]:
        raise ValueError(f"reference aten matmul takes (batch,) M x K and (batch,) K x N, got {A.shape} and {B.shape}")
    if B.ndim == 2:
        M, batch = int(np.prod(A.shape[:-1])), 1
    else:
        M, batch = A.shape[-2], B.shape[0]
    kernel = aten_kernel(M, B.shape[-2], B.shape[-1], batch, b_transposed)
    return compute(A.view(bf16_dtype()), B.view(bf16_dtype()), kernel, c=c if beta != 0 else None, beta=beta)


def compute(a, b, kernel: str, *, c=None, beta: float = 1.0) -> np.ndarray:
    """The bf16 result of ``c * beta + a @ b`` summed in ``kernel``'s order (``a`` (..., M, K)
    and ``b`` (..., K, N) broadcast against each other, values rounded once to bf16)."""
    A = BF16.decode(BF16.to_codes(np.asarray(a), "a", "bf16"))
    B = BF16.decode(BF16.to_codes(np.asarray(b), "b", "bf16"))
    out = dot(A[..., :, None, :], np.swapaxes(B, -1, -2)[..., None, :, :], kernel)
    if c is not None:
        dst = np.broadcast_to(BF16.decode(BF16.to_codes(np.asarray(c), "c", "bf16")), out.shape)
        out = vaddps(out, dst) if beta == 1 else vfmadd(dst, np.float32(beta), out)
    return round_bf16(out).view(bf16_dtype())

"""PyTorch's bf16 matmul on a oneDNN brgemm server, written out: chains, float32 sums, rounding.

The readable specification of the ``"onednn"`` profile (``docs/onednn.md``), slow on purpose:
for every output matrix, every brgemm call of the plan (:func:`tilegemm.onednn.plan`) is run as
its chain from zero: TDPBF16PS tile multiplies on an AMX host
(:func:`tilegemm.reference.amx.tdp_float_gemm`), VDPBF16PS on an ``avx512_core_bf16`` one
(:func:`tilegemm.reference.avx512.vdpbf16ps_gemm`),
then the float32 additions follow one by one in oneDNN's order, and the result is rounded to
bf16. On an ``avx512_core`` host oneDNN runs its gemm:jit instead (:mod:`tilegemm.reference.gemm_jit`);
on an ``avx2`` host no oneDNN runs: :mod:`tilegemm.reference.aten` writes out PyTorch's own
kernels. :mod:`tilegemm.onednn` must return the same bits.

The three float32 operations outside the tiles (``vaddps``, ``vfmadd231ps``, ``vcvtneps2bf16``)
share their implementation with the fast path (``tilegemm.kernels.onednn``), as ``binary32``
shares the tiles' with the kernels; ``tests/test_onednn.py`` checks them against exact rational
arithmetic.
"""

from __future__ import annotations

import numpy as np

from .. import instructions
from ..formats import BF16, bf16_dtype
from ..kernels import onednn as _epilogue
from ..onednn.schedule import Host, Plan, plan
from . import aten, gemm_jit
from .amx import tdp_float_gemm
from .avx512 import vdpbf16ps_gemm

__all__ = ["matmul", "compute", "vaddps", "vfmadd", "vcvtneps2bf16", "profile_matmul"]

# The chain inside every brgemm call, by the host's ISA: AMX tiles, or VDPBF16PS (no AMX).
_CHAINS = {
    "TDPBF16PS": (instructions.INSTRUCTIONS["TDPBF16PS"], tdp_float_gemm),
    "VDPBF16PS": (instructions.INSTRUCTIONS["VDPBF16PS"], vdpbf16ps_gemm),
}


def vaddps(x, y) -> np.ndarray:
    """IEEE binary32 ``x + y``: round to nearest even, denormals kept (no DAZ, no FTZ)."""
    x = np.asarray(x, np.float32)
    y = np.asarray(y, np.float32)
    return _epilogue.vaddps(x.view(np.uint32), y.view(np.uint32)).view(np.float32)


def vfmadd(x, y, z) -> np.ndarray:
    """IEEE binary32 ``x * y + z`` with one rounding, denormals kept."""
    x, y, z = (np.asarray(v, np.float32) for v in (x, y, z))
    return _epilogue.vfmadd(x.view(np.uint32), y.view(np.uint32), z.view(np.uint32)).view(np.float32)


def vcvtneps2bf16(x) -> np.ndarray:
    """binary32 -> bf16 as VCVTNEPS2BF16 (RNE, denormal inputs read as zero), as bfloat16."""
    x = np.asarray(x, np.float32)
    return _epilogue.vcvtneps2bf16(x.view(np.uint32)).view(bf16_dtype())


def matmul(
    a,
    b,
    *,
    c=None,
    beta: float = 1.0,
    onednn_threads: int | None = None,
    b_transposed: bool = False,
    host: Host | str | None = None,
) -> np.ndarray:
    """The bf16 result of ``c * beta + a @ b`` as oneDNN's brgemm matmul computes it on ``host``.

    ``a`` is (M, K) or (batch, M, K), ``b`` (K, N) or (batch, K, N) (a 2-D b with a 3-D a: one
    problem of ``batch * M`` rows, as ``torch.matmul`` folds it); both rounded once to bf16.
    ``c`` (broadcast to the result) is rounded to bf16 first, as PyTorch copies it into the bf16
    result that the sum post-op reads back. The other parameters are those of
    :func:`tilegemm.onednn.matmul`.
    """
    A = BF16.to_codes(np.asarray(a), "a", "bf16")
    B = BF16.to_codes(np.asarray(b), "b", "bf16")
    if A.ndim not in (2, 3) or B.ndim not in (2, 3) or A.shape[-1] != B.shape[-2]:
        raise ValueError(
            f"reference onednn matmul takes (batch,) M x K and (batch,) K x N, got {A.shape} and {B.shape}"
        )
    if B.ndim == 2:  # fold the batch into the rows, as torch.matmul does for N-D @ 2-D
        M, batch = int(np.prod(A.shape[:-1])), 1
    else:
        M, batch = A.shape[-2], B.shape[0]
    use_c = c is not None and beta != 0
    p = plan(
        M,
        A.shape[-1],
        B.shape[-1],
        batch=batch,
        onednn_threads=onednn_threads,
        b_transposed=b_transposed,
        post_sum=use_c,
        host=host,
    )
    return compute(A.view(bf16_dtype()), B.view(bf16_dtype()), p, c=c if use_c else None, beta=beta)


def compute(a, b, p: Plan, *, c=None, beta: float = 1.0) -> np.ndarray:
    """The bf16 result of plan ``p`` on ``a`` (M, K) or (batch, M, K) and ``b`` (K, N) or
    (batch, K, N), with ``c`` (broadcast to the result) as the sum post-op's input."""
    A = BF16.to_codes(np.asarray(a), "a", "bf16")
    B = BF16.to_codes(np.asarray(b), "b", "bf16")
    if p.kernel not in ("brgemm", "gemm"):  # no oneDNN: PyTorch's own kernel, by the plan
        return aten.compute(A.view(bf16_dtype()), B.view(bf16_dtype()), p.kernel, c=c, beta=beta)
    if B.ndim == 2:
        A3, B3 = A.reshape(1, -1, A.shape[-1]), B[None]
        result_shape = A.shape[:-1] + (B.shape[-1],)
    else:
        A3 = np.broadcast_to(A, (B.shape[0],) + A.shape[-2:])
        B3 = B
        result_shape = (B.shape[0],) + A.shape[-2:-1] + (B.shape[-1],)
    if p.kernel == "gemm":  # oneDNN's gemm:jit (an AVX-512 host without AVX512_BF16)
        cv = None if c is None else BF16.decode(BF16.to_codes(np.asarray(c), "c", "bf16"))
        bits = gemm_jit.compute(BF16.decode(A3), BF16.decode(B3), p, c=cv, beta=beta)
        return bits.reshape(result_shape).view(bf16_dtype())
    instr, chain = _CHAINS[p.host.chain]
    batch, M, K = A3.shape
    N = B3.shape[2]
    out = np.empty((batch, M, N), np.float32)
    for i in range(batch):
        parts = []
        for group in p.groups:  # one C buffer per thread along K
            buf = None
            for call in group:
                r = np.zeros((M, N), np.float32)  # every call starts from +0 (tilezero, vpxord)
                for k0, k1 in call:
                    if p.host.chain == "VDPBF16PS":  # the weights are VDPBF16PS's first source
                        r = chain(instr, B3[i][k0:k1].T, A3[i][:, k0:k1].T, r.T).T
                    else:
                        r = chain(instr, A3[i][:, k0:k1], B3[i][k0:k1], r)
                buf = r if buf is None else vaddps(r, buf)  # C = call + C
            parts.append(buf)
        acc = parts[0]
        for q in parts[1:]:
            acc = vaddps(acc, q)  # the parallel-K reduction, buffer by buffer
        if p.reduce:
            acc = vaddps(np.float32(0), acc)  # the post-op pass after the reduction
        out[i] = acc
    out = out.reshape(result_shape)  # type: ignore[assignment]
    if c is not None:
        dst = BF16.decode(BF16.to_codes(np.asarray(c), "c", "bf16"))  # the bf16 value read back
        dst = np.broadcast_to(dst, result_shape)
        out = vaddps(out, dst) if beta == 1 else vfmadd(dst, np.float32(beta), out)
    return vcvtneps2bf16(out)


def profile_matmul(a, b, dtype="bf16", *, c=None, **options) -> np.ndarray:
    """``tilegemm.reference.matmul(a, b, isa="onednn", c=...)``: :func:`matmul` with ``c`` as
    ``addmm``'s input."""
    return matmul(a, b, c=c, **options)

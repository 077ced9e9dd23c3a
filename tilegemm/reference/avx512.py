"""VDPBF16PS (AVX512_BF16), lane by lane, and a GEMM made of it: the AVX-512 BF16 baseline.

Per lane: ``dst = fma32(a_odd, b_odd, dst)``, then ``fma32(a_even, b_even, dst)``, DAZ/FTZ
(``docs/vdpbf16ps.md``). A GEMM keeps one accumulator per C element and walks K in pairs; an odd
K's last pair is completed with +0, and being odd that zero product is applied first.
"""

from __future__ import annotations

import numpy as np

from .amx import pad_k
from .binary32 import daz, fma32

__all__ = ["vdpbf16ps", "vdpbf16ps_gemm"]


def vdpbf16ps(dst: np.ndarray, a: np.ndarray, b: np.ndarray, trace=None, k: int = 0) -> np.ndarray:
    """VDPBF16PS lane-wise; ``a`` and ``b`` broadcast, their last axis the BF16 pair (even, odd).
    ``trace`` records element [0, 0]'s two operations (the pair at K index ``k``)."""
    for j in (1, 0):  # the odd (high) element first
        new = fma32(a[..., j], b[..., j], dst)
        if trace is not None:
            given = (a[..., j], b[..., j], dst)
            trace.float_op("VDPBF16PS", (k + j,), "C", given, tuple(daz(x) for x in given), new, "fma32 daz ftz")
        dst = new
    return dst


def vdpbf16ps_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, trace=None) -> np.ndarray:
    """``C + A @ B`` through VDPBF16PS, one accumulator per element, K in pairs."""
    K = A.shape[1]
    kg = K + K % 2
    a = pad_k(instr.a.decode(A), 1, kg)
    b = pad_k(instr.b.decode(B), 0, kg)
    if trace is not None:
        trace.start(C, "f32")
    for k in range(0, kg, 2):
        C = vdpbf16ps(C, a[:, k : k + 2][:, None, :], b[k : k + 2].T[None, :, :], trace, k)
        if trace is not None:
            trace.state(min(k + 2, K), C)
    return C

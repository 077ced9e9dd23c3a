"""TCMMRLFP16PS and TCMMIMFP16PS (AMX-COMPLEX), one instruction at a time, and the GEMM cut into them.

Slow on purpose: the Intel SDM's loop ("TCMMIMFP16PS/TCMMRLFP16PS: Matrix Multiplication of
Complex Tiles Accumulated into Packed Single Precision Tile") written out one binary32 operation
at a time, NaN results included (``docs/amx-complex.md``).

Each dword holds one complex number, the real FP16 in bits 15:0 and the imaginary FP16 in bits
31:16. A is plain row-major (``a.row[m].dword[k] = A[m][k0+k]``) and so is B
(``b.row[k].dword[n] = B[k0+k][n]``): there is no VNNI interleave, the 16-bit pair being the two
parts of one element. Per output, two binary32 lanes start at +0 and take one FMA each per k; they
are summed once and added to dst once (the TDPFP16PS structure).

The GEMM runs K in steps of 16 complex elements, the last step covering what remains (no
padding). The real part of C goes through TCMMRLFP16PS and the imaginary part through
TCMMIMFP16PS, two independent FP32 results.
"""

from __future__ import annotations

import numpy as np

from ..convert import fp16_to_f32
from ..formats import daz
from ..instructions import INSTRUCTIONS
from .amx import _steps
from .binary32 import _QUIET, add32_x86, fma32_x86

__all__ = ["cvt16", "tcmm", "tcmm_gemm", "cfp16_gemm", "REAL", "IMAG"]

REAL, IMAG = 0, 1  # TCMMRLFP16PS, TCMMIMFP16PS


def cvt16(h) -> np.ndarray:
    """FP16 bits -> binary32, exact. Denormals are kept (they are binary32 normals); a NaN keeps
    its sign, its payload moves up 13 bits and its quiet bit is set."""
    h = np.asarray(h, np.uint16)
    bits = fp16_to_f32(h)
    nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0)
    return np.where(nan, bits | _QUIET, bits).astype(np.uint32).view(np.float32)


def tcmm(
    dst: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    part: int,
    *,
    tcmm_rl_negate: str = "sdm_input_sign_flip",
    tcmm_im_lane_order: str = "sdm",
) -> np.ndarray:
    """One TCMMRLFP16PS (``part`` 0) or TCMMIMFP16PS (``part`` 1): the new dst (M x N float32).

    ``a``: M x K4 dwords, ``b``: K4 x N dwords (uint32, imaginary FP16 in the high half). The
    switches are the readings of ``tilegemm.instructions``; they change NaN results only.
    """
    a = np.asarray(a, np.uint32)
    b = np.asarray(b, np.uint32)
    m, n = dst.shape
    t0 = np.zeros((m, n), np.float32)  # the two binary32 lanes of every output, from +0
    t1 = np.zeros((m, n), np.float32)
    for k in range(a.shape[1]):
        are = cvt16(a[:, k] & 0xFFFF)[:, None]
        aim = cvt16(a[:, k] >> 16)[:, None]
        bre = cvt16(b[k] & 0xFFFF)[None, :]
        bim = cvt16(b[k] >> 16)[None, :]
        if part == REAL:
            t0 = fma32_x86(are, bre, t0)
            if tcmm_rl_negate == "sdm_input_sign_flip":  # XOR 0x8000 on the FP16 input
                t1 = fma32_x86(cvt16((a[:, k] >> 16) ^ 0x8000)[:, None], bim, t1)
            else:  # the product negated: a NaN keeps its sign
                t1 = fma32_x86(aim, bim, t1, negate_product=True)
        elif tcmm_im_lane_order == "sdm":
            t0 = fma32_x86(aim, bre, t0)
            t1 = fma32_x86(are, bim, t1)
        else:
            t0 = fma32_x86(are, bim, t0)
            t1 = fma32_x86(aim, bre, t1)
    # The lanes come out of FTZ'd operations, so only dst can be denormal (read as zero).
    return add32_x86(daz(dst), add32_x86(t0, t1))


def tcmm_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, **switches) -> np.ndarray:
    """``C + A @ B``'s real (TCMMRLFP16PS) or imaginary (TCMMIMFP16PS) part, as ``instr.part``
    says, through tile multiplies of 16 complex elements along K. ``A``, ``B``: dword codes."""
    _, steps = _steps(instr, A.shape[1])
    for k0, k1 in steps:
        C = tcmm(C, A[:, k0:k1], B[k0:k1], instr.part, **switches)
    return C


def cfp16_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, **switches) -> np.ndarray:
    """``C + A @ B`` as complex64: the real part through TCMMRLFP16PS, the imaginary part through
    TCMMIMFP16PS (``instr.parts``), each an FP32 result of its own."""
    C = np.asarray(C, np.complex64)
    out = np.empty(C.shape, np.complex64)
    planes = out.view(np.float32).reshape(C.shape + (2,))  # (re, im) interleaved, bit for bit
    start = C.view(np.float32).reshape(C.shape + (2,))
    for lane, mnemonic in enumerate(instr.parts):
        planes[..., lane] = tcmm_gemm(INSTRUCTIONS[mnemonic], A, B, start[..., lane].copy(), **switches)
    return out

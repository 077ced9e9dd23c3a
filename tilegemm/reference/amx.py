"""TDPBF16PS, TDPFP16PS and TDPB[SU][SU]D, one instruction at a time, and the GEMM cut into them.

Slow on purpose: every binary32 operation of the Intel SDM's pseudocode is spelled out, and the
GEMM is cut into tile multiplies exactly as ``docs/semantics.md`` ("From a GEMM to
instructions") says: K steps of one full tile in increasing order, the last step covering the
remaining K rounded up to whole pairs or quads, the padding pair executed.
"""

from __future__ import annotations

import numpy as np

from .binary32 import add32_read, daz, fma32_read

__all__ = ["tdp_float", "tdp_int", "tdp_float_gemm", "tdp_int_gemm", "wrap32", "pad_k"]


def tdp_float(dst: np.ndarray, a: np.ndarray, b: np.ndarray, *, daz_inputs: bool = True) -> np.ndarray:
    """TDPBF16PS / TDPFP16PS: ``dst (M x N) += a (M x 2*K4) @ b`` with b in VNNI form (K4 x N x 2).

    ``a`` and ``b`` hold the BF16/FP16 inputs as exact binary32 values. With ``daz_inputs`` a
    denormal input reads as zero (BF16); FP16 inputs are normal numbers in binary32 and kept.
    Returns the new dst.
    """
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if daz_inputs:
        a, b = daz(a), daz(b)
    m, n = dst.shape
    e = np.zeros((m, n), np.float32)  # fresh +0 partial sums for even ...
    o = np.zeros((m, n), np.float32)  # ... and odd elements of each pair
    with np.errstate(all="ignore"):  # NaN, inf and overflow are results here, not accidents
        for k in range(b.shape[0]):
            # e and o come out of FTZ'd operations, so they are never denormal: no DAZ needed.
            e = fma32_read(a[:, 2 * k, None], b[None, k, :, 0], e)
            o = fma32_read(a[:, 2 * k + 1, None], b[None, k, :, 1], o)
        return np.asarray(add32_read(daz(dst), add32_read(e, o)), np.float32)


def tdp_int(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TDPB[SU][SU]D: ``dst (M x N, int32) += a (M x 4*K4) @ b`` with b in VNNI form (K4 x N x 4).

    ``a`` and ``b`` are int8 or uint8 arrays; their dtype is the signedness the instruction
    names. The sum wraps modulo 2^32.
    """
    acc = dst.astype(np.int64)
    for k in range(b.shape[0]):
        for j in range(4):
            acc += a[:, 4 * k + j, None].astype(np.int64) * b[None, k, :, j].astype(np.int64)
    return wrap32(acc)


def wrap32(x: np.ndarray) -> np.ndarray:
    """Integers modulo 2^32, as int32."""
    return (((np.asarray(x, np.int64) + 2**31) % 2**32) - 2**31).astype(np.int32)


def pad_k(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    """``x`` with zeros appended along ``axis`` up to ``size``."""
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, size - x.shape[axis])
    return np.pad(x, widths)


def _steps(instr, K: int):
    """(k0, k1) of each instruction along K, the last one up to whole groups (the tail rule)."""
    kg = -(-K // instr.group) * instr.group
    return kg, [(k0, min(k0 + instr.k_step, kg)) for k0 in range(0, kg, instr.k_step)]


def _vnni(b: np.ndarray, group: int) -> np.ndarray:
    """B rows (k, N) as the instruction's B tile: ``b.row[r].elem[group*n + j] = B[group*r + j][n]``."""
    k, n = b.shape
    return b.reshape(k // group, group, n).transpose(0, 2, 1)


def tdp_float_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``C + A @ B`` through TDPBF16PS / TDPFP16PS tile multiplies. ``A``, ``B``: codes."""
    kg, steps = _steps(instr, A.shape[1])
    a = pad_k(instr.a.decode(A), 1, kg)
    b = pad_k(instr.b.decode(B), 0, kg)
    for k0, k1 in steps:
        C = tdp_float(C, a[:, k0:k1], _vnni(b[k0:k1], instr.group), daz_inputs=instr.daz_inputs)
    return C


def tdp_int_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``C + A @ B`` through TDPB*D tile multiplies, modulo 2^32."""
    kg, steps = _steps(instr, A.shape[1])
    a = pad_k(A, 1, kg)
    b = pad_k(B, 0, kg)
    for k0, k1 in steps:
        C = tdp_int(C, a[:, k0:k1], _vnni(b[k0:k1], instr.group))
    return C

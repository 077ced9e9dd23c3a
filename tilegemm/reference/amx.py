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


def tdp_float(
    dst: np.ndarray, a: np.ndarray, b: np.ndarray, *, daz_inputs: bool = True, trace=None, k0: int = 0
) -> np.ndarray:
    """TDPBF16PS / TDPFP16PS: ``dst (M x N) += a (M x 2*K4) @ b`` with b in VNNI form (K4 x N x 2).

    ``a`` and ``b`` hold the BF16/FP16 inputs as exact binary32 values. With ``daz_inputs`` a
    denormal input reads as zero (BF16); FP16 inputs are normal numbers in binary32 and kept.
    Returns the new dst. ``trace`` records output [0, 0]'s operations (K indices from ``k0``).
    """
    given_a = a = np.asarray(a, np.float32)
    given_b = b = np.asarray(b, np.float32)
    if daz_inputs:
        a, b = daz(a), daz(b)
    m, n = dst.shape
    e = np.zeros((m, n), np.float32)  # fresh +0 partial sums for even ...
    o = np.zeros((m, n), np.float32)  # ... and odd elements of each pair
    with np.errstate(all="ignore"):  # NaN, inf and overflow are results here, not accidents
        for k in range(b.shape[0]):
            # e and o come out of FTZ'd operations, so they are never denormal: no DAZ needed.
            e_new = fma32_read(a[:, 2 * k, None], b[None, k, :, 0], e)
            o_new = fma32_read(a[:, 2 * k + 1, None], b[None, k, :, 1], o)
            if trace is not None:
                for j, chain, old, new in ((0, "even", e, e_new), (1, "odd", o, o_new)):
                    given = (given_a[:, 2 * k + j, None], given_b[None, k, :, j], old)
                    read = (a[:, 2 * k + j, None], b[None, k, :, j], old)
                    trace.float_op("fma32", (k0 + 2 * k + j,), chain, given, read, new, "fma32 daz ftz")
            e, o = e_new, o_new
        pair = add32_read(e, o)
        out = np.asarray(add32_read(daz(dst), pair), np.float32)
        if trace is not None:
            trace.float_op("add32 even + odd", (), "pair", (e, o), (e, o), pair, "add32 daz ftz")
            trace.float_op("add32 into C", (), "C", (dst, pair), (daz(dst), pair), out, "add32 daz ftz")
        return out


def tdp_int(dst: np.ndarray, a: np.ndarray, b: np.ndarray, *, trace=None, k0: int = 0, mnemonic="TDPB*D") -> np.ndarray:
    """TDPB[SU][SU]D: ``dst (M x N, int32) += a (M x 4*K4) @ b`` with b in VNNI form (K4 x N x 4).

    ``a`` and ``b`` are int8 or uint8 arrays; their dtype is the signedness the instruction
    names. The sum wraps modulo 2^32. ``trace`` records output [0, 0]'s instruction.
    """
    acc = dst.astype(np.int64)
    for k in range(b.shape[0]):
        for j in range(4):
            acc += a[:, 4 * k + j, None].astype(np.int64) * b[None, k, :, j].astype(np.int64)
    out = wrap32(acc)
    if trace is not None:
        quads = range(b.shape[0])
        xs = [a[:, 4 * k + j, None] for k in quads for j in range(4)]
        ys = [b[None, k, :, j] for k in quads for j in range(4)]
        trace.int_op(mnemonic, range(k0, k0 + 4 * b.shape[0]), "C", xs, ys, dst, out, "wrap32")
    return out


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


def tdp_float_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, trace=None) -> np.ndarray:
    """``C + A @ B`` through TDPBF16PS / TDPFP16PS tile multiplies. ``A``, ``B``: codes."""
    K = A.shape[1]
    kg, steps = _steps(instr, K)
    a = pad_k(instr.a.decode(A), 1, kg)
    b = pad_k(instr.b.decode(B), 0, kg)
    if trace is not None:
        trace.start(C, "f32")
    for k0, k1 in steps:
        vnni = _vnni(b[k0:k1], instr.group)
        C = tdp_float(C, a[:, k0:k1], vnni, daz_inputs=instr.daz_inputs, trace=trace, k0=k0)
        if trace is not None:
            trace.state(min(k1, K), C)
    return C


def tdp_int_gemm(instr, A: np.ndarray, B: np.ndarray, C: np.ndarray, trace=None) -> np.ndarray:
    """``C + A @ B`` through TDPB*D tile multiplies, modulo 2^32."""
    K = A.shape[1]
    kg, steps = _steps(instr, K)
    a = pad_k(A, 1, kg)
    b = pad_k(B, 0, kg)
    if trace is not None:
        trace.start(C, "i32")
    for k0, k1 in steps:
        C = tdp_int(C, a[:, k0:k1], _vnni(b[k0:k1], instr.group), trace=trace, k0=k0, mnemonic=instr.mnemonic)
        if trace is not None:
            trace.state(min(k1, K), C)
    return C

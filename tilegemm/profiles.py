"""The steps of the other CPUs' paths that are not tile multiplies, run on the packed operands.

The kernel families of ``kernels/isa.py`` name these as their ``prepare`` step
(:attr:`tilegemm.dispatch.Family.prepare`); :func:`tilegemm.matmul` runs it just before the
kernel, after every check has passed.

- :func:`compensate`: signed activations on a u8 x s8 instruction (the ``.S8`` records). oneDNN
  computes s8 x s8 without AMX as ``(A + 128) @ B - 128 * column sums of B``: the kernels shift A
  (``a XOR 0x80``), and the accumulator starts at ``wrap32(C + comp[n])`` with
  ``comp[n] = wrap32(-128 * sum_k B[k][n])`` (``simple_gemm_s8s8s32.cpp``). The start matters
  where the sums saturate: VPDPBUSDS clips the running sum that already holds the compensation.
- :func:`pad_identity`: the float paths run whole K steps; A beyond K becomes -0 (a value, or the
  binary16 code 0x8000), whose product with B's zero padding is -0, the exact identity of IEEE
  addition (``fma(-0, +0, acc) == acc`` for every acc, -0 and NaN included), so the padding
  changes no bit.

This module must not compute results; it only sets up what the kernels continue from.
"""

from __future__ import annotations

import numpy as np

from .instructions import Instruction

__all__ = ["compensate", "pad_identity"]


def compensate(instr: Instruction, A: np.ndarray, B: np.ndarray, C: np.ndarray, ib: np.ndarray, k: int) -> None:
    """``C[i] = wrap32(C[i] + comp(B[ib[i]]))`` when A holds signed activations; else nothing.

    ``B``: the kernels' bytes ``(nB, NB, KB, 16, 16, 4)`` (K quads, then 16 columns, then the
    quad's four bytes), zero beyond K and N."""
    if instr.a.storage.kind != "i":
        return
    nB, NB = B.shape[:2]
    # Sum the 64-byte rows of each column panel first (a contiguous reduction), then each
    # column's four bytes: |sum| <= 128 * K fits int64 for any K.
    rows = B.reshape(nB, NB, -1, 64).sum(axis=2, dtype=np.int64)
    sums = rows.reshape(nB, NB, 16, 4).sum(axis=-1).reshape(nB, NB * 16)[:, : C.shape[-1]]  # per column
    comp = ((-128 * sums + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.add(C, comp[ib][:, None, :], out=C)  # int32 array addition wraps modulo 2^32


def pad_identity(instr: Instruction, A: np.ndarray, B: np.ndarray, C: np.ndarray, ib: np.ndarray, k: int) -> None:
    """Write -0 into A's panels ``(nA, MT, KB, 16, k_step)`` at every K index from ``k`` on (binary16
    codes: 0x8000)."""
    k_step = A.shape[-1]
    if k % k_step:
        A[:, :, k // k_step, :, k % k_step :] = 0x8000 if A.dtype == np.uint16 else -0.0

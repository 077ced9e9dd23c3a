"""The readable specification: what every tilegemm kernel must return, bit for bit.

``docs/semantics.md`` written in NumPy, one instruction at a time, slow on purpose. Each
instruction's record in :mod:`tilegemm.instructions` names its reference function here; this
module's :func:`matmul` converts the operands as :func:`tilegemm.matmul` does and runs it. The
fast kernels are tested against it; it is tested against hand-worked cases and an independent
exact-rational oracle.

- :mod:`~tilegemm.reference.binary32`: ``fma32``, ``add32``, ``daz`` (RNE, DAZ/FTZ).
- :mod:`~tilegemm.reference.amx`: TDPBF16PS / TDPFP16PS / TDPB*D and the GEMM cut into tiles.
- :mod:`~tilegemm.reference.avx512`: VDPBF16PS.
- :mod:`~tilegemm.reference.onednn`: PyTorch's bf16 matmul on an AMX server (oneDNN's blocks).
- :mod:`~tilegemm.reference.complex`: TCMMRLFP16PS / TCMMIMFP16PS (AMX-COMPLEX).
- :mod:`~tilegemm.reference.fp8`: TDPBF8PS / TDPBHF8PS / TDPHBF8PS / TDPHF8PS (AMX-FP8), with the
  8-bit float decode (``fix``) and the exact integer-to-binary32 rounding (``round_scaled``).
- :mod:`~tilegemm.reference.ace`: the ACE outer products (TOP4B*D, TOP2BF16PS, TOP4MX*PS with
  MX block scales), one instruction on one palette-2 tile at a time.
- :mod:`~tilegemm.reference.isa`: the other CPUs' paths (VPDPBUSD[S], VPMADDUBSW + VPMADDWD +
  VPADDD, VFMADD231PS, VFMADD231PH).
- :mod:`~tilegemm.reference.trace`: one output's operations, recorded while a reference runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import instructions
from ..ace import check_operand, check_scales
from ..formats import exact_start
from . import isa, trace
from .amx import tdp_float, tdp_int
from .avx512 import vdpbf16ps
from .binary32 import add32, daz, fma32

__all__ = ["matmul", "fma32", "add32", "daz", "tdp_float", "tdp_int", "vdpbf16ps", "isa", "trace"]


def matmul(
    a,
    b,
    dtype: str = "bf16",
    c=None,
    isa: str = instructions.DEFAULT_ISA,
    scales=None,
    trace=None,
    fp8_overflow: str = "error",
    **switches,
) -> np.ndarray:
    """The exact result of ``c + a @ b`` as the instruction sequence computes it.

    Parameters
    ----------
    a, b : array_like, 2-D (M x K and K x N)
        Converted to ``dtype`` once, as :func:`tilegemm.matmul` converts them (for ``"cfp16"``
        also a ``(real, imag)`` tuple).
    dtype : str
        A dtype name of the ``isa`` profile (:data:`tilegemm.DTYPES`).
    c : array_like, optional
        The starting C of an accumulate chain (the accumulator dtype, M x N); zeros when omitted.
    isa : str
        The profile (:data:`tilegemm.instructions.ISAS`), ``"amx"`` by default.
    scales : tuple, optional
        The ACE MX dtypes' block scales ``(sa, sb)``, as for :func:`tilegemm.matmul`.
    trace : tilegemm.reference.trace.Trace, optional
        Records output [0, 0]'s operations as they run.
    fp8_overflow : str
        As for :func:`tilegemm.matmul`: what an 8-bit float dtype does with a value past its range.
    **switches
        The instruction's open points (:attr:`tilegemm.instructions.Instruction.switches`), as
        for :func:`tilegemm.matmul`; defaults where not given.

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm import reference
    >>> reference.matmul(np.ones((2, 3)), np.ones((3, 2)))
    array([[3., 3.],
           [3., 3.]], dtype=float32)
    """
    prof, name, instr = instructions.resolve(isa, dtype)
    if prof.library_reference is not None:  # a library's whole call (isa="onednn")
        library = prof.library_reference_fn
        assert library is not None
        return library(a, b, name, c=c, **switches)
    options: dict[str, Any] = instr.options(switches, name)
    check_operand(instr, a, "a", name)
    check_operand(instr, b, "b", name)
    A = instr.a.to_codes(a, "a", name, fp8_overflow)
    B = instr.b.to_codes(b, "b", name, fp8_overflow)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"reference.matmul takes 2-D operands with matching K, got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    sa, sb = check_scales(instr, name, scales, A.shape, B.shape)
    C = np.zeros((M, N), instr.acc) if c is None else exact_start(c, instr.acc, (M, N))
    if K == 0:
        return C  # no instruction runs
    if instr.scale_block:
        options["scales"] = (sa, sb)
    if trace is not None:
        options["trace"] = trace
    return instr.reference_fn(instr, A, B, C, **options)

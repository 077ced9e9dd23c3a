"""One record per supported AMX dtype, and the conversions at the API boundary.

Everything that differs between TDPBF16PS, TDPFP16PS and the four TDPB*D instructions is data in
:data:`FORMATS`: the element type in memory, how many K elements share one 32-bit VNNI group, how
far one tile multiply steps along K, and how operands are converted into what the kernels read.
No other module branches on a dtype name.

The kernels never see user arrays: they read float32 values that are exactly the BF16/FP16 values
(with BF16 denormals already read as zero, the DAZ rule of ``SEMANTICS.md``), or 8-bit integers.
This module must not do arithmetic on the values beyond the one rounding the contract asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .convert import bf16_to_f32_daz, fp16_to_f32

__all__ = ["Format", "FORMATS", "DTYPES", "get_format", "daz"]

_BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class Format:
    """How one AMX dot-product instruction sees its operands.

    Attributes
    ----------
    name:
        The dtype name users pass (``"bf16"``, ``"s8u8"`` ...).
    instruction:
        The AMX instruction it emulates.
    element:
        NumPy dtype of one element in memory (``ml_dtypes.bfloat16``, ``float16``, ``int8``, ``uint8``
        for A; ``b_element`` for B).
    group:
        K elements per 32-bit VNNI group: 2 for 16-bit types, 4 for bytes.
    k_step:
        K covered by one full tile multiply: 64 bytes of a tile row, so 32 or 64 elements.
    out:
        The accumulator dtype (float32 or int32).
    """

    name: str
    instruction: str
    element: np.dtype
    b_element: np.dtype
    group: int
    k_step: int
    out: np.dtype

    @property
    def is_float(self) -> bool:
        return self.out == np.float32

    @property
    def kernel_element(self) -> np.dtype:
        """What the kernels read for A and B: exact float32 values, or the 8-bit integers."""
        return np.dtype(np.float32) if self.is_float else self.element

    # -- conversions -------------------------------------------------------------------------

    def to_element(self, x: np.ndarray, operand: str, b_side: bool = False) -> np.ndarray:
        """Convert a user array to this format's element type (rounded once, or range-checked).

        Raises ``TypeError`` for dtypes that cannot serve and ``ValueError`` for integers outside
        the 8-bit range of the operand's signedness.
        """
        x = np.asarray(x)
        kind = x.dtype.kind
        target = self.b_element if b_side else self.element
        if x.dtype == target:
            return x
        bad_kinds = {"c": "complex", "O": "object", "U": "string", "S": "bytes", "b": "bool",
                     "V": "structured", "M": "datetime", "m": "timedelta"}
        if kind in bad_kinds and x.dtype != _BF16:
            raise TypeError(
                f"operand {operand} has dtype {x.dtype} ({bad_kinds[kind]}), which dtype "
                f"{self.name!r} cannot take"
            )
        if self.is_float:
            if kind not in "fiu" and x.dtype != _BF16:
                raise TypeError(f"operand {operand} has dtype {x.dtype}, which {self.name!r} cannot take")
            # One rounding from the array's own precision (ml_dtypes and numpy both round float64
            # straight to the target, never through float32): SEMANTICS.md, "Inputs given in other
            # formats".
            with np.errstate(over="ignore", invalid="ignore"):
                return x.astype(target)
        if kind not in "iu":
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; {self.name!r} takes integer arrays "
                f"(quantize floats to 8-bit integers first)"
            )
        info = np.iinfo(target)
        if x.size:
            lo, hi = x.min(), x.max()
            if lo < info.min or hi > info.max:
                raise ValueError(
                    f"operand {operand} has values in [{lo}, {hi}], outside the {target} range "
                    f"[{info.min}, {info.max}] that dtype {self.name!r} needs for {operand}"
                )
        return x.astype(target)

    def to_kernel(self, x: np.ndarray) -> np.ndarray:
        """Element array -> what the kernels read (same shape, new array or view)."""
        if not self.is_float:
            return x
        if x.dtype == _BF16:
            # Exact widening, then DAZ: a BF16 denormal input is read as a zero of its sign.
            return bf16_to_f32_daz(x.view(np.uint16)).view(np.float32)
        # FP16 -> FP32 is exact and keeps FP16 denormals (they are normal in binary32).
        return fp16_to_f32(x.view(np.uint16)).view(np.float32)


def daz(x: np.ndarray) -> np.ndarray:
    """Read binary32 denormals as zeros of the same sign (MXCSR.DAZ), working on the bits."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    return np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits).astype(np.uint32).view(np.float32)


def _int(name: str, instr: str, a: type, b: type) -> Format:
    return Format(name, instr, np.dtype(a), np.dtype(b), 4, 64, np.dtype(np.int32))


FORMATS: dict[str, Format] = {
    "bf16": Format("bf16", "TDPBF16PS", _BF16, _BF16, 2, 32, np.dtype(np.float32)),
    "fp16": Format("fp16", "TDPFP16PS", np.dtype(np.float16), np.dtype(np.float16), 2, 32,
                   np.dtype(np.float32)),
    "s8s8": _int("s8s8", "TDPBSSD", np.int8, np.int8),
    "s8u8": _int("s8u8", "TDPBSUD", np.int8, np.uint8),
    "u8s8": _int("u8s8", "TDPBUSD", np.uint8, np.int8),
    "u8u8": _int("u8u8", "TDPBUUD", np.uint8, np.uint8),
}
_ALIASES = {"int8": "s8s8"}

#: The dtype names :func:`tilegemm.matmul` accepts.
DTYPES: tuple[str, ...] = ("bf16", "fp16", "int8", "s8s8", "s8u8", "u8s8", "u8u8")


def get_format(dtype: object) -> Format:
    """The :class:`Format` for a dtype name; ``ValueError`` listing the valid names otherwise."""
    if isinstance(dtype, Format):
        return dtype
    key = _ALIASES.get(dtype, dtype) if isinstance(dtype, str) else None
    if key not in FORMATS:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are {', '.join(DTYPES)}")
    return FORMATS[key]

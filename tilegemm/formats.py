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

import functools
from dataclasses import dataclass

import numpy as np

from .convert import bf16_to_f32_daz, f32_to_bf16, fp16_to_f32

__all__ = ["Format", "FORMATS", "DTYPES", "get_format", "daz", "bf16_dtype"]


@functools.cache
def bf16_dtype() -> np.dtype:
    """``ml_dtypes.bfloat16``, imported on first use: importing ml_dtypes costs most of a second
    here, and float32 inputs never need it (they are rounded by ``convert.f32_to_bf16``)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def _is_bf16(dt: np.dtype) -> bool:
    return dt.name == "bfloat16" and dt == bf16_dtype()


class _Lazy:
    """A dtype named by a string until first read (so that ml_dtypes loads only when needed)."""

    def __init__(self, attr):
        self.attr = attr

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        code = getattr(obj, self.attr)
        return bf16_dtype() if code == "bfloat16" else np.dtype(code)


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
    a_code: str
    b_code: str
    group: int
    k_step: int
    out: np.dtype

    element = _Lazy("a_code")
    b_element = _Lazy("b_code")

    @property
    def is_float(self) -> bool:
        return self.out == np.float32

    def bits(self, b_side: bool = False) -> np.dtype:
        """How tilegemm stores elements internally: uint16 bit patterns for BF16/FP16, else the
        8-bit integers themselves."""
        if self.is_float:
            return np.dtype(np.uint16)
        return np.dtype(self.b_code if b_side else self.a_code)

    def sample(self, m: int, k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Random operands a caller would pass (m x k and k x n): float32 normals for the float
        formats, integers over each operand's whole 8-bit range for the int8 ones."""
        if self.is_float:
            return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))
        ia, ib = np.iinfo(self.element), np.iinfo(self.b_element)
        return (
            rng.integers(ia.min, ia.max + 1, (m, k)).astype(self.element),
            rng.integers(ib.min, ib.max + 1, (k, n)).astype(self.b_element),
        )

    # -- conversions -------------------------------------------------------------------------

    def to_element(self, x: np.ndarray, operand: str, b_side: bool = False) -> np.ndarray:
        """Convert a user array to this format's element type (rounded once, or range-checked).

        Raises ``TypeError`` for dtypes that cannot serve and ``ValueError`` for integers outside
        the 8-bit range of the operand's signedness.
        """
        x = np.asarray(x)
        kind = x.dtype.kind
        self._check_kind(x, operand)
        target = self.b_element if b_side else self.element
        if x.dtype == target:
            return x
        if self.is_float:
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

    def _check_kind(self, x: np.ndarray, operand: str) -> None:
        kind = x.dtype.kind
        bad_kinds = {
            "c": "complex",
            "O": "object",
            "U": "string",
            "S": "bytes",
            "b": "bool",
            "V": "structured",
            "M": "datetime",
            "m": "timedelta",
        }
        if kind in bad_kinds and not _is_bf16(x.dtype):
            raise TypeError(
                f"operand {operand} has dtype {x.dtype} ({bad_kinds[kind]}), which dtype {self.name!r} cannot take"
            )
        if self.is_float and kind not in "fiu" and not _is_bf16(x.dtype):
            raise TypeError(f"operand {operand} has dtype {x.dtype}, which {self.name!r} cannot take")

    def to_bits(self, x: np.ndarray, operand: str, b_side: bool = False) -> np.ndarray:
        """Like :meth:`to_element`, returned in the internal form :meth:`bits`.

        float32 arrays headed for BF16 are rounded by the compiled ``convert.f32_to_bf16`` (the
        same RNE as ml_dtypes, tested exhaustively on a dense sample), without loading ml_dtypes.
        """
        x = np.asarray(x)
        if self.name == "bf16" and x.dtype == np.float32:
            return f32_to_bf16(x.view(np.uint32))
        el = self.to_element(x, operand, b_side)
        return el.view(np.uint16) if self.is_float else el

    def to_kernel(self, bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Internal bits -> what the kernels read (same shape; into ``out`` when given)."""
        if not self.is_float:
            return bits
        # BF16: exact widening, then DAZ (a BF16 denormal input is read as a zero of its sign).
        # FP16: exact, and FP16 denormals are kept (they are normal in binary32).
        widen = bf16_to_f32_daz if self.name == "bf16" else fp16_to_f32
        target = None if out is None else out.view(np.uint32)
        return widen(bits, out=target).view(np.float32) if target is not None else widen(bits).view(np.float32)


def daz(x: np.ndarray) -> np.ndarray:
    """Read binary32 denormals as zeros of the same sign (MXCSR.DAZ), working on the bits."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    return np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits).astype(np.uint32).view(np.float32)


def _int(name: str, instr: str, a: str, b: str) -> Format:
    return Format(name, instr, a, b, 4, 64, np.dtype(np.int32))


FORMATS: dict[str, Format] = {
    "bf16": Format("bf16", "TDPBF16PS", "bfloat16", "bfloat16", 2, 32, np.dtype(np.float32)),
    "fp16": Format("fp16", "TDPFP16PS", "float16", "float16", 2, 32, np.dtype(np.float32)),
    "s8s8": _int("s8s8", "TDPBSSD", "int8", "int8"),
    "s8u8": _int("s8u8", "TDPBSUD", "int8", "uint8"),
    "u8s8": _int("u8s8", "TDPBUSD", "uint8", "int8"),
    "u8u8": _int("u8u8", "TDPBUUD", "uint8", "uint8"),
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

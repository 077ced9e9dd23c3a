"""Number formats of the operands, and the one conversion of a user array into each.

One :class:`NumberFormat` record per element type an instruction reads (BF16, FP16, signed and
unsigned bytes). A record says how an element is stored (its *codes*: uint16 bit patterns for the
16-bit floats, the bytes themselves for the integers), how many bytes it takes, and how a user's
array becomes codes: rounded once from its own precision (floats) or range-checked (integers),
never wrapped. Which format each operand of an instruction has is in
:mod:`tilegemm.instructions`; this module knows nothing about instructions, kernels or packing.

This module must not do arithmetic on values beyond the one rounding the contract asks for
(``docs/semantics.md``, "Inputs given in other formats").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .convert import f32_to_bf16, f32_to_fp16

__all__ = ["NumberFormat", "BF16", "FP16", "S8", "U8", "daz", "bf16_dtype"]


@functools.cache
def _dtype(module: str, code: str) -> np.dtype:
    """A NumPy dtype by name; ml_dtypes is imported on first use only (it costs most of a second,
    and float32 inputs never need it: they are rounded by compiled code in ``convert``)."""
    if module == "ml_dtypes":
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, code))
    return np.dtype(code)


def bf16_dtype() -> np.dtype:
    """``ml_dtypes.bfloat16`` (imported on first use)."""
    return _dtype("ml_dtypes", "bfloat16")


def _is_ml_dtype(dt: np.dtype) -> bool:
    """An ml_dtypes type (bfloat16, float8_*), recognised without importing ml_dtypes."""
    return dt.type.__module__ == "ml_dtypes"


_BAD_KINDS = {
    "c": "complex",
    "O": "object",
    "U": "string",
    "S": "bytes",
    "b": "bool",
    "V": "structured",
    "M": "datetime",
    "m": "timedelta",
}


@dataclass(frozen=True)
class NumberFormat:
    """One element format.

    Attributes
    ----------
    name:
        Short name (``"bf16"``, ``"fp16"``, ``"s8"``, ``"u8"``).
    code:
        NumPy (or ml_dtypes) name of the element type in memory, e.g. ``"bfloat16"``.
    storage:
        NumPy dtype tilegemm keeps codes in: ``uint16`` bit patterns for 16-bit floats, the
        integers themselves for bytes.
    precision:
        Significant bits of a normal value, hidden bit included (BF16 8, FP16 11); 0 for integers.
    module:
        Where the element type lives: ``"numpy"``, or ``"ml_dtypes"`` (imported on first use).
    f32_round:
        A compiled ufunc rounding float32 bits to codes (RNE), used for float32 input so that
        ml_dtypes need not load; None where ``astype`` does it.
    """

    name: str
    code: str
    storage: np.dtype
    precision: int
    module: str = "numpy"
    f32_round: Callable | None = None

    @property
    def is_float(self) -> bool:
        return self.precision > 0

    @property
    def nbytes(self) -> int:
        """Bytes per element."""
        return self.storage.itemsize

    @property
    def element(self) -> np.dtype:
        """The NumPy dtype of one element (``ml_dtypes.bfloat16`` for BF16, loaded on first use)."""
        return _dtype(self.module, self.code)

    def sample(self, shape, rng: np.random.Generator, wide: bool = False) -> np.ndarray:
        """Random values a caller would pass: standard normals for floats (float32, or float64
        with ``wide``, so that the conversion has something to round), integers over the whole
        range for the integer formats (int64 with ``wide``)."""
        if self.is_float:
            x = rng.standard_normal(shape)
            return x if wide else x.astype(np.float32)
        info = np.iinfo(self.storage)
        x = rng.integers(info.min, info.max + 1, shape)
        return x if wide else x.astype(self.storage)

    def check_kind(self, x: np.ndarray, operand: str, dtype_name: str) -> None:
        """``TypeError`` for arrays this format cannot take, naming the operand and dtype."""
        kind = x.dtype.kind
        if _is_ml_dtype(x.dtype):  # bfloat16, float8_*: floats, whatever NumPy's kind says
            if self.is_float:
                return
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; {dtype_name!r} takes integer arrays "
                f"(quantize floats to 8-bit integers first)"
            )
        if kind in _BAD_KINDS:
            raise TypeError(
                f"operand {operand} has dtype {x.dtype} ({_BAD_KINDS[kind]}), which dtype {dtype_name!r} cannot take"
            )
        if not self.is_float and kind not in "iu":
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; {dtype_name!r} takes integer arrays "
                f"(quantize floats to 8-bit integers first)"
            )

    def to_element(self, x, operand: str, dtype_name: str) -> np.ndarray:
        """A user array as this format's elements: rounded once (RNE) from the array's own
        precision, or range-checked. ``TypeError`` / ``ValueError`` name the offending operand."""
        x = np.asarray(x)
        self.check_kind(x, operand, dtype_name)
        target = self.element
        if x.dtype == target:
            return x
        if self.is_float:
            # One rounding from the array's own precision: ml_dtypes and numpy both round float64
            # straight to the target, never through float32 (docs/semantics.md, "Inputs").
            with np.errstate(over="ignore", invalid="ignore"):
                return x.astype(target)
        info = np.iinfo(target)
        if x.size:
            lo, hi = x.min(), x.max()
            if lo < info.min or hi > info.max:
                raise ValueError(
                    f"operand {operand} has values in [{lo}, {hi}], outside the {target} range "
                    f"[{info.min}, {info.max}] that dtype {dtype_name!r} needs for {operand}"
                )
        return x.astype(target)

    def to_codes(self, x, operand: str, dtype_name: str) -> np.ndarray:
        """Like :meth:`to_element`, as codes (``storage``). float32 arrays are rounded by
        ``f32_round`` where the format has one (the RNE of ml_dtypes / numpy, tested on a dense
        sample)."""
        x = np.asarray(x)
        if self.f32_round is not None and x.dtype == np.float32:
            return self.f32_round(x.view(np.uint32))
        return self.to_element(x, operand, dtype_name).view(self.storage)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes back to values (float32 for floats, exact; the integers themselves)."""
        codes = np.asarray(codes)
        return codes.view(self.element).astype(np.float32) if self.is_float else codes.view(self.storage)


def daz(x: np.ndarray) -> np.ndarray:
    """Read binary32 denormals as zeros of the same sign (MXCSR.DAZ), working on the bits."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    return np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits).astype(np.uint32).view(np.float32)


BF16 = NumberFormat("bf16", "bfloat16", np.dtype(np.uint16), 8, "ml_dtypes", f32_to_bf16)
FP16 = NumberFormat("fp16", "float16", np.dtype(np.uint16), 11, "numpy", f32_to_fp16)
S8 = NumberFormat("s8", "int8", np.dtype(np.int8), 0)
U8 = NumberFormat("u8", "uint8", np.dtype(np.uint8), 0)

"""Operand layouts as records: what a kernel family reads, how it is made, and its proof.

A kernel family (``tilegemm.kernels.families``) names the layout of its A panels and B blocks.
One :class:`Layout` per name holds every fact the framework needs about it: the type of the values
the kernels read (or that they read the codes themselves), whether each VNNI group is split into
planes of 16 columns, the functions that build A panels and B blocks (``tilegemm.packing`` for
the instruction layouts, ``tilegemm.ace`` for the MX ones), the range summary those builders
return for the proof, and the proof rule (:mod:`tilegemm.plan` documents the rules). Packing,
ACE, ``inspect`` and the planner look records up here; none of them compares layout names.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

#: An instruction record (``tilegemm.instructions.Instruction``); not imported: the records
#: import this module.
Instruction = Any

__all__ = ["Layout", "LAYOUTS", "get", "Range", "function_at"]

#: Exponents a proof reads, None where an operand has no non-zero finite value: mostly
#: (smallest, largest); ``summary="both"`` reads four.
Range = tuple[int, ...] | None


@dataclass(frozen=True, kw_only=True)
class Layout:
    """One operand layout.

    Attributes
    ----------
    name:
        The key kernel families use.
    values:
        The NumPy type of the values the kernels read (``"float32"``, ``"float64"``); None: the
        codes as stored (integers, binary16 codes).
    planes:
        Each VNNI group is split into planes of 16 columns (``[pair][even/odd][n]``, which is
        ``[k][n]``), so that a vector of 16 columns loads in one go; else the groups stay as
        packed (``[quad][n][4]``).
    build_a, build_b:
        ``"module:function"`` of the builders: ``build_a(instr, layout, a, k_blocks, scales,
        options) -> (A, range)`` of A (nA, M, K) codes (or float32 values the builder rounds), and
        ``build_b(instr, layout, daz, el, scales, options, summary) -> (B, range)`` of B's packed codes
        ``(..., KB, NB, 16, 16, group)``.
    summary:
        What the proof reads of each operand: ``"exponents"`` (smallest, largest exponent of
        the values read), ``"unscaled"`` (smallest block-scale exponent, largest exponent before
        scaling), ``"scaled"`` (of the values times their scales) or ``"both"`` (the last two).
    step_bounds:
        Floats after each A panel row's values, and rows after each B block: a bound per step
        (the ACE MX FP8 binary32 layout), else 0.
    keyed_by:
        A switch whose value changes the blocks built (ACE's FP8 specials), or None.
    proof:
        ``"module:function"`` of the rule, ``f(instr, a_range, b_range, c_range) -> bool``: True
        when the family's fast entry gives the exact bits for operands with these ranges.
    doc:
        One line for listings.
    """

    name: str
    values: str | None
    planes: bool
    build_a: str
    build_b: str
    summary: str
    proof: str
    doc: str
    step_bounds: int = 0
    keyed_by: str | None = None

    @functools.cached_property
    def dtype(self) -> np.dtype | None:
        """The NumPy dtype of the values read, or None (codes)."""
        return None if self.values is None else np.dtype(self.values)

    def _fn(self, ref: str) -> Callable[..., Any]:
        return function_at(ref)

    def pack_a(self, instr: Instruction, a, k_blocks: int, scales=None, options=None):
        """A (nA, M, K) as this layout's panels, and its range for the proof."""
        return self._fn(self.build_a)(instr, self, a, k_blocks, scales, options)

    def pack_b(self, instr: Instruction, daz: bool, el, scales=None, options=None, summary: bool = True):
        """B's packed codes as this layout's kernel blocks, and their range for the proof
        (``summary=False``: None where the builder can skip it, as the tile unit does, which runs
        the exact entry and reads no range)."""
        return self._fn(self.build_b)(instr, self, daz, el, scales, options, summary)

    def key(self, options) -> str:
        """What a kernel B block of this layout depends on beyond the packed bytes and scales."""
        if self.keyed_by is None or not options or self.keyed_by not in options:
            return self.name
        return f"{self.name}:{options[self.keyed_by]}"

    def proven(self, instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
        """The proof rule for operands with these ranges."""
        return bool(self._fn(self.proof)(instr, a_range, b_range, c_range))


@functools.lru_cache(maxsize=None)
def function_at(ref: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` reference names, imported on first use and kept: the
    tile unit resolves its builders once per instruction it runs."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


_PLAN = "tilegemm.plan"
_PACK_A, _PACK_B = "tilegemm.packing:build_a", "tilegemm.packing:build_b"
_ACE_A, _ACE_B = "tilegemm.ace:build_a", "tilegemm.ace:build_b"

LAYOUTS: Mapping[str, Layout] = MappingProxyType(
    {
        lay.name: lay
        for lay in (
            Layout(
                name="f32",
                values="float32",
                planes=True,
                build_a=_PACK_A,
                build_b=_PACK_B,
                summary="exponents",
                proof=f"{_PLAN}:float_proof",
                doc="exact binary32 values of 16-bit floats (and their complex parts), planes [k][n]",
            ),
            Layout(
                name="f16",
                values=None,
                planes=True,
                build_a=_PACK_A,
                build_b=_PACK_B,
                summary="exponents",
                proof=f"{_PLAN}:no_proof",
                doc="binary16 codes, planes [k][n] (VFMADD231PH itself)",
            ),
            Layout(
                name="bytes",
                values=None,
                planes=False,
                build_a=_PACK_A,
                build_b=_PACK_B,
                summary="exponents",
                proof=f"{_PLAN}:no_proof",
                doc="the packed bytes, [quad][n][4]",
            ),
            Layout(
                name="f64",
                values="float64",
                planes=True,
                build_a=_PACK_A,
                build_b=_PACK_B,
                summary="exponents",
                proof=f"{_PLAN}:fixed_sum_proof",
                doc="exact binary64 values of 8-bit floats, [k][n]",
            ),
            Layout(
                name="fp8_32",
                values="float32",
                planes=True,
                build_a=_PACK_A,
                build_b=_PACK_B,
                summary="exponents",
                proof=f"{_PLAN}:fixed_sum_proof",
                doc="the 8-bit floats' values in binary32, [k][n]",
            ),
            Layout(
                name="mx64",
                values="float64",
                planes=True,
                build_a=_ACE_A,
                build_b=_ACE_B,
                summary="unscaled",
                keyed_by="ace_fp8_specials",
                proof=f"{_PLAN}:mx_proof",
                doc="MX values times their block scales, binary64, [k][n]",
            ),
            Layout(
                name="mx32",
                values="float32",
                planes=True,
                build_a=_ACE_A,
                build_b=_ACE_B,
                summary="scaled",
                proof=f"{_PLAN}:mx32_proof",
                doc="MXINT8 values times their block scales, binary32, [k][n]",
            ),
            Layout(
                name="mx32c",
                values="float32",
                planes=True,
                build_a=_ACE_A,
                build_b=_ACE_B,
                summary="both",
                step_bounds=16,
                keyed_by="ace_fp8_specials",
                proof=f"{_PLAN}:mx32c_proof",
                doc="MX FP8 values times their block scales, binary32, with a bound per step",
            ),
            Layout(
                name="f32keep",
                values="float32",
                planes=True,
                build_a="tilegemm.packing:build_a",
                build_b="tilegemm.ace:build_b",
                summary="exponents",
                proof=f"{_PLAN}:float_proof",
                doc="BF16 values in binary32 with denormals kept (TOP2BF16PS), [pair][element][n]",
            ),
        )
    }
)


def get(name: str) -> Layout:
    """The layout ``name``; ``KeyError`` naming the layouts otherwise."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise KeyError(f"no layout {name!r}; layouts: {', '.join(LAYOUTS)}") from None

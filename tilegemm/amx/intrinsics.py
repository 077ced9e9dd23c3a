"""The C intrinsics of ``<immintrin.h>`` over a default :class:`~tilegemm.amx.TileUnit`.

Where C passes a pointer, Python passes the memory buffer (a 1-D uint8 array) and a byte offset:
``_tile_loadd(t, buf, offset, stride)``. ``unit`` is the tile unit these act on; ``reset()``
gives a fresh one (new counters). The multiply intrinsics (``_tile_dpbf16ps(dst, a, b)`` ...)
are made from the instruction records, one per instruction with a tile form; the ACE outer
products likewise (``_tile_op4mxhf8_ps(dst, a, b, imm)``, ``a`` and ``b`` zmm registers as 64-byte
arrays), with ``_mm512_loadu_si512(buf, offset)`` / ``_mm512_storeu_si512(buf, offset, zmm)`` for
the vector loads and stores around them.
"""

from __future__ import annotations

from typing import Any, Callable

from ..instructions import Instruction
from .ace import OUTER_INSTRUCTIONS
from .unit import TILE_INSTRUCTIONS, TileUnit

unit = TileUnit()


def reset(native: bool = False) -> TileUnit:
    """Replace the default unit with a fresh one (unconfigured, counters at zero) and return it;
    ``native=True``: on this CPU's tile registers (:class:`TileUnit`)."""
    global unit
    unit = TileUnit(native)
    return unit


def _tile_loadconfig(cfg):
    unit.ldtilecfg(cfg)


def _tile_storeconfig() -> bytes:
    return unit.sttilecfg()


def _tile_loadd(t, buf, offset, stride):
    unit.tileloadd(t, buf, offset, stride)


def _tile_stored(t, buf, offset, stride):
    unit.tilestored(t, buf, offset, stride)


def _tile_zero(t):
    unit.tilezero(t)


def _tile_release():
    unit.tilerelease()


def _multiply_intrinsic(record: Instruction) -> Callable[..., Any]:
    method = record.tile_method

    def intrinsic(dst, a, b, **switches):
        getattr(unit, method)(dst, a, b, **switches)  # the unit current at the call (reset() replaces it)

    intrinsic.__name__ = intrinsic.__qualname__ = str(record.intrinsic)
    intrinsic.__doc__ = f"{record.intrinsic}(dst, a, b): {record.mnemonic} on the default unit."
    return intrinsic


_MULTIPLIES = {str(r.intrinsic): _multiply_intrinsic(r) for r in TILE_INSTRUCTIONS.values()}
globals().update(_MULTIPLIES)


def _outer_intrinsic(record: Instruction) -> Callable[..., Any]:
    method = record.outer_method

    def intrinsic(dst, a, b, *imm, **switches):
        getattr(unit, method)(dst, a, b, *imm, **switches)

    intrinsic.__name__ = intrinsic.__qualname__ = str(record.intrinsic)
    imm = ", imm" if record.imm8 else ""
    intrinsic.__doc__ = f"{record.intrinsic}(dst, a, b{imm}): {record.mnemonic} on the default unit."
    return intrinsic


_OUTER = {str(r.intrinsic): _outer_intrinsic(r) for r in OUTER_INSTRUCTIONS.values()}
globals().update(_OUTER)


def _mm512_loadu_si512(buf, offset):
    """A zmm register (64 bytes) loaded from ``buf`` at byte ``offset`` (counted)."""
    return unit.vmovdqu64_load(buf, offset)


def _mm512_storeu_si512(buf, offset, zmm):
    unit.vmovdqu64_store(buf, offset, zmm)


__all__ = [
    "unit",
    "reset",
    "_tile_loadconfig",
    "_tile_storeconfig",
    "_tile_loadd",
    "_tile_stored",
    "_tile_zero",
    "_tile_release",
    "_mm512_loadu_si512",
    "_mm512_storeu_si512",
    *_MULTIPLIES,
    *_OUTER,
]

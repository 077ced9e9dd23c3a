"""The C intrinsics of ``<immintrin.h>`` over a default :class:`~tilegemm.amx.TileUnit`.

Where C passes a pointer, Python passes the memory buffer (a 1-D uint8 array) and a byte offset:
``_tile_loadd(t, buf, offset, stride)``. ``unit`` is the tile unit these act on; ``reset()``
gives a fresh one (new counters). The multiply intrinsics (``_tile_dpbf16ps(dst, a, b)`` ...)
are made from the instruction records, one per instruction with a tile form; the ACE outer
products likewise (``_tile_op4mxhf8_ps(dst, a, b, imm)``, ``a`` and ``b`` zmm registers as 64-byte
arrays), with ``_mm512_loadu_si512(buf, offset)`` / ``_mm512_storeu_si512(buf, offset, zmm)`` for
the vector loads and stores around them, and palette 2's state under acev1intrin.h's names
(``_tile_ace_loadconfig``, ``_tile_insertrow``, ``_tile_extractrow``, ``_bsr0_insertfull`` ...).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

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


# Palette 2 (ACE) as clang's and GCC's acev1intrin.h name its intrinsics: the tile
# configuration, TILEMOVROW/TILEMOVCOL between tiles and zmm registers, and the block-scale
# register bsr0 (BSRINIT, BSRMOVF/H/L). A zmm register is a 64-byte numpy array.


def _tile_ace_loadconfig(cfg):
    unit.ldtilecfg(cfg)


def _tile_ace_storeconfig() -> bytes:
    return unit.sttilecfg()


def _tile_ace_release():
    unit.tilerelease()


def _tile_ace_zero(t):
    unit.tilezero(t)


def _tile_insertrow(dst, src, idx, **switches):
    """TILEMOVROW: row ``idx`` of tile ``dst`` becomes the zmm ``src``."""
    unit.tilemovrow(dst, src, idx, **switches)


def _tile_insertcol(dst, src, idx, **switches):
    """TILEMOVCOL: dword ``idx`` of row r of tile ``dst`` becomes dword r of the zmm ``src``."""
    unit.tilemovcol(dst, src, idx, **switches)


def _tile_extractrow(tsrc, row, **switches) -> np.ndarray:
    """TILEMOVROW: row ``row`` of tile ``tsrc`` as a new zmm (64 bytes)."""
    z = np.zeros(64, np.uint8)
    unit.tilemovrow(z, tsrc, row, **switches)
    return z


def _bsr0_init():
    unit.bsrinit()


def _bsr0_insertfull(src1, src2):
    """BSRMOVF: half H (A's scales) from ``src1``, half L (B's) from ``src2``."""
    unit.bsrmovf(0, src1, src2)


def _bsr0_inserth(src):
    unit.bsrmovh(0, src)


def _bsr0_insertl(src):
    unit.bsrmovl(0, src)


def _bsr0_extracth() -> np.ndarray:
    z = np.zeros(64, np.uint8)
    unit.bsrmovh(z, 0)
    return z


def _bsr0_extractl() -> np.ndarray:
    z = np.zeros(64, np.uint8)
    unit.bsrmovl(z, 0)
    return z


_ACE_STATE = [
    "_tile_ace_loadconfig",
    "_tile_ace_storeconfig",
    "_tile_ace_release",
    "_tile_ace_zero",
    "_tile_insertrow",
    "_tile_insertcol",
    "_tile_extractrow",
    "_bsr0_init",
    "_bsr0_insertfull",
    "_bsr0_inserth",
    "_bsr0_insertl",
    "_bsr0_extracth",
    "_bsr0_extractl",
]


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
    *_ACE_STATE,
    *_MULTIPLIES,
    *_OUTER,
]

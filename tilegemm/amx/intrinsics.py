"""The C intrinsics of ``<immintrin.h>`` over a default :class:`~tilegemm.amx.TileUnit`.

Where C passes a pointer, Python passes the memory buffer (a 1-D uint8 array) and a byte offset:
``_tile_loadd(t, buf, offset, stride)``. ``unit`` is the tile unit these act on; ``reset()``
gives a fresh one (new counters).
"""

from __future__ import annotations

from .unit import TileUnit

__all__ = [
    "unit",
    "reset",
    "_tile_loadconfig",
    "_tile_storeconfig",
    "_tile_loadd",
    "_tile_stored",
    "_tile_zero",
    "_tile_release",
    "_tile_dpbf16ps",
    "_tile_dpfp16ps",
    "_tile_dpbssd",
    "_tile_dpbsud",
    "_tile_dpbusd",
    "_tile_dpbuud",
]

unit = TileUnit()


def reset() -> TileUnit:
    """Replace the default unit with a fresh one (unconfigured, counters at zero) and return it."""
    global unit
    unit = TileUnit()
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


def _tile_dpbf16ps(dst, a, b):
    unit.tdpbf16ps(dst, a, b)


def _tile_dpfp16ps(dst, a, b):
    unit.tdpfp16ps(dst, a, b)


def _tile_dpbssd(dst, a, b):
    unit.tdpbssd(dst, a, b)


def _tile_dpbsud(dst, a, b):
    unit.tdpbsud(dst, a, b)


def _tile_dpbusd(dst, a, b):
    unit.tdpbusd(dst, a, b)


def _tile_dpbuud(dst, a, b):
    unit.tdpbuud(dst, a, b)

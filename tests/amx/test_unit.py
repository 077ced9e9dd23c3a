"""TileConfig and TileUnit: the 64-byte block, every fault with its message, no state change."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import assert_bits

import tilegemm
from tilegemm.amx import GPFault, PFFault, TileConfig, TileFault, TileUnit, UDFault

FULL = TileConfig(rows=(16,) * 8, colsb=(64,) * 8)


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        ({"palette": "2"}, TypeError, r"palette must be an integer, got '2'"),
        ({"palette": 2.0}, TypeError, r"palette must be an integer, got 2.0"),
        ({"palette": 256}, ValueError, r"palette=256 does not fit its field of the configuration \(0..255\)"),
        ({"start_row": -1}, ValueError, r"start_row=-1 does not fit"),
        ({"rows": (16.5,) + (0,) * 7}, TypeError, r"rows\[0\] must be an integer, got 16.5"),
        ({"rows": 16}, TypeError, r"rows must be a sequence of 8 integers, got 16"),
        ({"colsb": (0,) * 7 + (65536,)}, ValueError, r"colsb\[7\]=65536 does not fit its field .*0..65535"),
    ],
)
def test_config_fields_are_integers_that_fit(kwargs, err, match):
    """A field is a byte (colsb a word) of the block: no silent truncation of 16.5 or 256; values
    that fit but that LDTILECFG refuses (palette 3, rows 17) still build, to fault there."""
    with pytest.raises(err, match=match):
        TileConfig(**kwargs)
    assert TileConfig(palette=np.uint8(2)).palette == 2
    with pytest.raises(ValueError, match=r"a tile configuration has 8 rows and 8 colsb \(palette 2 leaves them 0\)"):
        TileConfig(palette=2, rows=(16,) * 7).to_bytes()


def test_config_bytes_layout_and_roundtrip():
    cfg = TileConfig(palette=1, start_row=3, rows=(16, 2, 0, 0, 0, 0, 0, 5), colsb=(64, 8, 0, 0, 0, 0, 0, 300))
    b = cfg.to_bytes()
    assert len(b) == 64 and b[0] == 1 and b[1] == 3
    assert b[16:18] == (64).to_bytes(2, "little") and b[30:32] == (300).to_bytes(2, "little")
    assert b[48] == 16 and b[49] == 2 and b[55] == 5
    assert not any(b[2:16]) and not any(b[32:48]) and not any(b[56:64])
    assert TileConfig.from_bytes(b) == cfg
    assert TileConfig.from_bytes(np.frombuffer(b, np.uint8)) == cfg


def _state(u):
    return u.tiles.copy(), copy.deepcopy(u.config), copy.deepcopy(u.counters)


def _assert_fault(u, call, cls, pattern):
    before = _state(u)
    with pytest.raises(cls, match=pattern) as info:
        call()
    assert isinstance(info.value, TileFault)
    after = _state(u)
    assert np.array_equal(before[0], after[0]) and before[1] == after[1] and before[2] == after[2]


def _configured(rows=(16,) * 8, colsb=(64,) * 8):
    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=rows, colsb=colsb))
    mem = np.arange(64 * 16, dtype=np.uint32).astype(np.uint8)
    for t in range(8):
        if rows[t]:
            u.tileloadd(t, mem, 0, 64)
    return u


@pytest.mark.parametrize(
    "cfg,pattern",
    [
        (TileConfig(rows=(17,) + (0,) * 7, colsb=(64,) + (0,) * 7), r"#GP in LDTILECFG on tmm0: rows = 17 exceeds 16"),
        (
            TileConfig(rows=(0, 4) + (0,) * 6, colsb=(0, 68) + (0,) * 6),
            r"#GP in LDTILECFG on tmm1: colsb = 68 exceeds 64",
        ),
        (TileConfig(rows=(0, 0, 4) + (0,) * 5, colsb=(0,) * 8), r"on tmm2: rows = 4 and colsb = 0: both must be zero"),
        (TileConfig(palette=3), r"#GP in LDTILECFG: palette 3 is not supported \(0, 1, or 2 for ACE\)"),
        (TileConfig.from_bytes(bytes([1, 0, 0, 0, 0, 7]) + bytes(58)), r"#GP in LDTILECFG: reserved byte 5 is 7"),
        (TileConfig(start_row=16, rows=(1,) + (0,) * 7, colsb=(4,) + (0,) * 7), r"start_row = 16"),
    ],
)
def test_ldtilecfg_faults(cfg, pattern):
    u = _configured()
    _assert_fault(u, lambda: u.ldtilecfg(cfg), GPFault, pattern)


def test_unconfigured_and_released():
    u = TileUnit()
    mem = np.zeros(1024, np.uint8)
    _assert_fault(u, lambda: u.tileloadd(0, mem, 0, 64), UDFault, r"#UD in TILELOADD on tmm0: tiles are not configured")
    u = _configured(rows=(16, 0) + (16,) * 6, colsb=(64, 0) + (64,) * 6)
    _assert_fault(u, lambda: u.tilezero(1), UDFault, r"#UD in TILEZERO on tmm1: the tile is not configured")
    _assert_fault(u, lambda: u.tilezero(8), UDFault, r"tile register 8 does not exist")
    u.tilerelease()
    assert not u.tiles.any() and u.sttilecfg() == bytes(64)
    _assert_fault(u, lambda: u.tdpbf16ps(0, 1, 2), UDFault, r"#UD in TDPBF16PS on tmm0: tiles are not configured")
    u.ldtilecfg(FULL)
    u.ldtilecfg(TileConfig(palette=0))  # palette 0 releases
    assert u.config is None


def test_page_faults():
    u = _configured()
    mem = np.zeros(1000, np.uint8)
    _assert_fault(
        u,
        lambda: u.tileloadd(3, mem, 0, 64),
        PFFault,
        r"#PF in TILELOADD on tmm3: rows reach bytes \[0, 1024\) but memory holds \[0, 1000\)",
    )
    _assert_fault(
        u, lambda: u.tilestored(3, mem, -64, 64), PFFault, r"#PF in TILESTORED on tmm3: rows reach bytes \[-64"
    )
    ro = np.zeros(2048, np.uint8)
    ro.flags.writeable = False
    _assert_fault(u, lambda: u.tilestored(3, ro, 0, 64), PFFault, "read-only")


@pytest.mark.parametrize(
    "rows,colsb,call,pattern",
    [
        ((16,) * 8, (64,) * 8, lambda u: u.tdpbf16ps(0, 0, 2), r"three distinct tiles, got tmm0, tmm0, tmm2"),
        (
            (16,) * 8,
            (64, 62) + (64,) * 6,
            lambda u: u.tdpbf16ps(0, 1, 2),
            r"on tmm1: colsb = 62 is not a multiple of 4",
        ),
        ((16, 8) + (16,) * 6, (64,) * 8, lambda u: u.tdpbssd(0, 1, 2), r"on tmm1: A has 8 rows but dst has 16"),
        (
            (16, 16, 8) + (16,) * 5,
            (64,) * 8,
            lambda u: u.tdpfp16ps(0, 1, 2),
            r"on tmm2: B has 8 rows but A's colsb / 4 = 16",
        ),
        (
            (16,) * 8,
            (64, 64, 32) + (64,) * 5,
            lambda u: u.tdpbuud(0, 1, 2),
            r"on tmm2: B has colsb = 32 but dst has colsb = 64",
        ),
    ],
)
def test_multiply_faults(rows, colsb, call, pattern):
    u = _configured(rows, colsb)
    _assert_fault(u, lambda: call(u), UDFault, pattern)


def test_multiply_matches_matmul_and_clears_upper_bytes():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((6, 3)).astype(np.float32)
    want = tilegemm.matmul(a, b, "bf16")
    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=(5, 5, 3) + (0,) * 5, colsb=(12, 12, 12) + (0,) * 5))
    a16 = tilegemm.formats.BF16.to_codes(a, "a", "bf16")
    b16 = tilegemm.formats.BF16.to_codes(b, "b", "bf16")
    vnni = b16.reshape(3, 2, 3).transpose(0, 2, 1).copy()  # b.row[k].elem[2n + j] = B[2k + j][n]
    mem = np.concatenate([a16.view(np.uint8).ravel(), vnni.view(np.uint8).ravel()])
    u.tiles[0, 7, 60] = 9  # garbage above the configured shape is cleared by the multiply
    u.tilezero(0)
    u.tileloadd(1, mem, 0, 12)
    u.tileloadd(2, mem, a16.nbytes, 12)
    u.tdpbf16ps(0, 1, 2)
    assert_bits(u.tile(0, np.float32), want, "TileUnit TDPBF16PS")
    assert not u.tiles[0, 5:].any() and not u.tiles[0, :, 12:].any()
    assert u.counters.macs == 5 * 3 * 6 and u.counters.instructions["tdpbf16ps"] == 1
    assert u.counters.bytes_loaded == 5 * 12 + 3 * 12 and u.counters.load_to_compute == 2.0


@pytest.mark.parametrize("method", ["tdpbf16ps", "tdpfp16ps"])
def test_multiply_reads_a_denormal_dst_as_zero(method):
    # dst = 0x80000001 (-2^-149) and a zero product: DAZ reads dst as -0, and -0 + (+0 + +0) = +0.
    # Without DAZ the exact sum -2^-149 would flush to -0 (as matmul's accumulate=True shows too).
    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=(1, 1, 1) + (0,) * 5, colsb=(4, 4, 4) + (0,) * 5))
    mem = np.concatenate([np.uint32([0x80000001]).view(np.uint8), np.zeros(8, np.uint8)])
    u.tileloadd(0, mem, 0, 4)
    u.tileloadd(1, mem, 4, 4)
    u.tileloadd(2, mem, 8, 4)
    getattr(u, method)(0, 1, 2)
    assert_bits(u.tile(0, np.float32), np.float32([[0.0]]), method)
    out = np.uint32([[0x80000001]]).view(np.float32)
    tilegemm.matmul(np.zeros((1, 2)), np.zeros((2, 1)), method[3:7], out=out, accumulate=True)
    assert_bits(out, np.float32([[0.0]]), "matmul")

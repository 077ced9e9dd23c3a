"""The tile unit with palette 2 (ACE): configuration, the block-scale register, TILEMOVROW and
TILEMOVCOL, the outer products and their intrinsics, every fault with its message and no state
change, and the seed's 2x2 ported to ACE against tilegemm.matmul."""

from __future__ import annotations

import copy

import ml_dtypes
import numpy as np
import pytest
from ace_examples import INT, MX, TOP2, dword_zmm
from conftest import assert_bits

import tilegemm
from tilegemm import instructions
from tilegemm.amx import GPFault, TileConfig, TileFault, TileUnit, UDFault, ace_seed, intrinsics

I = instructions.INSTRUCTIONS
P2 = TileConfig(palette=2)


def _unit(palette=2):
    u = TileUnit()
    u.ldtilecfg(P2 if palette == 2 else TileConfig(rows=(16,) * 8, colsb=(64,) * 8))
    return u


def _state(u):
    return u.tiles.copy(), u.bsr.copy(), copy.deepcopy(u.config), copy.deepcopy(u.counters)


def _assert_fault(u, call, cls, pattern):
    before = _state(u)
    with pytest.raises(cls, match=pattern) as info:
        call()
    assert isinstance(info.value, TileFault)
    after = _state(u)
    assert all(np.array_equal(x, y) for x, y in zip(before[:2], after[:2])) and before[2:] == after[2:]


def test_palette2_configuration():
    u = TileUnit()
    u.tiles[3, 5, 7] = 1
    u.bsr[...] = 0x11
    u.ldtilecfg(P2)
    assert not u.tiles.any() and (u.bsr == 0x7F).all()  # LDTILECFG zeroes tiles, BSR to 1.0
    assert u.sttilecfg() == bytes([2]) + bytes(63)
    assert u.tile(5).shape == (16, 64)  # every tile is 16 x 64 bytes
    for block, pattern in [
        (bytes([2, 1]) + bytes(62), r"#GP in LDTILECFG: palette 2: byte 1 is 1, bytes 1..63 must be 0"),
        (bytes([2]) + bytes(47) + bytes([16]) + bytes(15), r"byte 48 is 16"),
    ]:
        _assert_fault(u, lambda b=block: u.ldtilecfg(b), GPFault, pattern)
    u.ldtilecfg(TileConfig(palette=0))
    assert u.config is None


def test_bs1_bs2_block_scale_register():
    u = _unit()
    h, l = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    u.bsrmovh(h, 0)
    u.bsrmovl(l, 0)
    assert (h == 0x7F).all() and (l == 0x7F).all()  # BS-1
    u.bsrmovf(0, np.full(64, 0x11, np.uint8), np.full(64, 0x22, np.uint8))
    u.bsrmovh(h, 0)
    u.bsrmovl(l, 0)
    assert (h == 0x11).all() and (l == 0x22).all()  # BS-2: H is BSRMOVF's first source
    hf, lf = np.zeros(16, np.uint32), np.zeros(16, np.uint32)
    u.bsrmovf(hf, lf, 0)
    assert (hf == 0x11111111).all() and (lf == 0x22222222).all()
    u.bsrmovl(0, np.arange(64, dtype=np.uint8))
    u.bsrmovh(h, 0)
    assert (h == 0x11).all()  # writing L leaves H (Bochs' reader returned L for both)
    u.bsrinit()
    assert (u.bsr == 0x7F).all()


def test_tm1_tm2_tile_moves():
    u = _unit()
    u.tilemovcol(0, np.arange(16, dtype=np.uint32), 3)  # TM-1
    t = u.tile(0, np.uint32)
    assert (t[:, 3] == np.arange(16)).all() and not np.delete(t, 3, axis=1).any()
    z = np.arange(64, dtype=np.uint8)
    u.tilemovrow(1, z, 0x00010013)  # TM-2: bits 15:0 = 19, & 15 = 3
    assert (u.tile(1)[3] == z).all() and not np.delete(u.tile(1), 3, axis=0).any()
    back = np.zeros(16, np.float32)
    u.tilemovrow(back, 1, 3)
    assert np.array_equal(back.view(np.uint8), z)
    _assert_fault(
        u,
        lambda: u.tilemovrow(1, z, 0x00010013, ace_tilemov_index="fault"),
        UDFault,
        r"#UD in TILEMOVROW: index 0x10013 \(bits 15:0 = 19\) exceeds 15",
    )
    u.tilemovcol(2, np.ones(16, np.uint32), 15, ace_tilemov_index="fault")  # 15 is fine
    with pytest.raises(ValueError, match="ace_tilemov_index='wrap'"):
        u.tilemovrow(1, z, 3, ace_tilemov_index="wrap")
    with pytest.raises(ValueError, match="must be a C-contiguous numpy array of 64 bytes"):
        u.tilemovrow(1, np.zeros(15, np.uint32), 3)


def test_ft_faults():
    u = _unit()
    mem = np.zeros(1024, np.uint8)
    z = np.zeros(64, np.uint8)
    _assert_fault(u, lambda: u.tileloadd(0, mem, 0, 64), UDFault, r"#UD in TILELOADD on tmm0: palette 2 \(ACE\)")
    _assert_fault(u, lambda: u.tilestored(0, mem, 0, 64), UDFault, r"#UD in TILESTORED on tmm0: palette 2")
    _assert_fault(u, lambda: u.bsrmovh(1, z), UDFault, r"#UD in BSRMOVH: block-scale register bsr1 does not exist")
    _assert_fault(u, lambda: u.tdpbssd(0, 1, 2), UDFault, r"#UD in TDPBSSD on tmm0: palette 2")
    _assert_fault(u, lambda: u.top4bssd(8, z, z), UDFault, r"tile register 8 does not exist")
    p1 = _unit(palette=1)
    _assert_fault(
        p1, lambda: p1.top4bssd(0, z, z), UDFault, r"#UD in TOP4BSSD on tmm0: TOP4BSSD needs palette 2 \(ACE\)"
    )
    _assert_fault(p1, lambda: p1.bsrinit(), UDFault, r"#UD in BSRINIT: BSRINIT needs palette 2 \(ACE\); palette 1")
    _assert_fault(p1, lambda: p1.tilemovrow(0, z, 0), UDFault, r"#UD in TILEMOVROW on tmm0: TILEMOVROW needs palette 2")
    fresh = TileUnit()
    _assert_fault(fresh, lambda: fresh.top4mxhf8ps(0, z, z, 0), UDFault, r"tiles are not configured")


#: The palette-2 intrinsics of clang's and GCC's acev1intrin.h (LLVM's
#: clang/lib/Headers/acev1intrin.h), besides the outer products.
ACE_STATE_INTRINSICS = (
    "_tile_ace_loadconfig _tile_ace_storeconfig _tile_ace_release _tile_ace_zero _tile_insertrow "
    "_tile_insertcol _tile_extractrow _bsr0_init _bsr0_insertfull _bsr0_inserth _bsr0_insertl "
    "_bsr0_extracth _bsr0_extractl"
).split()


def test_c_names_follow_acev1intrin_h():
    names = [I[m].intrinsic for m in ("TOP4BSSD", "TOP4BSUD", "TOP4BUSD", "TOP4BUUD", "TOP2BF16PS", "TOP4MXBSSPS")]
    assert names == [
        "_tile_op4bssd_epi32",
        "_tile_op4bsud_epi32",
        "_tile_op4busd_epi32",
        "_tile_op4buud_epi32",
        "_tile_op2bf16_ps",
        "_tile_op4mxbss_ps",
    ]
    for name in names + ACE_STATE_INTRINSICS:
        assert name in intrinsics.__all__ and callable(getattr(intrinsics, name)), name


def test_palette2_state_through_the_c_intrinsics():
    """Each palette-2 intrinsic does what its TileUnit instruction does, on the default unit."""
    u = intrinsics.reset()
    with pytest.raises(UDFault, match="needs palette 2"):
        intrinsics._tile_insertrow(0, np.zeros(64, np.uint8), 0)  # unconfigured: #UD
    intrinsics._tile_ace_loadconfig(P2)
    assert intrinsics._tile_ace_storeconfig()[0] == 2
    row = np.arange(64, dtype=np.uint8)
    intrinsics._tile_insertrow(3, row, 5)
    assert (u.tiles[3, 5] == row).all() and not u.tiles[3, [4, 6]].any()
    got = intrinsics._tile_extractrow(3, 5)
    assert got.dtype == np.uint8 and (got == row).all()
    got[0] = 99  # a new register, not a view of the tile
    assert u.tiles[3, 5, 0] == 0
    col = np.arange(100, 116, dtype=np.uint32)
    intrinsics._tile_insertcol(4, col, 2)
    assert (u.tile(4, np.uint32)[:, 2] == col).all()
    intrinsics._tile_ace_zero(3)
    assert not u.tiles[3].any()
    h, low = np.full(64, 0x70, np.uint8), np.full(64, 0x90, np.uint8)
    intrinsics._bsr0_insertfull(h, low)
    assert (intrinsics._bsr0_extracth() == h).all() and (intrinsics._bsr0_extractl() == low).all()
    intrinsics._bsr0_inserth(low)
    intrinsics._bsr0_insertl(h)
    assert (u.bsr[0] == low).all() and (u.bsr[1] == h).all()
    intrinsics._bsr0_init()
    assert (u.bsr == 0x7F).all()
    assert u.counters.instructions["bsrmovf"] == 1 and u.counters.instructions["tilemovrow"] == 2
    intrinsics._tile_ace_release()
    with pytest.raises(UDFault):
        intrinsics._bsr0_init()


def test_outer_products_on_the_unit_and_intrinsics():
    """The worked examples through the tile API: tile 0 holds C (dword 0 = C in), zA and zB the
    dwords, bsr0 row 0's and column 0's scales."""
    for name, mnemonic, a_dw, b_dw, cin, out in INT:
        u = intrinsics.reset()
        u.ldtilecfg(P2)
        u.tilemovcol(0, np.array([cin] + [0] * 15, np.uint32), 0)
        getattr(intrinsics, I[mnemonic].intrinsic)(0, dword_zmm(a_dw), dword_zmm(b_dw))
        assert u.tile(0, np.uint32)[0, 0] == out, name
    for name, mnemonic, a_dw, b_dw, sa, sb, cin, out in MX:
        u = intrinsics.reset()
        u.ldtilecfg(P2)
        h, l = np.full(64, 0x7F, np.uint8), np.full(64, 0x7F, np.uint8)
        h[0], l[0] = sa, sb
        u.bsrmovf(0, h, l)
        u.tilemovcol(0, np.array([cin] + [0] * 15, np.uint32), 0)
        getattr(intrinsics, I[mnemonic].intrinsic)(0, dword_zmm(a_dw), dword_zmm(b_dw), 0)
        assert u.tile(0, np.uint32)[0, 0] == out, name  # NaNs bit for bit too
        assert u.counters.macs == 16 * 16 * 4
    for name, a_dw, b_dw, cin, outs in TOP2:
        for reading, out in outs.items():
            u = _unit()
            u.tilemovcol(0, np.array([cin] + [0] * 15, np.uint32), 0)
            u.top2bf16ps(0, dword_zmm(a_dw), dword_zmm(b_dw), ace_top2bf16=reading)
            assert u.tile(0, np.uint32)[0, 0] == out, (name, reading)


def test_mx4_mx5_scale_placement_switches():
    z = dword_zmm(0x38, 0x38)
    u = _unit()
    h = np.full(64, 0x7F, np.uint8)
    h[0] = 0x80
    u.bsrmovh(0, h)
    u.top4mxhf8ps(0, z, z, 0)  # MX-4
    t = u.tile(0, np.uint32)
    assert t[0, 1] == 0x40000000 and t[1, 0] == 0x3F800000
    u.tilezero(0)
    u.top4mxhf8ps(0, z, z, 0, ace_bsr_a_half="low")  # MX-4 swapped
    t = u.tile(0, np.uint32)
    assert t[0, 1] == 0x3F800000 and t[1, 0] == 0x40000000
    h = np.full(64, 0x7F, np.uint8)
    h[1] = 0x80
    u.bsrmovh(0, h)
    for switches, out in [
        ({}, 0x40000000),  # MX-5
        ({"ace_scale_imm_fields": "A=[5:4],B=[1:0]"}, 0x3F800000),
        ({"ace_bsr_a_half": "low"}, 0x3F800000),
    ]:
        u.tilezero(0)
        u.top4mxhf8ps(0, z, z, 0x01, **switches)
        assert u.tile(0, np.uint32)[0, 0] == out, switches
    # Reserved imm8 bits: ignored (Bochs) or #UD; which bits are reserved depends on the fields.
    u.tilezero(0)
    u.top4mxhf8ps(0, z, z, 0x80)
    assert u.tile(0, np.uint32)[0, 0] == 0x3F800000
    _assert_fault(
        u,
        lambda: u.top4mxhf8ps(0, z, z, 0x80, ace_imm_reserved="fault"),
        UDFault,
        r"#UD in TOP4MXHF8PS on tmm0: imm8 0x80 sets reserved bits",
    )
    u.top4mxhf8ps(0, z, z, 0x19, ace_imm_reserved="fault")  # A=[1:0], B=[4:3] only
    _assert_fault(
        u,
        lambda: u.top4mxhf8ps(0, z, z, 0x19, ace_imm_reserved="fault", ace_scale_imm_fields="A=[5:4],B=[1:0]"),
        UDFault,
        r"imm8 0x19 sets reserved bits",
    )
    with pytest.raises(ValueError, match=r"imm8 must be an integer in \[0, 255\], got 256"):
        u.top4mxhf8ps(0, z, z, 256)
    with pytest.raises(ValueError, match=r"ace_fp8_specials='x' is not one of"):
        u.top4mxbf8ps(0, z, z, 0, ace_fp8_specials="x")
    with pytest.raises(ValueError, match=r"switch 'ace_fp8_specials' does not apply to TOP4MXBSSPS"):
        u.top4mxbssps(0, z, z, 0, ace_fp8_specials="ieee_like")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'imm'"):
        u.top4bssd(0, z, z, imm=1)


def test_vector_loads_are_counted_and_checked():
    u = intrinsics.reset()
    buf = np.arange(128, dtype=np.uint8)
    z = intrinsics._mm512_loadu_si512(buf, 64)
    assert (z == np.arange(64, 128)).all() and u.counters.vector_loads == 1 and u.counters.bytes_loaded == 64
    with pytest.raises(tilegemm.amx.PFFault, match=r"rows reach bytes \[96, 160\)"):
        intrinsics._mm512_loadu_si512(buf, 96)
    intrinsics._mm512_storeu_si512(buf, 0, z)
    assert (buf[:64] == np.arange(64, 128)).all() and u.counters.bytes_stored == 64


# -- the seed's 2x2 on ACE -----------------------------------------------------------------------------

PORTS = [ace_seed.gemm_2x2, ace_seed.gemm_2x4]


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("dtype", ["s8u8", "bf16", "mxfp8_e4m3", "mxfp8_e5m2_e4m3", "mxint8"])
def test_ports_match_matmul(port, dtype):
    instr = instructions.PROFILES["ace"].dtypes[dtype]
    rng = np.random.default_rng(len(dtype))
    for m, n, k in [(32, 64, 64), (17, 33, 47), (5, 70, 131)]:
        a, b = instr.sample(m, k, n, rng)
        scales = None
        if instr.scale_block:
            blocks = -(-k // 32)
            scales = (
                rng.integers(0x70, 0x90, (m, blocks)).astype(np.uint8),
                rng.integers(0x70, 0x90, (blocks, n)).astype(np.uint8),
            )
        want = tilegemm.matmul(a, b, dtype, isa="ace", scales=scales)
        assert_bits(port(a, b, dtype, scales=scales), want, f"{port.__name__} {dtype} {m},{n},{k}")


def test_port_scale_placement_changes_no_bit():
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(s).astype(ml_dtypes.float8_e4m3fn) for s in ((20, 200), (200, 40)))
    scales = (rng.integers(0x70, 0x90, (20, 7)).astype(np.uint8), rng.integers(0x70, 0x90, (7, 40)).astype(np.uint8))
    want = tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=scales)
    for sw in ({"ace_bsr_a_half": "low"}, {"ace_scale_imm_fields": "A=[5:4],B=[1:0]"}):
        assert_bits(ace_seed.gemm_2x2(a, b, "mxfp8_e4m3", scales, **sw), want, str(sw))


@pytest.mark.parametrize("port,R,C", [(ace_seed.gemm_2x2, 2, 2), (ace_seed.gemm_2x4, 2, 4)])
def test_port_counters(port, R, C):
    """Per outer-product step, R zA and C zB loads for R*C outer products; for MX one BSRMOVF (two
    zmm loads) every 4 / max(R, C) blocks of 32."""
    c = ace_seed.count(port, 32, 16 * C, 128, "int8")
    steps = 128 // 4
    assert c.outer_products == R * C * steps and c.vector_loads == (R + C) * steps
    assert c.bytes_loaded / c.macs == 64 * (R + C) / (R * C * 16 * 16 * 4)
    c = ace_seed.count(port, 32, 16 * C, 128, "mxfp8_e4m3")
    bsr_loads = 2 * (128 // 32) // (4 // max(R, C))
    assert c.vector_loads == (R + C) * steps + bsr_loads and c.instructions["bsrmovf"] == bsr_loads // 2
    with pytest.raises(ValueError, match="3x3 needs 9 accumulator tiles; ACE has 8"):
        ace_seed.gemm_blocked(np.ones((4, 4)), np.ones((4, 4)), "bf16", 3, 3)

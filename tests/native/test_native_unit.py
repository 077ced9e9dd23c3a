"""``TileUnit(native=True)``: the programs that run each tile instruction on real registers.

On this CPU the programs are compiled and, through the dry run, executed with the tile unit
emulated (``tilegemm.native.dryrun``): that runs their register round trip and addressing,
not the silicon. Where the CPU has AMX, the seed ports run natively as well.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits

import tilegemm
from tilegemm import native
from tilegemm.amx import TileConfig, TileUnit, UDFault, intrinsics, seed
from tilegemm.native import dryrun, jit
from tilegemm.native.unit import NativeTiles, unit_ir

I = tilegemm.instructions.INSTRUCTIONS
HAS_AMX = "amx_tile" in native.this_host().flags


def _dry_unit() -> TileUnit:
    u = TileUnit()
    u._native = NativeTiles(dryrun.DRY)
    return u


@pytest.mark.parametrize("port", [seed.gemm_1x1, seed.gemm_2x2, seed.gemm_2x2_resident])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "u8s8"])
def test_seed_ports_through_the_native_programs(port, dtype, monkeypatch):
    """The seed's kernels, unchanged, on a unit whose every data instruction and multiply runs
    the native program (dry run): the emulation's bits, and the same counters."""
    rng = np.random.default_rng(4)
    instr = tilegemm.instructions.resolve("amx", dtype)[2]
    a, b = instr.sample(40, 2 * instr.k_step + 3, 24, rng)
    want = tilegemm.matmul(a, b, dtype)
    emulated = intrinsics.reset()
    assert_bits(port(a, b, dtype), want, "emulated unit")
    u = _dry_unit()
    monkeypatch.setattr(intrinsics, "unit", u)
    assert_bits(port(a, b, dtype), want, f"{port.__name__} on the native programs (dry run)")
    assert u.native and u.counters == emulated.counters


def test_each_instruction_restores_and_saves_every_configured_register():
    u = _dry_unit()
    u.ldtilecfg(TileConfig(rows=(2, 0, 3) + (0,) * 5, colsb=(8, 0, 12) + (0,) * 5))
    mem = np.arange(64, dtype=np.uint8)
    u.tileloadd(2, mem, 4, 16)
    n = dryrun.last_session().counters
    # LDTILECFG, the two configured registers in, the load, both out, TILERELEASE.
    assert n == {"ldtilecfg": 1, "tileloadd": 3, "tilestored": 2, "tilerelease": 1}
    assert (u.tile(2) == mem[[4 + 16 * r + c for r in range(3) for c in range(12)]].reshape(3, 12)).all()
    assert not u.tiles[2, 3:].any() and not u.tiles[2, :, 12:].any()
    out = np.zeros(64, np.uint8)
    u.tilestored(2, out, 0, 12)
    assert (out[:36] == u.tile(2).ravel()).all() and not out[36:].any()
    u.tilezero(2)
    assert not u.tiles.any()


def test_faults_are_checked_before_anything_runs():
    u = _dry_unit()
    before = dryrun.last_session()
    with pytest.raises(UDFault, match="tiles are not configured"):
        u.tilezero(0)
    u.ldtilecfg(TileConfig(rows=(1,) * 3 + (0,) * 5, colsb=(4,) * 3 + (0,) * 5))
    with pytest.raises(UDFault, match="three distinct tiles"):
        u.tdpbf16ps(0, 0, 1)
    assert dryrun.last_session() is before  # no native program ran


def test_unit_programs_compile_to_tile_code():
    text = jit.assembly(
        unit_ir(("dp", I["TDPBUSD"], 0, 5, 7), "u"), "graniterapids", "+amx-tile,+amx-int8,+amx-bf16,+amx-fp16"
    )
    assert "tdpbusd\t%tmm7, %tmm5, %tmm0" in text and "ldtilecfg" in text and "tilerelease" in text
    assert text.count("tileloadd") == 8 and text.count("tilestored") == 8


def test_native_unit_on_this_cpu():
    """With AMX: the seed's 2x2 on the real registers gives the emulation's bits. Without:
    TileUnit(native=True) and intrinsics.reset(native=True) name what is missing."""
    if not HAS_AMX:
        with pytest.raises(native.NativeUnavailable, match=r"TileUnit\(native=True\) needs this CPU's tile registers"):
            TileUnit(native=True)
        with pytest.raises(native.NativeUnavailable, match="lacks amx_tile"):
            intrinsics.reset(native=True)
        return
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((40, 70)), rng.standard_normal((70, 24))
    intrinsics.reset(native=True)
    try:
        assert_bits(seed.gemm_2x2(a, b, "bf16"), tilegemm.matmul(a, b), "native TileUnit")
    finally:
        intrinsics.reset()

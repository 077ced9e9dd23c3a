"""The native tile GEMM's own machine code, run on this host with the tile unit emulated.

``tilegemm.native.dryrun.DRY`` compiles the native program for this CPU with every tile
instruction turned into a call into ``tilegemm.amx.TileUnit`` (which faults where the SDM
faults). What runs for real here: the job loop, addresses, strides, configurations, the K steps
and the short last step, accumulation, batches and threads. What does not: the silicon's
arithmetic (the multiplies are the emulator's). So these tests show the native programs valid
and exact by construction; they are not a native run.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_DTYPES, SEED_TILINGS, assert_bits, instr, operands

import tilegemm
from tilegemm import dispatch
from tilegemm.amx import PFFault, UDFault
from tilegemm.native import dryrun, gemm, program

DRY = dryrun.DRY


def _cases():
    for dtype in ALL_DTYPES:
        if gemm.generator(instr(dtype)) is None:  # no native program (complex FP16 pairs)
            continue
        for tiling in dispatch.TILINGS:
            if tiling in SEED_TILINGS or dtype in ("bf16", "s8u8"):
                yield dtype, tiling


@pytest.mark.parametrize("dtype,tiling", list(_cases()))
def test_dry_run_matches_the_emulation(dtype, tiling):
    """One whole superblock plus partial edges, K below, above and at whole steps, a batch with
    a broadcast A, accumulation, two threads: bit for bit the emulation's result."""
    i = instr(dtype)
    rows, cols = dispatch.parse_tiling(tiling)
    M, N = 16 * rows + 5, 16 * cols + 3
    rng = np.random.default_rng([rows, cols, len(dtype)])
    ks = (1, i.k_step + 1, 2 * i.k_step) if tiling in SEED_TILINGS else (i.k_step + 1,)
    for K in ks:
        a, b = operands(dtype, (M, K), (2, K, N), rng)
        want = tilegemm.matmul(a, b, dtype, tiling)
        got = tilegemm.matmul(a, b, dtype, tiling, backend=DRY, threads=2)
        assert_bits(got, want, f"dry run {dtype} {tiling} M x N x K = {M} x {N} x {K}")
        c0 = (rng.standard_normal((2, M, N)) * 8).astype(i.acc)
        out, ref = c0.copy(), c0.copy()
        tilegemm.matmul(a, b, dtype, tiling, out=ref, accumulate=True)
        tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, backend=DRY)
        assert_bits(out, ref, f"dry run {dtype} {tiling} accumulate, K = {K}")


def test_dry_run_counts_the_resident_2x2():
    """Whole 2x2 superblocks load 4 tiles per 4 multiplies: both B tiles stay resident."""
    a, b = operands("bf16", (64, 96), (96, 64), np.random.default_rng(0))
    tilegemm.matmul(a, b, "bf16", "2x2", backend=DRY, threads=1)
    n = dryrun.last_session().counters
    # 4 superblocks x 3 K steps x (4 loads, 4 multiplies); each superblock zeroes and stores 4;
    # they share one configuration, loaded once.
    assert n["tdpbf16ps"] == 48 and n["tileloadd"] == 48
    assert n["tilezero"] == 16 and n["tilestored"] == 16 and n["ldtilecfg"] == 1


def test_dry_run_short_last_step_reconfigures():
    """K = 33: one full step, then the accumulators are stored, the tail configuration loaded,
    the accumulators loaded back, and one step of K4 = 1 runs; the next superblock loads the
    main configuration again."""
    a, b = operands("bf16", (32, 33), (33, 32), np.random.default_rng(1))
    tilegemm.matmul(a, b, "bf16", "2x2", backend=DRY, threads=1)
    n = dryrun.last_session().counters
    assert n["ldtilecfg"] == 2 and n["tilestored"] == 8 and n["tileloadd"] == 4 + 4 + 4
    a, b = operands("bf16", (64, 33), (33, 32), np.random.default_rng(1))
    tilegemm.matmul(a, b, "bf16", "2x2", backend=DRY, threads=1)
    assert dryrun.last_session().counters["ldtilecfg"] == 4
    unit = next(iter(dryrun.last_session().units.values()))
    assert unit.config is None  # released at the end


def test_dry_run_catches_a_wrong_tail(monkeypatch):
    """A program that forgets the short last step (a full step where K4 = 2 is due) reads a
    whole 64-byte row of A where its rows hold 8 bytes: a #PF, as on the hardware."""
    a, b = operands("bf16", (3, 3), (3, 2), np.random.default_rng(3))
    real = gemm.k_steps
    monkeypatch.setattr(gemm, "k_steps", lambda i, K: real(i, 32 * -(-K // 32)))
    with pytest.raises(
        PFFault, match=r"#PF in TILELOADD on tmm1: rows reach bytes \[0, 80\) but memory holds \[0, 24\)"
    ):
        tilegemm.matmul(a, b, "bf16", backend=DRY)


def test_dry_run_faults_like_the_hardware(monkeypatch):
    """A job table pointing past A is a #PF; a configuration with the wrong B rows is a #UD;
    the run raises the first fault after the machine code returns."""
    a, b = operands("bf16", (20, 40), (40, 20), np.random.default_rng(2))
    real = gemm.tile_jobs

    def past_a(*args):
        jobs, cfgs = real(*args)
        jobs[-1, 1] += 10**6
        return jobs, cfgs

    monkeypatch.setattr(gemm, "tile_jobs", past_a)
    with pytest.raises(PFFault, match=r"#PF in TILELOADD on tmm1: address 0x[0-9a-f]+ lies outside every operand"):
        tilegemm.matmul(a, b, "bf16", backend=DRY)

    def bad_config(*args):
        jobs, cfgs = real(*args)
        cfgs[:, 48 + 2] = 3  # TMM2 (B of the edge tiles) with 3 rows where A's colsb / 4 = 16
        return jobs, cfgs

    monkeypatch.setattr(gemm, "tile_jobs", bad_config)
    with pytest.raises(UDFault, match=r"#UD in TDPBF16PS on tmm2: B has 3 rows but A's colsb / 4 = 16"):
        tilegemm.matmul(a, b, "bf16", backend=DRY)


def test_dry_run_is_asked_for_by_name_only():
    """``auto`` never picks the dry run, and it runs tile instructions only."""
    with pytest.raises(ValueError, match="runs tile instructions only, not VDPBF16PS"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), isa="avx512", backend=DRY)
    assert repr(DRY) == "tilegemm.native.dryrun.DRY" and DRY is not gemm.HOST
    assert dryrun.lower("llvm.x86.tdpbf16ps") == "tilegemm.dry.tdpbf16ps"
    assert dryrun.lower("llvm.memcpy.p0.p0.i64") == "llvm.memcpy.p0.p0.i64"
    assert "tilegemm.dry.tileloadd64" in program.gemm_ir(instr("bf16"), program.plan(1, 1), "g", dryrun.lower)

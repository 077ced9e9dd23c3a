"""ACE outer products (isa="ace"): the reference against hand-worked examples and independent
oracles, then matmul (both kernel paths), the switches and the scales keyword against it."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from ace_examples import INT, MX, MX_SWITCHES, TOP2, dword_zmm, f32, g1, g2, g3, g4, gemm_operands
from conftest import assert_bits
from fpenv import DAZ, FTZ, X86, mxcsr_flags
from oracle import _round24

import tilegemm
from tilegemm import instructions, plan, reference
from tilegemm.amx import ace_seed
from tilegemm.reference import ace as ref

I = instructions.INSTRUCTIONS
ACE = instructions.PROFILES["ace"]
MX_DTYPES = tuple(d for d, i in ACE.dtypes.items() if i.scale_block)
FP8_MX = tuple(d for d in MX_DTYPES if ACE.dtypes[d].a.minifloat is not None)
ALL = np.arange(256, dtype=np.uint8)


def dtype_of(mnemonic):
    return instructions.find(I[mnemonic])[1]


def tile(c00=0, dtype=np.float32):
    t = np.zeros((16, 16), dtype)
    t.view(np.uint32)[0, 0] = c00
    return t


def run_matmul(a, b, dtype, c00, scales=None, tiling="2x2", **switches):
    out = np.array([[c00]], np.uint32).view(ACE.dtypes[dtype].acc)
    tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, isa="ace", scales=scales, **switches)
    return out


@pytest.fixture(params=["fast", "exact"])
def forced(request, monkeypatch):
    """Every kernel path: the proof's verdict forced to True where it holds for the examples here
    (single steps), or the exact entry."""
    if request.param == "exact":
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args, **kw: False)
    return request.param


# -- the instructions, one tile at a time: the worked examples -----------------------------------------


@pytest.mark.parametrize("case", INT, ids=[f"{c[0]}-{c[1]}" for c in INT])
def test_int_examples(case, forced):
    name, mnemonic, a_dw, b_dw, cin, out = case
    instr = I[mnemonic]
    got = ref.top4_int(tile(cin, np.int32), dword_zmm(a_dw), dword_zmm(b_dw), instr.a, instr.b)
    assert got.view(np.uint32)[0, 0] == out and not got.view(np.uint32).ravel()[1:].any(), name
    a, b = gemm_operands(a_dw, b_dw)
    a, b = a.view(instr.a.storage), b.view(instr.b.storage)
    dtype = dtype_of(mnemonic)
    want = np.array([[out]], np.uint32).view(np.int32)
    assert_bits(
        reference.matmul(a, b, dtype, c=want * 0 + np.int32(np.uint32(cin).view(np.int32)), isa="ace"), want, name
    )
    assert_bits(run_matmul(a, b, dtype, cin), want, name)


@pytest.mark.parametrize("case", MX, ids=[f"{c[0]}-{c[1]}-{c[4]:02x}" for c in MX])
def test_mx_examples(case, forced):
    name, mnemonic, a_dw, b_dw, sa, sb, cin, out = case
    instr = I[mnemonic]
    h = np.full(64, 0x7F, np.uint8)
    l = np.full(64, 0x7F, np.uint8)
    h[0], l[0] = sa, sb  # row 0's and column 0's group-0 scale
    got = ref.top4mx(tile(cin), dword_zmm(a_dw), dword_zmm(b_dw), h, l, 0, instr.a, instr.b)
    assert got.view(np.uint32)[0, 0] == out, f"{name}: {got.view(np.uint32)[0, 0]:#x}"
    a, b = gemm_operands(a_dw, b_dw)
    scales = (np.uint8([[sa]]), np.uint8([[sb]]))
    want = np.array([[out]], np.uint32).view(np.float32)
    dtype = dtype_of(mnemonic)
    got = reference.matmul(a, b, dtype, c=np.array([[cin]], np.uint32).view(np.float32), isa="ace", scales=scales)
    assert got.view(np.uint32)[0, 0] == out, name  # the reference spells NaNs out too
    for tiling in ("1x1", "2x3"):
        assert_bits(run_matmul(a, b, dtype, cin, scales, tiling), want, f"{name} {tiling}")


def test_mx_example_rows_and_columns_read_their_own_scales():
    """MX-4: all 16 dwords of zA and zB are 1.0 (0x38); H.byte0 = 0x80 scales row 0 only."""
    instr = I["TOP4MXHF8PS"]
    z = dword_zmm(0x38, 0x38)
    h = np.full(64, 0x7F, np.uint8)
    l = np.full(64, 0x7F, np.uint8)
    h[0] = 0x80
    got = ref.top4mx(np.zeros((16, 16), np.float32), z, z, h, l, 0, instr.a, instr.b).view(np.uint32)
    assert got[0, 1] == 0x40000000 and got[1, 0] == 0x3F800000 and (got[0] == 0x40000000).all()
    # Swapped halves (GCC's reading): H holds B's scales, so column 0 is scaled.
    got = ref.top4mx(np.zeros((16, 16), np.float32), z, z, h, l, 0, instr.a, instr.b, ace_bsr_a_half="low")
    assert got.view(np.uint32)[0, 1] == 0x3F800000 and got.view(np.uint32)[1, 0] == 0x40000000
    # MX-5: H.byte1 = 0x80 is row 0's group 1, which imm8 0x01 selects.
    h = np.full(64, 0x7F, np.uint8)
    h[1] = 0x80
    got = ref.top4mx(np.zeros((16, 16), np.float32), z, z, h, l, 0x01, instr.a, instr.b).view(np.uint32)
    assert got[0, 0] == 0x40000000 and got[1, 0] == 0x3F800000
    for sw in ({"ace_scale_imm_fields": "A=[5:4],B=[1:0]"}, {"ace_bsr_a_half": "low"}):
        got = ref.top4mx(np.zeros((16, 16), np.float32), z, z, h, l, 0x01, instr.a, instr.b, **sw)
        assert got.view(np.uint32)[0, 0] == 0x3F800000, sw


@pytest.mark.parametrize("switch,value,example,mnemonic,out", MX_SWITCHES)
def test_mx_switch_examples(switch, value, example, mnemonic, out, forced):
    _, _, a_dw, b_dw, sa, sb, cin, default = next(c for c in MX if c[0] == example and c[1] == mnemonic)
    instr = I[mnemonic]
    h = np.full(64, 0x7F, np.uint8)
    l = np.full(64, 0x7F, np.uint8)
    h[0], l[0] = sa, sb
    got = ref.top4mx(tile(cin), dword_zmm(a_dw), dword_zmm(b_dw), h, l, 0, instr.a, instr.b, **{switch: value})
    assert got.view(np.uint32)[0, 0] == out
    a, b = gemm_operands(a_dw, b_dw)
    scales = (np.uint8([[sa]]), np.uint8([[sb]]))
    dtype = dtype_of(mnemonic)
    c = np.array([[cin]], np.uint32).view(np.float32)
    got = reference.matmul(a, b, dtype, c=c, isa="ace", scales=scales, **{switch: value})
    assert got.view(np.uint32)[0, 0] == out
    assert reference.matmul(a, b, dtype, c=c, isa="ace", scales=scales).view(np.uint32)[0, 0] == default
    assert_bits(run_matmul(a, b, dtype, cin, scales, **{switch: value}), f32(out).reshape(1, 1), switch)


@pytest.mark.parametrize("case", TOP2, ids=[c[0] for c in TOP2])
@pytest.mark.parametrize("reading", ["sde", "spec", "rs", "gcc_chain"])
def test_top2bf16_examples(case, reading, forced):
    name, a_dw, b_dw, cin, outs = case
    out = outs[reading]
    got = ref.top2bf16(tile(cin), dword_zmm(a_dw), dword_zmm(b_dw), ace_top2bf16=reading)
    assert got.view(np.uint32)[0, 0] == out, f"{name} {reading}: {got.view(np.uint32)[0, 0]:#x}"
    a, b = gemm_operands(a_dw, b_dw, group=2)
    a, b = a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)
    c = np.array([[cin]], np.uint32).view(np.float32)
    sw = {} if reading == "sde" else {"ace_top2bf16": reading}
    assert reference.matmul(a, b, "bf16", c=c, isa="ace", **sw).view(np.uint32)[0, 0] == out
    assert_bits(run_matmul(a, b, "bf16", cin, **sw), f32(out).reshape(1, 1), f"{name} {reading}")


# -- the GEMM mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize("example", [g1, g3], ids=["G-1", "G-3"])
def test_gemm_steps_round_each_step(example, forced):
    a, b, scales, out = example()
    want = f32(out).reshape(1, 1)
    assert reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=scales).view(np.uint32)[0, 0] == out
    for tiling in tilegemm.TILINGS:
        assert_bits(tilegemm.matmul(a, b, "mxfp8_e4m3", tiling, isa="ace", scales=scales), want, tiling)


def test_g1_one_rounding_per_block_would_differ():
    # The same values all inside block 0 (k = 0, 4, 8, 12, the last one scaled 2 by its value):
    # still one rounding per step, so 2^16 + 2^-7 once more: the mapping, not the block, decides.
    a, b, _, _ = g1()
    a2, b2 = a[:, :16].copy(), b[:16].copy()
    a2[0, 12], b2[12, 0] = 0x20, 0x18  # 2^-3 * 2^-4 = 2^-7
    assert reference.matmul(a2, b2, "mxfp8_e4m3", isa="ace")[0, 0] == np.float32(2.0**16 + 2.0**-7)


def test_g2_padding_step_runs(forced):
    a, b, cin, out = g2()
    a, b = a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)
    assert reference.matmul(a, b, "bf16", c=f32(cin).reshape(1, 1), isa="ace").view(np.uint32)[0, 0] == out
    got = run_matmul(a, b, "bf16", cin)
    assert got.view(np.uint32)[0, 0] == out


def test_g3_negative_nan_scale_result_propagates():
    a, b, scales, _ = g3()
    got = reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=scales, ace_e8m0_nan_result="0xFFC00000")
    assert got.view(np.uint32)[0, 0] == 0xFFC00000


def test_g4_mxint8(forced):
    a, b, scales, (out0, out1) = g4()
    want = np.array([[out0], [out1]], np.uint32).view(np.float32)
    assert_bits(reference.matmul(a, b, "mxint8", isa="ace", scales=scales), want, "G-4 reference")
    for tiling in ("1x1", "2x2"):
        assert_bits(tilegemm.matmul(a, b, "mxint8", tiling, isa="ace", scales=scales), want, f"G-4 {tiling}")


@pytest.mark.parametrize("dtype", MX_DTYPES)
def test_bsr_placement_and_imm8_fields_change_no_gemm_bit(dtype):
    """The GEMM reference places each scale where the instruction reads it, under every reading of
    ace_bsr_a_half and ace_scale_imm_fields: the bits agree (K = 161: 6 blocks, two BSR loads)."""
    instr = ACE.dtypes[dtype]
    rng = np.random.default_rng(len(dtype))
    a, b = instr.sample(18, 161, 17, rng)
    a, b = instr.a.to_codes(a, "a", dtype), instr.b.to_codes(b, "b", dtype)
    sa = rng.integers(0x70, 0x90, (18, 6)).astype(np.uint8)
    sb = rng.integers(0x70, 0x90, (6, 17)).astype(np.uint8)
    c = np.zeros((18, 17), np.float32)
    base = ref.top4mx_gemm_tiles(instr, a, b, c, scales=(sa, sb))
    assert_bits(base, reference.matmul(a, b, dtype, isa="ace", scales=(sa, sb)), "default")
    for half in ("high", "low"):
        for fields in ("A=[1:0],B=[4:3]", "A=[5:4],B=[1:0]"):
            got = ref.top4mx_gemm_tiles(
                instr, a, b, c, scales=(sa, sb), ace_bsr_a_half=half, ace_scale_imm_fields=fields
            )
            assert_bits(got, base, f"{half} {fields}")


# -- exhaustive single steps against an independent oracle -------------------------------------------


def _value(codes, fmt, ieee=False):
    """Independent decode, by bit fields: E4M3 (bias 7) and E5M2 (bias 15) by their formula for every
    code (ieee: ml_dtypes' NaN and infinity), MXINT8 as a signed byte / 64."""
    c = np.asarray(codes, np.int64)
    if fmt.minifloat is None:
        return np.asarray(codes, np.uint8).view(np.int8).astype(np.float64) / 64
    if ieee:
        return (
            np.asarray(codes, np.uint8)
            .view({"hf8": ml_dtypes.float8_e4m3fn, "bf8": ml_dtypes.float8_e5m2}[fmt.name])
            .astype(np.float64)
        )
    mbits, bias = (3, 7) if fmt.name == "hf8" else (2, 15)
    e = (c >> mbits) & ((1 << (7 - mbits)) - 1)
    m = c & ((1 << mbits) - 1)
    mag = np.where(e > 0, (1 + m / 2**mbits) * 2.0 ** (e - bias), m / 2**mbits * 2.0 ** (1 - bias))
    return np.where(c & 0x80, -mag, mag)


def _rne32_ftz(v):
    """RNE to 24 bits with an unbounded exponent, then flush below 2^-126 and overflow to infinity,
    of exact binary64 values (independent of tilegemm: numpy's float32 rounding is right for normal
    results; below 2^-126 only whether 24-bit rounding reaches 2^-126 matters)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = v.astype(np.float32)
        tiny = np.abs(v) < 2.0**-126
        up = np.abs(v) >= 2.0**-126 - 2.0**-151  # the 24-bit midpoint below 2^-126 ties to even: up
        r = np.where(tiny, np.where(up, np.copysign(np.float32(2.0**-126), v), np.copysign(np.float32(0), v)), r)
    return r.astype(np.float32)


def _add_ftz(c, s):
    """C + s for binary32 C and s: DAZ on C, exact IEEE add (a denormal IEEE result is exact, so
    flushing it is the tininess-after-rounding rule)."""
    c = np.where((np.abs(c) < 2.0**-126) & (c != 0), np.copysign(np.float32(0), c), c).astype(np.float32)
    with np.errstate(all="ignore"):
        r = (c + s).astype(np.float32)
    return np.where((np.abs(r) < 2.0**-126) & (r != 0), np.copysign(np.float32(0), r), r).astype(np.float32)


def _single_step_oracle(fa, fb, sa, sb, c, ieee=False):
    x = _value(ALL, fa, ieee)[:, None]
    y = _value(ALL, fb, ieee)[None, :]
    with np.errstate(all="ignore"):
        p = x * y * 2.0 ** (int(sa) - 127) * 2.0 ** (int(sb) - 127)  # exact in binary64
        s = _rne32_ftz(np.where(p == 0, 0.0, p))
    out = _add_ftz(c, s)
    if ieee:  # a NaN code, Inf * 0 or +Inf with -Inf: the default NaN (a NaN C is kept, quieted)
        out = np.where(np.isnan(out) & ~np.isnan(c), np.uint32(0xFFC00000).view(np.float32), out)
    if sa == 0xFF or sb == 0xFF:
        out = np.full_like(out, np.nan)  # ace_e8m0_nan_result's default, 0x7FC00000
    return out


SCALE_PAIRS = [
    (0x7F, 0x7F),
    (0x00, 0x7F),
    (0xFE, 0x7F),
    (0x00, 0x00),
    (0xFE, 0xFE),
    (0x01, 0x75),
    (0xFF, 0x7F),
    (0x7F, 0xFF),
]
C_VALUES = [-0.0, 1.0, -3.5, float(f32(0x00000005)), -1e-38, 3e38, -np.inf, np.nan]


@functools.lru_cache(maxsize=None)
def _table(dtype, sa, sb, with_c):
    rng = np.random.default_rng([sa, sb, len(dtype)])
    c = rng.choice(np.float32(C_VALUES), (256, 256)) if with_c else np.zeros((256, 256), np.float32)
    a, b = ALL.reshape(256, 1), ALL.reshape(1, 256)
    scales = (np.full((256, 1), sa, np.uint8), np.full((1, 256), sb, np.uint8))
    return a, b, scales, c, reference.matmul(a, b, dtype, c=c, isa="ace", scales=scales)


@pytest.mark.parametrize("dtype", MX_DTYPES)
@pytest.mark.parametrize("sa,sb", SCALE_PAIRS, ids=[f"{a:02x}-{b:02x}" for a, b in SCALE_PAIRS])
def test_all_code_pairs_one_step(dtype, sa, sb, monkeypatch):
    """Every code pair, K = 1 (one step, three padding products), under a few scale pairs, from C = 0
    and from mixed starting values: reference and both kernels against the oracle."""
    instr = ACE.dtypes[dtype]
    for with_c in (False, True):
        a, b, scales, c, want_ref = _table(dtype, sa, sb, with_c)
        want = _single_step_oracle(instr.a, instr.b, sa, sb, c)
        assert_bits(want_ref, want, f"reference {dtype} C={'mixed' if with_c else 0}")
        for path in ("planned", "exact"):
            # The planner takes the fast body where its proof holds (scales that cannot make a step
            # tiny), the exact one elsewhere; then the exact body for everything.
            if path == "exact":
                monkeypatch.setattr(plan, "fast_path_ok", lambda *args: False)
            out = c.copy()
            tilegemm.matmul(a, b, dtype, "2x2", out=out, accumulate=True, isa="ace", scales=scales)
            assert_bits(out, want, f"{dtype} {path} C={'mixed' if with_c else 0}")


@pytest.mark.parametrize("dtype", FP8_MX)
def test_all_code_pairs_ieee_like(dtype, monkeypatch):
    """ace_fp8_specials="ieee_like": NaN codes and Inf * 0 give NaN, infinities their sign."""
    instr = ACE.dtypes[dtype]
    a, b = ALL.reshape(256, 1), ALL.reshape(1, 256)
    want = _single_step_oracle(instr.a, instr.b, 0x7F, 0x7F, np.zeros((256, 256), np.float32), ieee=True)
    assert_bits(reference.matmul(a, b, dtype, isa="ace", ace_fp8_specials="ieee_like"), want, "reference")
    for forced_fast in (True, False):  # one product a step, at least 2^-32: the fast body is valid too
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args, _f=forced_fast: _f)
        got = tilegemm.matmul(a, b, dtype, isa="ace", ace_fp8_specials="ieee_like")
        assert_bits(got, want, f"{dtype} {'fast' if forced_fast else 'exact'}")


def test_all_int8_pairs_one_step():
    a, b = np.arange(-128, 128, dtype=np.int8).reshape(256, 1), np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    want = a.astype(np.int32) * b.astype(np.int32)
    assert_bits(reference.matmul(a, b, "s8s8", isa="ace"), want, "reference")
    assert_bits(tilegemm.matmul(a, b, "int8", isa="ace"), want, "matmul")


# -- K tails and random data against the reference -----------------------------------------------------


def _mx_operands(dtype, m, k, n, rng, specials=0.02, wide_scales=False):
    instr = ACE.dtypes[dtype]
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(0, 256, (k, n)).astype(np.uint8)
    if instr.a.minifloat is not None:  # mostly moderate values, some extremes
        a = np.where(rng.random((m, k)) < 1 - specials, instr.a.to_codes(rng.standard_normal((m, k)), "a", dtype), a)
        b = np.where(rng.random((k, n)) < 1 - specials, instr.b.to_codes(rng.standard_normal((k, n)), "b", dtype), b)
    nb = -(-k // 32)
    lo, hi = (0x00, 0x100) if wide_scales else (0x70, 0x90)
    sa = rng.integers(lo, hi, (m, nb)).astype(np.uint8)
    sb = rng.integers(lo, hi, (nb, n)).astype(np.uint8)
    return a.astype(np.uint8), b.astype(np.uint8), sa, sb


@pytest.mark.parametrize("dtype", MX_DTYPES)
@pytest.mark.parametrize("k", [1, 31, 32, 33, 65])
def test_k_tails(dtype, k, forced):
    rng = np.random.default_rng([k, len(dtype)])
    a, b, sa, sb = _mx_operands(dtype, 19, k, 18, rng)
    sa[0, 0] = 0xFF  # a NaN scale in row 0's first block
    c = rng.standard_normal((19, 18)).astype(np.float32)
    c[1, :4] = [-0.0, f32(0x80000001), np.inf, np.nan]
    want = reference.matmul(a, b, dtype, c=c, isa="ace", scales=(sa, sb))
    for tiling in ("1x1", "2x2", "2x3"):
        out = c.copy()
        tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, isa="ace", scales=(sa, sb))
        assert_bits(out, want, f"{dtype} K={k} {tiling}")


@pytest.mark.parametrize("dtype", MX_DTYPES)
def test_extreme_scales_and_values(dtype, forced):
    """Scales over the whole E8M0 range (flushes, overflows, NaN) with K spanning several BSR loads."""
    rng = np.random.default_rng([3, len(dtype)])
    a, b, sa, sb = _mx_operands(dtype, 20, 140, 21, rng, specials=0.1, wide_scales=True)
    want = reference.matmul(a, b, dtype, isa="ace", scales=(sa, sb))
    assert_bits(tilegemm.matmul(a, b, dtype, isa="ace", scales=(sa, sb)), want, dtype)


def test_top2bf16_float32_a_rounds_once_and_keeps_denormals(forced):
    """float32 A is rounded to BF16 (ties to even) in the pass that makes its panels, and a value
    that rounds to a BF16 denormal stays one: TOP2BF16PS reads no input as zero. B's column of
    2^100 lifts the denormals' products far above 2^-126. The expected bits come from ml_dtypes'
    rounding."""
    ties = [1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-9), 0.75, 2.0**-100, -3.0]  # two ties, one below
    tiny = [2.0**-130, -3 * 2.0**-133, 3 * 2.0**-134, 0.0, 2.0**-127 * (1 + 2.0**-8), 0.0]  # all denormals
    a = np.float32([ties, tiny, ties[::-1]])
    b = np.ones((6, 3), np.float32)
    b[:, 1] = 2.0**100
    b[:, 2] = np.linspace(-2, 2, 6)
    want = reference.matmul(a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16), "bf16", isa="ace")
    assert want[1, 1] != 0
    assert_bits(tilegemm.matmul(a, b, "bf16", isa="ace"), want, "float32 A")


@pytest.mark.parametrize("reading", ["sde", "spec", "rs", "gcc_chain"])
def test_top2bf16_random_with_denormals(reading, forced):
    rng = np.random.default_rng(len(reading))
    bits = lambda shape: (rng.integers(0, 1 << 16, shape)).astype(np.uint16)  # noqa: E731
    a = np.where(
        rng.random((19, 37)) < 0.7,
        tilegemm.formats.BF16.to_codes(rng.standard_normal((19, 37)), "a", "bf16"),
        bits((19, 37)),
    )
    b = np.where(
        rng.random((37, 18)) < 0.7,
        tilegemm.formats.BF16.to_codes(rng.standard_normal((37, 18)), "b", "bf16"),
        bits((37, 18)),
    )
    a[0, :3] = [0x0001, 0x8003, 0x0080]  # BF16 denormals, kept by the default reading
    c = rng.standard_normal((19, 18)).astype(np.float32)
    c[0, :3] = [f32(0x00000003), -0.0, f32(0x807FFFFF)]
    a, b = a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)
    sw = {} if reading == "sde" else {"ace_top2bf16": reading}
    want = reference.matmul(a, b, "bf16", c=c, isa="ace", **sw)
    for tiling in ("1x1", "2x2"):
        out = c.copy()
        tilegemm.matmul(a, b, "bf16", tiling, out=out, accumulate=True, isa="ace", **sw)
        assert_bits(out, want, f"{reading} {tiling}")


def test_normal_data_takes_the_fast_paths(monkeypatch):
    seen = []
    real = plan.fast_path_ok
    monkeypatch.setattr(plan, "fast_path_ok", lambda *a: seen.append(real(*a)) or seen[-1])
    rng = np.random.default_rng(8)
    for dtype in MX_DTYPES + ("bf16",):
        instr = ACE.dtypes[dtype]
        a, b = instr.sample(33, 70, 17, rng)
        scales = None
        if instr.scale_block:
            scales = (
                rng.integers(0x78, 0x88, (33, 3)).astype(np.uint8),
                rng.integers(0x78, 0x88, (3, 17)).astype(np.uint8),
            )
        assert_bits(
            tilegemm.matmul(a, b, dtype, isa="ace", scales=scales),
            reference.matmul(a, b, dtype, isa="ace", scales=scales),
            dtype,
        )
        assert seen[-1] is True, dtype
    # A scale of 2^-127 puts step results below 2^-126: the exact body.
    a, b = np.full((2, 4), 0x38, np.uint8), np.full((4, 2), 0x38, np.uint8)
    tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(np.uint8([[0], [0]]), None))
    assert seen[-1] is False
    # BF16 denormal input: the exact body (the fast one could meet a caller's DAZ).
    tilegemm.matmul(np.uint16([[1, 0]]).view(ml_dtypes.bfloat16), np.ones((2, 1)), "bf16", isa="ace")
    assert seen[-1] is False


# -- MXINT8 in binary32 (family ace_mx32), and its fallback -------------------------------------------

MXINT8 = ACE.dtypes["mxint8"]


def test_mx32_proof_bounds():
    """Each condition of the binary32 proof on both sides of its edge (ranges: the exponents of the
    scaled values; a value of exponent E is a multiple of 2^(E - 7))."""

    def ok(a, b, c=None):
        return plan.fast_path_ok(MXINT8, a, b, c, "mx32")

    assert ok((-56, 1), (-56, 1)) and not ok((-57, 1), (-56, 1))  # the products' grid: 2^-126
    assert ok((-126, 1), (20, 21)) and not ok((-127, 1), (20, 21))  # a scaled value normal
    assert ok((-40, 127), (-40, -4)) and not ok((-40, 127), (-40, -3))  # partial sums below 2^128
    assert not ok((-40, 128), (-40, -10))  # a scaled value not a binary32 number
    assert ok((-50, 1), (-50, 1), (-103, 0)) and not ok((-50, 1), (-50, 1), (-104, 0))  # C's grid
    assert ok(None, (0, 1)) and ok((0, 1), None)  # every product zero: each step adds +0
    assert not ok(None, (0, 128)) and not ok((0, 128), None)  # ... unless 0 * inf: NaN in binary32


def _int8_edges(m, k, n, rng):
    """Random MXINT8 codes with +-1 and -128 in both operands (the smallest and largest magnitudes)."""
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0, :3], b[:3, 0] = [1, -1, -128], [-1, 1, -128]
    return a, b


@pytest.mark.parametrize(
    "sa,sb,family,path",
    [
        (0x7F, 0x7F, "ace_mx32", "fast"),
        (77, 77, "ace_mx32", "fast"),  # products' grid 2^(-56 - 56 - 14) = 2^-126
        (77, 76, "ace_mx", "fast"),  # one step finer: binary64, whose proof sees the true grid
        (253, 122, "ace_mx32", "fast"),  # -128 * 2^(253 - 133) = -2^127, partial sums below 2^125
        (254, 122, "ace_mx", "fast"),  # -128 * 2^121 is no binary32 number
        (0, 0x7F, "ace_mx", "exact"),  # 2^-133: tiny step results, the exact body
    ],
)
def test_mxint8_runs_in_binary32_where_its_proof_holds(sa, sb, family, path):
    rng = np.random.default_rng([sa, sb])
    a, b = _int8_edges(21, 70, 19, rng)
    scales = (np.full((21, 3), sa, np.uint8), np.full((3, 19), sb, np.uint8))
    c = rng.standard_normal((21, 19)).astype(np.float32)
    want = reference.matmul(a, b, "mxint8", c=c, isa="ace", scales=scales)
    for tiling in ("1x1", "2x2"):
        out = c.copy()
        with plan.recording() as r:
            tilegemm.matmul(a, b, "mxint8", tiling, out=out, accumulate=True, isa="ace", scales=scales)
        assert_bits(out, want, f"{sa:#x} {sb:#x} {tiling}")
        ((name, ran, _),) = r.calls
        assert (name.split("-")[2], ran) == (family, path), name


@pytest.mark.parametrize("side", ["a", "b"])
def test_mxint8_zero_side_beside_a_value_beyond_binary32(side):
    """One side all zero (or nonzero only under NaN scales, which its range skips), the other
    holding -128 at scale 0xFE: -2^128, no binary32 number. The instruction's products are 0;
    0 times a binary32 infinity would be NaN, so the call must leave binary32."""
    zeros, big = np.zeros((2, 64), np.int8), np.full((2, 64), -128, np.int8)
    s_zero, s_big = np.full((2, 2), 0x7F, np.uint8), np.full((2, 2), 0xFE, np.uint8)
    zeros[0, :32], s_zero[0, 0] = 5, 0xFF  # live values only in a block whose scale is NaN
    if side == "a":
        a, b, scales = zeros, big.T.copy(), (s_zero, s_big.T.copy())
    else:
        a, b, scales = big, zeros.T.copy(), (s_big, s_zero.T.copy())
    c = np.float32([[1.0, 2.0], [3.0, 4.0]])
    want = reference.matmul(a, b, "mxint8", c=c, isa="ace", scales=scales)
    out = c.copy()
    with plan.recording() as r:
        tilegemm.matmul(a, b, "mxint8", out=out, accumulate=True, isa="ace", scales=scales)
    assert_bits(out, want, side)
    assert "-ace_mx-" in r.calls[-1][0], r.calls[-1]


def test_mxint8_fine_c_grid_leaves_binary32():
    """A C of 2^-104 puts C + s on a grid below 2^-126: neither fast body's proof holds."""
    a, b = np.ones((2, 4), np.int8), np.ones((4, 2), np.int8)
    c = np.float32([[2.0**-104, 1.0], [0.5, 0.25]])
    out = c.copy()
    with plan.recording() as r:
        tilegemm.matmul(a, b, "mxint8", out=out, accumulate=True, isa="ace")
    assert_bits(out, reference.matmul(a, b, "mxint8", c=c, isa="ace"), "C 2^-104")
    assert r.calls[-1][1] == "exact" and "-ace_mx-" in r.calls[-1][0]


def test_mxint8_zero_sums_add_plus_zero(forced):
    """A step whose four products are -0 adds s = +0 (G-2's rule): C = -0 becomes +0, where a
    binary32 sum of the products would be -0 and keep it."""
    a, b = np.zeros((1, 4), np.int8), np.full((4, 1), -3, np.int8)
    out = np.full((1, 1), -0.0, np.float32)
    tilegemm.matmul(a, b, "mxint8", out=out, accumulate=True, isa="ace")
    assert out.view(np.uint32)[0, 0] == 0
    assert_bits(out, reference.matmul(a, b, "mxint8", c=np.full((1, 1), -0.0, np.float32), isa="ace"), "-0")


# -- MX FP8 in binary32, each step checked by its bounds (family ace_mx32c) ----------------------------


def _fp8_value(code: int, fmt) -> Fraction:
    """An FP8 code's value by its formula for every code (the MX reading: no NaN or infinity)."""
    mf = fmt.minifloat
    exp = (code >> mf.mantissa_bits) & ((1 << mf.exponent_bits) - 1)
    frac = Fraction(code & ((1 << mf.mantissa_bits) - 1), 1 << mf.mantissa_bits)
    mag = frac * Fraction(2) ** (1 - mf.bias) if exp == 0 else (1 + frac) * Fraction(2) ** (exp - mf.bias)
    return -mag if code & 0x80 else mag


def _lowest_bit(x: Fraction) -> int:
    """The exponent of the lowest set bit of a non-zero dyadic x."""
    n, d = abs(x).numerator, abs(x).denominator
    return (n & -n).bit_length() - 1 - (d.bit_length() - 1)


def _step_bound(values, total: bool) -> Fraction:
    """sum (A) or max (B) of |v| over a step's values, in units of their lowest set bit."""
    live = [v for v in values if v != 0]
    if not live:
        return Fraction(0)
    unit = Fraction(2) ** min(_lowest_bit(v) for v in live)
    return (sum(abs(v) for v in live) if total else max(abs(v) for v in live)) / unit


def _up_to_f32(q: Fraction) -> float:
    """The smallest binary32 number at least q (q >= 0, below 2^128)."""
    f = np.float32(float(q))
    while Fraction(float(f)) < q:
        f = np.nextafter(f, np.float32(np.inf))
    return float(f)


def _fp8_edges(dtype, m, k, n, rng):
    """Standard normal MX FP8 operands with extreme codes (every code is finite in the MX reading)."""
    instr = ACE.dtypes[dtype]
    a, b, sa, sb = _mx_operands(dtype, m, k, n, rng, specials=0.05)
    return instr, a, b, sa, sb


@pytest.mark.parametrize("dtype", FP8_MX)
def test_mx32c_step_bounds(dtype):
    """The bounds layout "mx32c" carries, against sums and maxima of the codes' values (from
    their formula) in units of their lowest set bit: A's per group of body rows and step, in every
    row's slots after its values; B's per block and step, in the row after the block's values."""
    from tilegemm.kernels.targets import shape

    rng = np.random.default_rng([11, len(dtype)])
    instr, a, b, sa, sb = _fp8_edges(dtype, 37, 150, 35, rng)
    a[3, 4:8] = 0  # a step of zeros: bound 0
    a[5, 8:12] = [0x01, 0x7F, 0x81, 0xFF]  # the smallest and largest magnitudes in one step
    panels, _ = tilegemm.packing.a_panels(instr, "mx32c", a.reshape(1, 37, 150), 3, sa.reshape(1, 37, -1))
    group = shape("ace_mx32c").rows
    va = [[_fp8_value(int(c), instr.a) for c in row] for row in a]
    for mt in range(3):
        for kb in range(3):
            for t in range(16):
                k0 = kb * 64 + 4 * t
                for g0 in range(0, 16, group):
                    rows = [r for r in range(16 * mt + g0, 16 * mt + g0 + group) if r < 37]
                    want = max([_step_bound(va[r][k0 : k0 + 4], True) for r in rows], default=Fraction(0))
                    got = panels[0, mt, kb, g0 : g0 + group, 64 + t]
                    assert (got == _up_to_f32(want)).all(), (mt, kb, t, g0, got, want)
    blocks = tilegemm.pack(b, dtype, "ace", scales=sb).kernel_b("mx32c", False)
    assert blocks.shape == (1, 3, 3, 65, 16, 1)
    vb = [[_fp8_value(int(c), instr.b) for c in row] for row in b]
    for nt in range(3):
        for kb in range(3):
            for t in range(16):
                k0 = kb * 64 + 4 * t
                cols = [j for j in range(16 * nt, 16 * nt + 16) if j < 35]
                per_col = [_step_bound([vb[k][j] for k in range(k0, min(k0 + 4, 150))], False) for j in cols]
                assert blocks[0, nt, kb, 64, t, 0] == _up_to_f32(max(per_col)), (nt, kb, t)


def _cancelling_step(fmt, sign: int) -> list[int]:
    """Codes of 2^8, the smallest subnormal, 2^8 (negative with ``sign`` 0x80), 0: A's with sign
    and B's without, 2^16 + tiny - 2^16, a sum binary64 holds exactly and binary32 does not."""
    mf = fmt.minifloat
    big = (8 + mf.bias) << mf.mantissa_bits
    return [big, 0x01, big | sign, 0]


@pytest.mark.parametrize("dtype", FP8_MX)
@pytest.mark.parametrize("k", [4, 33, 130])
def test_mx32c_steps_beyond_binary32_run_in_binary64(dtype, k):
    """Among steps of normal values, steps whose products span more than binary32 holds (2^16 +
    2^-18 - 2^16 and the like): the call stays in family ace_mx32c (its proof holds), runs those
    steps in binary64 and matches the reference bit for bit, over partial tiles, tilings and 1 and
    2 threads. Summed in binary32, the cancelling step's tiny product would be lost (checked: with
    every step in binary32, each K fails)."""
    instr = ACE.dtypes[dtype]
    rng = np.random.default_rng([k, len(dtype)])
    m, n = 37, 35
    a = instr.a.to_codes(rng.standard_normal((m, k)), "a", dtype).astype(np.uint8)
    b = instr.b.to_codes(rng.standard_normal((k, n)), "b", dtype).astype(np.uint8)
    nb = -(-k // 32)
    sa = rng.integers(0x78, 0x88, (m, nb)).astype(np.uint8)
    sb = rng.integers(0x78, 0x88, (nb, n)).astype(np.uint8)
    k0 = 4 * (k // 4 - 1)  # the last whole step
    c = rng.standard_normal((m, n)).astype(np.float32)
    for r, j in ((2, 5), (20, 33), (36, 0)):
        a[r] = 0  # the row's only step that is not zero: the cancelling one
        a[r, k0 : k0 + 4] = _cancelling_step(instr.a, 0x80)
        b[k0 : k0 + 4, j] = _cancelling_step(instr.b, 0)
        c[r, j] = 0
    want = reference.matmul(a, b, dtype, c=c, isa="ace", scales=(sa, sb))
    for r, j in ((2, 5), (20, 33), (36, 0)):  # the tiny product alone survives
        scale = Fraction(2) ** (int(sa[r, k0 // 32]) + int(sb[k0 // 32, j]) - 254)
        assert Fraction(float(want[r, j])) == _fp8_value(0x01, instr.a) * _fp8_value(0x01, instr.b) * scale
    for tiling, threads in (("1x1", 1), ("2x2", 2), ("2x3", 1)):
        out = c.copy()
        with plan.recording() as rec:
            tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, isa="ace", scales=(sa, sb), threads=threads)
        assert_bits(out, want, f"{dtype} K={k} {tiling} {threads} threads")
        ((name, ran, _),) = rec.calls
        assert (name.split("-")[2], ran) == ("ace_mx32c", "fast"), name


@pytest.mark.parametrize("dtype", FP8_MX)
def test_a_packed_b_serves_both_fp8_readings(dtype):
    """One PackedB, called with each reading of ace_fp8_specials in turn: its kernel blocks are
    made per reading (0x7F is 480 in E4M3 and 114688 in E5M2 by the formula, NaN in the IEEE-like
    reading)."""
    a = np.full((3, 8), 0x38, np.uint8)  # 1.0
    b = np.full((8, 2), 0x38, np.uint8)
    b[:, 1] = 0x7F
    packed = tilegemm.pack(b, dtype, "ace")
    for reading in ("arithmetic", "ieee_like", "arithmetic"):
        want = reference.matmul(a, b, dtype, isa="ace", ace_fp8_specials=reading)
        got = tilegemm.matmul(a, packed, isa="ace", ace_fp8_specials=reading)
        assert_bits(got, want, reading)
        assert np.isnan(got[0, 1]) == (reading == "ieee_like"), reading


def test_mx32c_proof_bounds():
    """Each condition of the "mx32c" proof on both sides of its edge. Ranges: (smallest scale
    exponent, largest unscaled exponent, smallest and largest scaled exponent)."""
    hf8 = ACE.dtypes["mxfp8_e4m3"]

    def ok(a, b, c=None):
        return plan.fast_path_ok(hf8, a, b, c, "mx32c")

    assert ok((0, 8, -20, 8), (0, 8, -20, 8))
    assert ok((0, 15, -20, 15), (0, 16, -20, 16)) and not ok((0, 15, -20, 15), (0, 17, -20, 17))  # binary64: 2^53
    assert ok((-54, 8, -63, 8), (-54, 8, -63, 8)) and not ok((-55, 8, -63, 8), (-54, 8, -63, 8))  # grid 2^-126
    assert ok((0, 8, -126, 8), (0, 8, -20, 8)) and not ok((0, 8, -127, 8), (0, 8, -20, 8))  # scaled: normal
    assert ok((0, 8, -20, 100), (0, 8, -20, 23)) and not ok((0, 8, -20, 100), (0, 8, -20, 24))  # sums < 2^128
    assert not ok((0, 8, -20, 128), (0, 8, -20, -20))  # a scaled value no binary32 number
    assert ok((0, 8, -20, 8), (0, 8, -20, 8), (-103, 0)) and not ok((0, 8, -20, 8), (0, 8, -20, 8), (-104, 0))
    assert ok(None, (0, 8, -9, 127)) and not ok(None, (0, 8, -9, 128))  # 0 * inf would be NaN
    assert ok((0, 8, -9, 127), None) and not ok((0, 8, -9, 128), None)


@pytest.mark.parametrize(
    "sa,family,path",
    [
        (0x7F, "ace_mx32c", "fast"),
        (0xF5, "ace_mx", "fast"),  # 448 * 2^118: partial sums could reach 2^128 in binary32
        (0x00, "ace_mx", "exact"),  # 2^-127: scaled values and step results below 2^-126
    ],
)
def test_mx_fp8_leaves_binary32_where_its_proof_fails(sa, family, path):
    instr = ACE.dtypes["mxfp8_e4m3"]
    rng = np.random.default_rng(sa)
    a = instr.a.to_codes(rng.standard_normal((21, 70)), "a", "mxfp8_e4m3").astype(np.uint8)
    b = instr.b.to_codes(rng.standard_normal((70, 19)), "b", "mxfp8_e4m3").astype(np.uint8)
    a[0, 0] = 0x7E  # 448
    scales = (np.full((21, 3), sa, np.uint8), np.full((3, 19), 0x7F, np.uint8))
    want = reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=scales)
    with plan.recording() as r:
        got = tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=scales)
    assert_bits(got, want, f"{sa:#x}")
    ((name, ran, _),) = r.calls
    assert (name.split("-")[2], ran) == (family, path), name


def test_a_fallback_plan_has_no_entry():
    k = tilegemm.dispatch.lookup("ace", "mxint8", "2x2")
    with plan.forced_path("exact"):
        p = plan.make_plan(k, None, (0, 1), (0, 1), None)
    assert p.path == "fallback"
    with pytest.raises(RuntimeError, match="the proof failed; run family 'ace_mx'"):
        _ = p.entry
    with pytest.raises(ValueError, match="'ace_mx32' has no exact entry: where its proof fails, family 'ace_mx' runs"):
        _ = k.exact


# -- the independent rounding helpers --------------------------------------------------------------


def _ieee_oracle(q: Fraction) -> int:
    """Bits of the IEEE binary32 nearest to q (ties to even, denormals kept)."""
    if q == 0:
        return 0
    neg = q < 0
    q = abs(q)
    if q < Fraction(2) ** -126:
        n = q * 2**149
        fl = math.floor(n)
        rem = n - fl
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2):
            fl += 1
        return (0x80000000 if neg else 0) | int(fl)
    r = _round24(q)
    if r >= Fraction(2) ** 128:
        return (0x80000000 if neg else 0) | 0x7F800000
    return int(np.float32(float(r)).view(np.uint32)) | (0x80000000 if neg else 0)


def test_fma32_ieee_against_rationals():
    """The IEEE binary32 FMA that TOP2BF16PS's rs and gcc_chain readings use, around 2^-126."""
    rng = np.random.default_rng(5)
    n = 3000
    a = (rng.integers(0, 1 << 16, n).astype(np.uint32) << 16).view(np.float32)
    b = (rng.integers(0, 1 << 16, n).astype(np.uint32) << 16).view(np.float32)
    c = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = rng.random(n) < 0.5  # products near the denormal range, and C to cancel them
    a = np.where(near, np.float32(2.0**-70) * rng.standard_normal(n).astype(np.float32), a).astype(np.float32)
    b = np.where(near, np.float32(2.0**-60) * rng.standard_normal(n).astype(np.float32), b).astype(np.float32)
    a = (a.view(np.uint32) & 0xFFFF0000).view(np.float32)
    with np.errstate(all="ignore"):
        cancel = (-(a.astype(np.float64) * b) * (1 + 2.0**-20)).astype(np.float32)
        c = np.where(near & (rng.random(n) < 0.5), cancel, c)
        got = ref.fma32_ieee(a, b, c).view(np.uint32)
    for x, y, z, g in zip(a, b, c, got):
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            continue
        q = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        if q == 0:
            continue  # the sign of an exact zero is checked by the examples
        assert g == _ieee_oracle(q), (x, y, z, hex(g))


# -- scales and inputs: validation ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp8_e4m3_e5m2", "mxfp8_e5m2_e4m3"])
def test_mx_fp8_operands_are_codes_never_quantized(dtype):
    """ACE reads every FP8 code as a number, so a float quantized on the way in could turn a NaN,
    an infinity or an overflow into a finite value (NaN -> 480 under E4M3): floats, and 8-bit
    floats of the other format, are refused everywhere an operand comes in; uint8 codes and the
    side's own ml_dtypes type are taken."""
    parts = dtype.split("_")[1:]  # A's format, then B's if it differs
    fa, fb = (ml_dtypes.float8_e4m3fn if f == "e4m3" else ml_dtypes.float8_e5m2 for f in (parts[0], parts[-1]))
    other = {ml_dtypes.float8_e4m3fn: ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2: ml_dtypes.float8_e4m3fn}
    a, b = np.full((2, 3), 0x38, np.uint8), np.full((3, 2), 0x38, np.uint8)
    want = tilegemm.matmul(a, b, dtype, isa="ace")
    assert_bits(tilegemm.matmul(a.view(fa), b.view(fb), dtype, isa="ace"), want, "own 8-bit float types")
    for bad_a, bad_b, side, kind in [
        (np.full((2, 3), np.nan), b, "a", "float64"),
        (a, np.ones((3, 2), np.float32), "b", "float32"),
        (a.view(other[fa]), b, "a", np.dtype(other[fa]).name),
    ]:
        msg = rf"operand {side} has dtype {kind}; dtype '{dtype}' takes {side} as ml_dtypes.float8_e\dm\d\w*"
        msg += " or uint8 codes"
        calls = [
            lambda: tilegemm.matmul(bad_a, bad_b, dtype, isa="ace"),
            lambda: reference.matmul(bad_a, bad_b, dtype, isa="ace"),
            lambda: ace_seed.gemm_blocked(bad_a, bad_b, dtype),
        ]
        if side == "b":
            calls.append(lambda: tilegemm.pack(bad_b, dtype, "ace"))
        for call in calls:
            with pytest.raises(TypeError, match=msg):
                call()
    out = np.full((2, 2), 7, np.float32)
    with pytest.raises(TypeError):
        tilegemm.matmul(a, np.ones((3, 2)), dtype, isa="ace", out=out, accumulate=True)
    assert (out == 7).all()  # nothing written


def test_scales_validation():
    a, b = np.zeros((3, 40), np.uint8), np.zeros((40, 5), np.uint8)
    ok = (np.full((3, 2), 0x7F, np.uint8), np.full((2, 5), 0x7F, np.uint8))
    with pytest.raises(ValueError, match=r"scales are the MX block scales .* dtype 'bf16' \(TOP2BF16PS\) takes none"):
        tilegemm.matmul(a, b, "bf16", isa="ace", scales=ok)
    with pytest.raises(ValueError, match=r"dtype 'hf8' \(TDPHF8PS\) takes none"):
        tilegemm.matmul(a, b, "hf8", scales=ok)
    with pytest.raises(ValueError, match=r"scales for a have shape \(3, 1\), but dtype 'mxfp8_e4m3' needs \(3, 2\)"):
        tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(np.zeros((3, 1), np.uint8), None))
    with pytest.raises(ValueError, match=r"scales for b have shape \(5, 2\), but .* needs \(2, 5\)"):
        tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(None, np.zeros((5, 2), np.uint8)))
    with pytest.raises(TypeError, match=r"scales for a have dtype float64; .* ml_dtypes.float8_e8m0fnu or uint8"):
        tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(np.ones((3, 2)), None))
    with pytest.raises(TypeError, match=r"scales for b have dtype int32"):
        tilegemm.matmul(a, b, "mxint8", isa="ace", scales=(None, np.ones((2, 5), np.int32)))
    with pytest.raises(TypeError, match=r"scales must be a pair \(sa, sb\)"):
        tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=np.zeros((3, 2), np.uint8))
    with pytest.raises(ValueError, match=r"scales for a"):
        reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(np.zeros((2, 2), np.uint8), None))
    with pytest.raises(ValueError, match=r"ace_top2bf16='ieee' is not one of 'sde', 'spec', 'rs', 'gcc_chain'"):
        tilegemm.matmul(a, b, "bf16", isa="ace", ace_top2bf16="ieee")
    with pytest.raises(ValueError, match=r"switch 'ace_fp8_specials' does not apply to TOP4MXBSSPS"):
        tilegemm.matmul(a, b, "mxint8", isa="ace", ace_fp8_specials="ieee_like")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'ace_bsr_a_half'"):
        tilegemm.matmul(a, b, "mxint8", isa="ace", ace_bsr_a_half="low")
    with pytest.raises(TypeError, match=r"operand a has dtype float64; 'mxint8' takes integer arrays"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2), np.int8), "mxint8", isa="ace")
    out = np.full((3, 5), 7, np.float32)
    with pytest.raises(ValueError):
        tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", out=out, scales=(np.zeros((3, 9), np.uint8), None))
    assert (out == 7).all()  # nothing written


def test_scales_as_e8m0_arrays_and_1d_operands():
    rng = np.random.default_rng(2)
    a, b, sa, sb = _mx_operands("mxfp8_e4m3", 3, 40, 5, rng)
    want = reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(sa, sb))
    e8 = ml_dtypes.float8_e8m0fnu
    got = tilegemm.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(sa.view(e8), sb.view(e8)))
    assert_bits(got, want, "float8_e8m0fnu scales")
    assert e8(2.0).view(np.uint8) == 0x80 and np.isnan(np.uint8(0xFF).view(e8).astype(np.float32))
    # 1-D operands: a (K,) takes scales (blocks,), b (K,) too; the result is 0-d like numpy's.
    got = tilegemm.matmul(a[1], b[:, 2], "mxfp8_e4m3", isa="ace", scales=(sa[1], sb[:, 2]))
    assert_bits(got, want[1, 2], "1-D")
    # Batched: scales carry the batch dimensions of their operand.
    a3 = np.stack([a, a[::-1]])
    sa3 = np.stack([sa, sa[::-1]])
    got = tilegemm.matmul(a3, b, "mxfp8_e4m3", isa="ace", scales=(sa3, sb))
    assert_bits(got[1], want[::-1], "batched")


def test_packed_b_carries_its_scales():
    rng = np.random.default_rng(3)
    a, b, sa, sb = _mx_operands("mxfp8_e5m2_e4m3", 20, 70, 30, rng)
    want = reference.matmul(a, b, "mxfp8_e5m2_e4m3", isa="ace", scales=(sa, sb))
    p = tilegemm.pack(b, "mxfp8_e5m2_e4m3", "ace", scales=sb)
    assert np.array_equal(p.scales, sb)
    assert_bits(tilegemm.matmul(a, p, scales=(sa, None)), want, "packed")
    # B is E4M3 for both MX dtypes with an E4M3 B: they share it (and its scales).
    want2 = reference.matmul(a, b, "mxfp8_e4m3", isa="ace", scales=(sa, sb))
    assert_bits(tilegemm.matmul(a, p, "mxfp8_e4m3", scales=(sa, None)), want2, "shared")
    with pytest.raises(ValueError, match=r"B is packed: its scales are the ones given to tilegemm.pack"):
        tilegemm.matmul(a, p, scales=(sa, sb))
    with pytest.raises(ValueError, match=r"the packed B carries MX block scales; dtype 'hf8' takes none"):
        tilegemm.matmul(a, p, "hf8", isa="amx")
    with pytest.raises(ValueError, match=r"dtype 'bf16' \(TOP2BF16PS\) takes none"):
        tilegemm.pack(np.ones((4, 4)), "bf16", "ace", scales=np.ones((1, 4), np.uint8))
    for pair in ((None, sb), (sa, sb)):  # matmul's pair given to pack
        with pytest.raises(TypeError, match=r"pack takes B's block scales alone \(scales=sb\), not the \(sa, sb\)"):
            tilegemm.pack(b, "mxfp8_e5m2_e4m3", "ace", scales=pair)
    import pickle

    q = pickle.loads(pickle.dumps(p))
    assert_bits(tilegemm.matmul(a, q, scales=(sa, None)), want, "pickled")


def test_ace_and_amx_int8_agree_and_share_a_packed_b():
    """The sum modulo 2^32 does not depend on how K is cut: ACE's int8 GEMMs equal AMX's."""
    rng = np.random.default_rng(4)
    for dtype in ("s8s8", "s8u8", "u8s8", "u8u8"):
        instr = ACE.dtypes[dtype]
        a, b = instr.sample(21, 131, 19, rng)
        assert_bits(reference.matmul(a, b, dtype, isa="ace"), reference.matmul(a, b, dtype), dtype)
        p = tilegemm.pack(b, dtype)
        assert_bits(tilegemm.matmul(a, p, isa="ace"), reference.matmul(a, b, dtype), dtype)


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
def test_caller_ftz_daz_does_not_change_bits(forced):
    rng = np.random.default_rng(12)
    runs = []
    for dtype in MX_DTYPES:
        a, b, sa, sb = _mx_operands(dtype, 19, 70, 18, rng)
        c = rng.standard_normal((19, 18)).astype(np.float32)
        c[0, :3] = [f32(0x80000001), f32(0x00400000), -0.0]
        runs.append((a, b, dtype, c, {"scales": (sa, sb)}))
    a = tilegemm.formats.BF16.to_codes(rng.standard_normal((19, 37)), "a", "bf16")
    a[0, :2] = [0x0001, 0x8040]  # denormals
    for reading in ("sde", "spec", "rs", "gcc_chain"):
        c = rng.standard_normal((19, 18)).astype(np.float32)
        c[0, :2] = [f32(0x00000007), f32(0x80400000)]
        sw = {} if reading == "sde" else {"ace_top2bf16": reading}
        runs.append((a.view(ml_dtypes.bfloat16), np.ones((37, 18)), "bf16", c, sw))

    def go():
        outs = []
        for a, b, dtype, c, sw in runs:
            out = c.copy()
            tilegemm.matmul(a, b, dtype, out=out, accumulate=True, threads=1, isa="ace", **sw)
            outs.append(out)
        return outs

    want = go()
    with mxcsr_flags(FTZ | DAZ):
        got = go()
    for g, w, (a, b, dtype, c, sw) in zip(got, want, runs):
        assert_bits(g, w, f"{dtype} under FTZ|DAZ")
        assert_bits(w, reference.matmul(a, b, dtype, c=c, isa="ace", **sw), dtype)

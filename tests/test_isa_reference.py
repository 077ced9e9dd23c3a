"""The other CPUs' paths: worked examples (reference and kernels), exhaustive pair tables, and the
IEEE fma32/fma16 against exact rationals.

Every expected value here is worked out from the instruction definitions (in the comments), or
computed by an independent formula (numpy integer clipping, ``fractions.Fraction``), never by
running tilegemm's own code."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits
from oracle import ieee_fma

import tilegemm
from tilegemm import instructions, reference

INT_MAX = 2**31 - 1

# (A row, B column, C, exact = VPDPBUSD = AMX, avx2, *_sat), dtype u8s8 unless A is signed.
INT_EXAMPLES = [
    # 255*127 + 255*127 = 64770; VPMADDUBSW clips the pair to 32767.
    ("pair saturates", "u8s8", [255, 255], [127, 127], 0, 64770, 32767, 64770),
    # pairs (0,1) = 64770 -> 32767, (2,3) = -32640 + 0: 32767 - 32640 = 127.
    ("saturated pair then a negative one", "u8s8", [255, 255, 255], [127, 127, -128], 0, 32130, 127, 32130),
    # pairs (0,1) = 32385 - 32640 = -255, (2,3) = 32385: no clip.
    ("same products, other pairing", "u8s8", [255, 255, 255], [127, -128, 127], 0, 32130, 32130, 32130),
    # s8s8: a' = 255, 255: pair 64770 -> 32767; comp = -128 * 254 = -32512: 32767 - 32512 = 255.
    ("signed activations through the +128 shift", "s8s8", [127, 127], [127, 127], 0, 32258, 255, 32258),
    # exact: 2^31 - 101 + 4 * 32385 = 2^31 + 129439, wrapped -2147354209; avx2: two pairs clip to
    # 32767: 2^31 - 101 + 65534 wraps to -2147418215; sat: clipped at 2^31 - 1.
    ("int32 wrap against saturation", "u8s8", [255] * 4, [127] * 4, INT_MAX - 100, -2147354209, -2147418215, INT_MAX),
    # exact: +129540 - 129540 = 0 over 2^31 - 1; avx2: words 32767, 32767, -32768, -32768 sum to
    # -2: 2147483645; sat: the first quad clips at 2^31 - 1, the second subtracts 129540.
    (
        "saturation depends on the order",
        "u8s8",
        [255] * 8,
        [127] * 4 + [-127] * 4,
        INT_MAX,
        INT_MAX,
        2147483645,
        2147354107,
    ),
]

INT_PROFILES = {
    "exact": ("amx", "avx512_vnni", "avx_vnni"),
    "avx2": ("avx2",),
    "sat": ("avx512_vnni_sat", "avx_vnni_sat"),
}


def _int_case(dtype, row, col, c):
    a_dt = np.int8 if dtype == "s8s8" else np.uint8
    return np.array([row], a_dt), np.array(col, np.int8)[:, None], np.array([[c]], np.int32)


@pytest.mark.parametrize("case", INT_EXAMPLES, ids=[c[0] for c in INT_EXAMPLES])
@pytest.mark.parametrize("kind", list(INT_PROFILES))
def test_int_worked_examples(case, kind):
    _, dtype, row, col, c, exact, avx2, sat = case
    want = np.array([[{"exact": exact, "avx2": avx2, "sat": sat}[kind]]], np.int32)
    a, b, c0 = _int_case(dtype, row, col, c)
    for isa in INT_PROFILES[kind]:
        assert_bits(reference.matmul(a, b, dtype, c=c0, isa=isa), want, f"reference {isa}")
        out = c0.copy()
        tilegemm.matmul(a, b, dtype, isa=isa, out=out, accumulate=True)
        assert_bits(out, want, f"matmul {isa}")
        if c == 0:
            assert_bits(tilegemm.matmul(a, b, dtype, isa=isa, tiling="1x6"), want, f"matmul {isa} from 0")


def _bf16(bits):
    return np.array(bits, np.uint16).view(ml_dtypes.bfloat16)


def _fp16(bits):
    return np.array(bits, np.uint16).view(np.float16)


def _bits(x):
    x = np.asarray(x)
    return int(x.view(np.uint16 if x.dtype == np.float16 else np.uint32).reshape(-1)[0])


FLOAT_EXAMPLES = [
    # 2^-133 (a BF16 denormal) x 1: kept, binary32 bits 0x00010000 (2^16 * 2^-149). AMX reads 0.
    ("bf16 denormal kept", "fp32_fma", "bf16", _bf16([[0x0001]]), _bf16([[0x3F80]]), None, 0x00010000),
    # 0 + 2^24 = 2^24; + 1 ties to even 2^24; - 2^24 = +0. (AMX: even chain 1 - ... gives 1.0.)
    ("order: 2^24 + 1 ties", "fp32_fma", "bf16", _bf16([[0x3F80] * 3]), _bf16([[0x4B80], [0x3F80], [0xCB80]]), None, 0),
    # 2^-75 x 1.5 * 2^-75 = 1.5 * 2^-150: between 2^-150 and 2^-149, above the midpoint: 2^-149.
    ("denormal result rounds up", "fp32_fma", "bf16", _bf16([[0x1A00]]), _bf16([[0x1A40]]), None, 0x00000001),
    # 683/512 * 0.75 = 1 + 2^-11 exactly; + 2^-24 = 1 + 2^-11 + 2^-24: above the midpoint between
    # 1 and 1 + 2^-10, so 0x3C01. Through binary32 first: 1 + 2^-11 (the 2^-24 ties away), then 0x3C00.
    ("fp16 rounds once", "avx512_fp16", "fp16", _fp16([[0x3D56]]), _fp16([[0x3A00]]), _fp16([[0x0001]]), 0x3C01),
    # 65504 + 16 = 65520: the midpoint between 65504 and 2^16, ties to even (2^16): infinity.
    ("fp16 overflow tie", "avx512_fp16", "fp16", _fp16([[0x3C00]]), _fp16([[0x4C00]]), _fp16([[0x7BFF]]), 0x7C00),
    # 2048 + 1 = 2049 ties to even 2048: the FP16 accumulator stalls.
    (
        "fp16 accumulator stalls",
        "avx512_fp16",
        "fp16",
        _fp16([[0x3C00] * 3000]),
        _fp16([[0x3C00]] * 3000),
        None,
        0x6800,
    ),
]


@pytest.mark.parametrize("case", FLOAT_EXAMPLES, ids=[c[0] for c in FLOAT_EXAMPLES])
def test_float_worked_examples(case):
    _, isa, dtype, a, b, c, want = case
    assert _bits(reference.matmul(a, b, dtype, c=c, isa=isa)) == want
    instr = instructions.resolve(isa, dtype)[2]
    out = np.zeros((1, 1), instr.acc) if c is None else np.array(c, instr.acc)
    tilegemm.matmul(a, b, dtype, isa=isa, out=out, accumulate=True)
    assert _bits(out) == want
    assert _bits(tilegemm.matmul(a, b, dtype, isa=isa)) == _bits(reference.matmul(a, b, dtype, isa=isa))


@pytest.mark.parametrize(
    "case", [c for c in FLOAT_EXAMPLES if c[1] == "avx512_fp16"], ids=lambda c: c[0] if isinstance(c, tuple) else c
)
def test_fp16_accumulator_examples_on_each_family(case, f16acc_family):
    """The FP16-accumulator examples through the emulation and through the instruction's own body."""
    _, isa, dtype, a, b, c, want = case
    out = np.zeros((1, 1), np.float16) if c is None else np.array(c, np.float16)
    tilegemm.matmul(a, b, dtype, isa=isa, out=out, accumulate=True)
    assert _bits(out) == want, f16acc_family


def test_the_float_examples_differ_where_they_say():
    """The comparisons the examples name: AMX reads the denormal as 0 and splits K into chains;
    fp32_fma keeps on adding 1 where the FP16 accumulator stalls at 2048."""
    assert tilegemm.matmul(_bf16([[0x0001]]), _bf16([[0x3F80]]), "bf16")[0, 0] == 0
    amx = tilegemm.matmul(_bf16([[0x3F80] * 3]), _bf16([[0x4B80], [0x3F80], [0xCB80]]), "bf16")
    assert amx[0, 0] == 1.0
    assert tilegemm.matmul(np.ones((1, 3000)), np.ones((3000, 1)), "fp16", isa="fp32_fma")[0, 0] == 3000
    one = np.float16(1)
    assert np.float16(np.float32(np.float32(683 / 512) * np.float32(0.75)) + np.float32(2**-24)) == one


# -- exhaustive tables -------------------------------------------------------------------------

SECOND = [(0, 0), (255, 127), (255, -128), (1, -128), (128, 127), (129, 127), (255, -1), (2, 127), (130, -128)]


@pytest.mark.parametrize("a1,b1", SECOND)
def test_every_u8_s8_pair_through_the_saturating_step(a1, b1):
    """Rows: every u8 a0; columns: every s8 b0; the pair's second product a1 * b1 fixed."""
    a0 = np.arange(256)
    b0 = np.arange(-128, 128)
    a = np.stack([a0, np.full(256, a1)], axis=1).astype(np.uint8)
    b = np.stack([b0, np.full(256, b1)]).astype(np.int8)
    exact = a0[:, None] * b0[None, :] + a1 * b1
    want = np.clip(exact, -32768, 32767).astype(np.int32)
    assert_bits(reference.matmul(a, b, "u8s8", isa="avx2"), want, "reference")
    assert_bits(tilegemm.matmul(a, b, "u8s8", isa="avx2"), want, "kernel")
    assert_bits(tilegemm.matmul(a, b, "u8s8", isa="avx512_vnni_sat"), exact.astype(np.int32), "no int32 clip")


@pytest.mark.parametrize("b1", [-128, -1, 0, 1, 127])
def test_every_u8_pair_and_s8_through_the_kernel(b1):
    """Rows: all 65536 (a0, a1); columns: every s8 b0 with b1 fixed; the avx2 kernel and its
    signed-activation form against numpy clipping."""
    a = np.stack(np.meshgrid(np.arange(256), np.arange(256), indexing="ij"), axis=-1).reshape(-1, 2)
    b = np.stack([np.arange(-128, 128), np.full(256, b1)])
    want = np.clip(a @ b, -32768, 32767).astype(np.int32)
    assert_bits(tilegemm.matmul(a.astype(np.uint8), b.astype(np.int8), "u8s8", isa="avx2"), want, "u8s8")
    s = a - 128  # the same bytes read as s8: the kernel shifts them back and compensates
    comp = -128 * b.sum(axis=0)
    want_s = (want + comp).astype(np.int32)
    assert_bits(tilegemm.matmul(s.astype(np.int8), b.astype(np.int8), "s8s8", isa="avx2"), want_s, "s8s8")


# -- what the profiles equal, and where they part ---------------------------------------------


@pytest.mark.parametrize("dtype", ["u8s8", "s8s8"])
def test_wrapping_profiles_equal_the_exact_sum(dtype):
    rng = np.random.default_rng(5)
    instr = instructions.resolve("avx512_vnni", dtype)[2]
    a, b = instr.sample(40, 301, 23, rng)
    exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    for isa in ("amx", "avx512_vnni", "avx_vnni"):
        assert_bits(tilegemm.matmul(a, b, dtype, isa=isa), exact, isa)
        assert_bits(reference.matmul(a, b, dtype, isa=isa), exact, isa)


def test_seven_bit_weights_never_saturate():
    """With |b| <= 64 a pair is at most 2 * 255 * 64 = 32640: avx2 equals the exact sum."""
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (33, 300)).astype(np.uint8)
    b = rng.integers(-64, 65, (300, 17)).astype(np.int8)
    assert_bits(tilegemm.matmul(a, b, "u8s8", isa="avx2"), (a.astype(np.int64) @ b).astype(np.int32), "7-bit")
    b[0, 0], b[1, 0], a[0, :2] = 127, 127, 255
    assert tilegemm.matmul(a, b, "u8s8", isa="avx2")[0, 0] != (a.astype(np.int64) @ b)[0, 0]


def test_aliases_are_the_same_records():
    for p in instructions.PROFILES.values():
        if p.same_as is not None:
            of = instructions.PROFILES[p.same_as]
            assert all(p.dtypes[d] is of.dtypes[d] for d in of.dtypes) and p.names() == of.names()
            assert instructions.same_bits(p.name, of.name)
    assert not instructions.same_bits("avx512_vnni", "avx512_vnni_sat")
    assert {v for v in instructions.ONEDNN_INT8.values()} <= set(instructions.ISAS)
    for p in instructions.PROFILES.values():
        if p.onednn is not None and p.library is None:  # the onednn profile models bf16, not int8
            assert instructions.ONEDNN_INT8[p.onednn] == p.name


def test_profiles_name_the_dtypes_they_take():
    with pytest.raises(ValueError, match="isa='avx2' does not take dtype 'bf16'; it takes u8s8, s8s8, int8"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf16", isa="avx2")
    with pytest.raises(ValueError, match="isa='avx512_fp16' does not take dtype 'bf16'; it takes fp16"):
        reference.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf16", isa="avx512_fp16")
    with pytest.raises(ValueError, match="isa='fp32_fma' does not take dtype 's8u8'; it takes bf16, fp16"):
        tilegemm.pack(np.ones((2, 2), np.uint8), "s8u8", isa="fp32_fma")
    with pytest.raises(ValueError, match=r"operand a has values in \[-1, -1\], outside the uint8 range"):
        tilegemm.matmul(np.full((2, 2), -1), np.ones((2, 2), int), "u8s8", isa="avx2")


# -- IEEE fma32 / fma16 against exact rationals -------------------------------------------------


def _f32(rng, n, emin, emax, mant_bits=24):
    sig = rng.integers(2 ** (mant_bits - 1), 2**mant_bits, n).astype(np.float64)
    e = rng.integers(emin, emax, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * np.ldexp(sig, e - mant_bits + 1)).astype(np.float32)


def test_fma32_ieee_against_exact_rationals():
    """Denormal operands and results kept, ties, cancellation, overflow: one IEEE rounding."""
    rng = np.random.default_rng(20261203)
    n = 3000
    a = _f32(rng, n, -140, 64, 8)  # BF16 values, some of them denormal in binary32
    b = _f32(rng, n, -80, 64, 8)
    c = _f32(rng, n, -160, 120)
    prod = a.astype(np.float64) * b
    near = rng.random(n) < 0.35  # cancel almost exactly: results near zero and denormal
    jitter = rng.integers(-3, 4, n) * 2.0 ** rng.integers(-30, -20, n)
    c = np.where(near, (-prod * (1 + jitter)).astype(np.float32), c)
    tie = rng.random(n) < 0.1  # 1 + k * 2^-24: exactly halfway at 24 bits for odd k
    a = np.where(tie, np.float32(1.0), a)
    b = np.where(tie, np.float32(2.0**-24) * rng.choice([1, 3, 5], n), b).astype(np.float32)
    c = np.where(tie, np.float32(1.0), c)
    specials = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-149, -(2.0**-149), 3.0e38, 2.0**-126])
    a = np.concatenate([a, np.repeat(specials, 81)])
    b = np.concatenate([b, np.tile(np.repeat(specials, 9), 9)])
    c = np.concatenate([c, np.tile(specials, 81)])
    got = reference.isa.fma32_ieee(a, b, c)
    want = np.array([ieee_fma(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)], np.float64)
    with np.errstate(over="ignore"):
        assert_bits(got, want.astype(np.float32), "fma32 vs exact")
    assert np.any((got != 0) & (np.abs(got) < 2.0**-126))  # denormal results occurred


def test_fma16_against_exact_rationals():
    """binary16 fma with one rounding: subnormals, the 65520 overflow tie, ties at every scale."""
    rng = np.random.default_rng(77)
    n = 6000
    bits = rng.integers(0, 0x7C00, (3, n)).astype(np.uint16)  # finite positives
    bits |= (rng.random((3, n)) < 0.5).astype(np.uint16) << 15
    a, b, c = (x.view(np.float16) for x in bits)
    tie = rng.random(n) < 0.2  # c + 2^-24-scaled products near binary16 midpoints
    a = np.where(tie, np.float16(1.0), a)
    b = np.where(tie, (rng.integers(1, 64, n) * 2.0**-24).astype(np.float16), b)
    # Products that sit exactly on a binary16 midpoint, plus a c below binary32's reach: the
    # single rounding goes with c, a rounding through binary32 first ties to even.
    x = rng.integers(0x3C00, 0x4000, (2, 200_000)).astype(np.uint16).view(np.float16).astype(np.float64)
    prod = x[0] * x[1]
    scaled = prod / 2.0 ** (np.floor(np.log2(prod)) - 11)
    mid = scaled % 2 == 1  # an odd multiple of half a binary16 ulp
    cm = np.where(rng.random(mid.sum()) < 0.5, 1, -1) * 2.0**-24
    specials = np.float16([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, 65504.0, -65504.0, 1.0])
    a = np.concatenate([a, np.repeat(specials, 81), x[0][mid].astype(np.float16)])
    b = np.concatenate([b, np.tile(np.repeat(specials, 9), 9), x[1][mid].astype(np.float16)])
    c = np.concatenate([c, np.tile(specials, 81), cm.astype(np.float16)])
    assert mid.sum() > 50
    got = reference.isa.fma16(a, b, c)
    want = np.array([ieee_fma(float(x), float(y), float(z), 11, -14, 15) for x, y, z in zip(a, b, c)])
    with np.errstate(over="ignore"):
        w16 = want.astype(np.float16)  # exact: every value is on the binary16 grid
    assert np.array_equal(np.isnan(got), np.isnan(w16))
    ok = ~np.isnan(w16)
    assert np.array_equal(got.view(np.uint16)[ok], w16.view(np.uint16)[ok])
    # and rounding through binary32 first would have been wrong somewhere
    with np.errstate(all="ignore"):
        via32 = (a.astype(np.float64) * b + c).astype(np.float32).astype(np.float16)
    assert not np.array_equal(via32.view(np.uint16)[ok], w16.view(np.uint16)[ok])


def test_fma_helpers_do_not_flush():
    f = np.float32
    assert reference.isa.fma32_ieee(f(2.0**-75), f(2.0**-75), f(0))[()] == 0  # 2^-150 ties to 0
    r = reference.isa.fma32_ieee(f(2.0**-70), f(2.0**-70), f(0))[()]
    assert r == f(2.0**-140) and math.isfinite(r)
    assert reference.fma32(f(2.0**-70), f(2.0**-70), f(0)) == 0  # AMX's FTZ, for contrast


def test_fma16_is_one_rounding_of_the_binary64_sum():
    """For binary16 operands, a*b + c in binary64 is exact or, where it is not (a tiny product
    against a large c, or a product whose result overflows anyway), still rounds to the same
    binary16 value: numpy's direct binary64 -> binary16 conversion of it equals fma16 everywhere."""
    rng = np.random.default_rng(21)
    n = 40000
    bits = rng.integers(0, 0x7C00, (3, n)).astype(np.uint16) | ((rng.random((3, n)) < 0.5).astype(np.uint16) << 15)
    a, b, c = (x.view(np.float16) for x in bits)
    tiny = rng.random(n) < 0.3  # subnormal x subnormal products against c up to 65504
    a = np.where(tiny, (rng.integers(1, 1024, n) * 2.0**-24).astype(np.float16), a)
    b = np.where(tiny, (rng.integers(1, 1024, n) * 2.0**-24).astype(np.float16), b)
    with np.errstate(all="ignore"):
        s = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
        inexact = (s - c.astype(np.float64)) != a.astype(np.float64) * b.astype(np.float64)
        want = s.astype(np.float16)
    got = reference.isa.fma16(a, b, c)
    assert inexact.sum() > 100  # the binary64 sum did round for some of them
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))

"""Conversions at the API boundary, exhaustively where the domain is small."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits, instr

import tilegemm
from tilegemm import formats
from tilegemm.convert import f32_round_fp16, f32_to_bf16, f32_to_fp16, fp16_to_f32

ALL16 = np.arange(2**16, dtype=np.uint32).astype(np.uint16)


def test_bf16_widening_all_patterns():
    """All 65,536 BF16 patterns widen exactly; denormals read as signed zeros (DAZ)."""
    bf = ALL16.view(ml_dtypes.bfloat16)
    got = tilegemm.convert.bf16_to_f32_daz(ALL16).view(np.float32)
    want = bf.astype(np.float32)  # ml_dtypes widening, exact
    denormal = ((ALL16 & 0x7F80) == 0) & ((ALL16 & 0x7F) != 0)
    want = np.where(denormal, np.copysign(np.float32(0), want), want).astype(np.float32)
    assert denormal.sum() == 2 * 127
    assert_bits(got, want, "bf16 -> f32")


def _fp16_bits_as_f32(h):
    """binary16 codes -> binary32 bits from the fields: finite values through float64's ldexp
    (every one exact in binary32), NaN and infinity by placing the fraction. Not NumPy's float16
    cast, which is the CPU's conversion on some hosts (arm64's FCVT quiets a signaling NaN)."""
    h = h.astype(np.int64)
    e, m = (h >> 10) & 0x1F, h & 0x3FF
    mag = np.ldexp(np.where(e > 0, m + 1024, m).astype(np.float64), np.where(e > 0, e - 25, -24))
    bits = mag.astype(np.float32).view(np.uint32)
    bits = np.where(e == 0x1F, np.uint32(0x7F800000) | (m << 13).astype(np.uint32), bits)
    return bits.astype(np.uint32) | ((h & 0x8000) << 16).astype(np.uint32)


def test_fp16_widening_all_patterns_keeps_denormals():
    got = fp16_to_f32(ALL16).view(np.float32)
    assert_bits(got, _fp16_bits_as_f32(ALL16).view(np.float32), "fp16 -> f32")
    assert got[1] == 2.0**-24  # smallest FP16 denormal survives
    assert got.view(np.uint32)[0x7C01] == 0x7F802000  # a signaling NaN keeps its quiet bit clear


def test_fp16_decode_gives_the_same_bits_on_every_host():
    """FP16 codes read back as values (the references read their operands so) keep every bit,
    signaling NaNs included, without a floating-point warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = formats.FP16.decode(ALL16.reshape(256, 256))
    assert got.shape == (256, 256) and got.dtype == np.float32
    assert_bits(got.ravel(), _fp16_bits_as_f32(ALL16).view(np.float32), "FP16.decode")


def _f32_sample():
    """Every exponent, both sides of every rounding boundary, ties, NaN and inf."""
    exps = np.arange(256, dtype=np.uint32) << 23
    lows = np.array(
        [
            0,
            1,
            0x7FFF,
            0x8000,
            0x8001,
            0xFFFF,
            0x10000,
            0x17FFF,
            0x18000,
            0x18001,
            0x7F7FFF,
            0x7F8000,
            0x7F8001,
            0x7FFFFF,
        ],
        np.uint32,
    )
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 2**23, 64, dtype=np.uint32)
    mant = np.concatenate([lows, rand])
    bits = (exps[:, None] | mant[None, :]).ravel()
    bits = np.concatenate([bits, bits | 0x80000000])
    return bits.view(np.float32)


def _rne_bf16_bits(x):
    """Integer round-to-nearest-even of binary32 bits to BF16 (independent of ml_dtypes)."""
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0) | ((b >> 16) & 0x8000).astype(np.uint16), r)


def test_f32_to_bf16_rounding_dense_sample():
    x = _f32_sample()
    got = tilegemm.pack(x.reshape(-1, 1)).unpack().ravel()  # through the public conversion path
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16)
    nan = np.isnan(x)
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.array_equal(got.view(np.uint16)[~nan], _rne_bf16_bits(x)[~nan])
    # The compiled rounding that matmul uses for float32 inputs, against the same two.
    fast = f32_to_bf16(x.view(np.uint32))
    assert np.array_equal(np.isnan(fast.view(ml_dtypes.bfloat16).astype(np.float32)), nan)
    assert np.array_equal(fast[~nan], want.view(np.uint16)[~nan])


def test_float64_rounds_once():
    # 1 + 2^-8 + 2^-40 rounds up in BF16; through float32 first it would tie down to 1.
    x = np.array([[1 + 2.0**-8 + 2.0**-40]])
    assert tilegemm.pack(x).unpack()[0, 0] == 1 + 2.0**-7
    y = np.array([[1 + 2.0**-11 + 2.0**-40]])
    assert tilegemm.pack(y, "fp16").unpack()[0, 0] == np.float16(1 + 2.0**-10)


def test_fp16_overflow_gives_inf():
    assert np.isinf(tilegemm.matmul([[1e6]], [[1.0]], "fp16")[0, 0])


@pytest.mark.parametrize("dtype", ["s8s8", "s8u8", "u8s8", "u8u8"])
def test_all_byte_products(dtype):
    """All 256 x 256 byte products, through the kernels, for each signedness pair."""
    fmt = instr(dtype)
    a = np.arange(256).astype(fmt.a.element).reshape(256, 1)
    b = np.arange(256).astype(fmt.b.element).reshape(1, 256)
    got = tilegemm.matmul(a, b, dtype)
    want = (a.astype(np.int64) * b.astype(np.int64)).astype(np.int32)
    assert_bits(got, want, dtype)


def test_f32_to_fp16_rounding_dense_sample():
    """The compiled float32 -> FP16 rounding matmul uses, against numpy.float16, and end to end."""
    x = _f32_sample()
    nan = np.isnan(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    got = f32_to_fp16(x.view(np.uint32))
    assert np.array_equal(np.isnan(got.view(np.float16)), nan)
    assert np.array_equal(got[~nan], want[~nan])
    finite = x[np.isfinite(x)].reshape(-1, 1)
    with np.errstate(over="ignore"):
        half = finite.astype(np.float16)
    assert_bits(
        tilegemm.matmul(finite, np.ones((1, 1)), "fp16"),
        tilegemm.matmul(half, np.ones((1, 1)), "fp16"),
        "fp16 from float32",
    )


def _fp16_neighbourhoods():
    """For every finite binary16 value: its binary32 bits, the midpoints to both neighbours and
    one binary32 step either side of each (the ties and the values just off them), both signs;
    plus the overflow edge, infinities, NaNs and binary32 denormals."""
    v = ALL16[(ALL16 & 0x7C00) != 0x7C00].view(np.float16).astype(np.float64)
    v = v[v >= 0]
    with np.errstate(over="ignore"):  # above 65504: infinity, whose midpoint 65520 is the overflow edge
        up = np.nextafter(v.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    mids = np.concatenate([(v + up) / 2, v])  # every midpoint and value is a binary32 number
    pts = mids.astype(np.float32).view(np.uint32)
    pts = np.concatenate(
        [pts, pts + 1, pts - 1, [0x477FEFFF, 0x477FF000, 0x7F800000, 0x7FC00000, 0x7F800001, 1, 0x7FFFFF]]
    )
    pts = np.concatenate([pts, pts | 0x80000000]).astype(np.uint32)
    return pts


def test_f32_round_fp16_is_the_round_trip():
    """The one-step rounding the A-packing loops use equals numpy.float16's round trip on every
    tie and its neighbours, and the two-step rule of f32_to_fp16 / fp16_to_f32 everywhere."""
    bits = np.concatenate([_fp16_neighbourhoods(), _f32_sample().view(np.uint32)])
    x = bits.view(np.float32)
    got = f32_round_fp16(bits)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    nan = np.isnan(x)
    assert_bits(got[~nan].view(np.float32), want[~nan], "binary32 -> nearest binary16")
    assert np.array_equal(got[nan], (bits[nan] & 0x80000000) | 0x7FC00000)  # the quiet NaN of its sign
    assert np.array_equal(got, fp16_to_f32(f32_to_fp16(bits)))
    f = got.view(np.float32)
    assert f[bits == 0x33000001][0] == 2.0**-24 and f[bits == 0x33000000][0] == 0  # 2^-25 ties to 0
    with np.errstate(invalid="raise"):  # a signalling NaN converts without raising a flag
        assert np.all(f32_round_fp16(np.full(64, 0x7F800001, np.uint32)) == 0x7FC00000)


@pytest.mark.parametrize("fmt", [formats.BF16, formats.FP16, formats.BF8, formats.HF8], ids=lambda f: f.name)
def test_holds_nan_on_every_code(fmt):
    """The NaN scan that routes calls (plan.make_plan) finds every NaN code and no other."""
    n = 1 << (8 * fmt.storage.itemsize)
    codes = np.arange(n, dtype=np.int64).astype(fmt.storage)
    nan = np.isnan(codes.view(fmt.element))  # no cast: arm64's FCVT would flag the signaling NaNs
    got = np.array([fmt.holds_nan(codes[i : i + 1]) for i in range(0, n, 1 if n <= 256 else 97)])
    assert np.array_equal(got, nan[:: 1 if n <= 256 else 97])
    assert fmt.holds_nan(codes) and not fmt.holds_nan(codes[~nan])

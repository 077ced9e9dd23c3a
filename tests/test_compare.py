"""bitdiff: the one comparison, and that it reports every kind of difference."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilegemm

f32 = np.float32


def test_nan_payloads_differ_and_are_counted_apart():
    """Another NaN payload (or a NaN's sign) is a difference, and it is also counted on its own."""
    a = np.array([1.0, np.nan, -0.0, np.inf, np.nan], f32)
    b = a.copy()
    b.view(np.uint32)[1] = 0x7FC12345  # another payload
    d = tilegemm.bitdiff(a, b)
    assert not d.identical and d and d.count == 1 and d.nan_payloads == 1 and d.first == (1,)
    assert str(d) == "1 of 5 elements differ (20.00%), only in NaN payload or sign, first at (1,)"
    b.view(np.uint32)[4] = 0xFFC00000  # the default NaN: another sign
    b[0] = 2.0
    d = tilegemm.bitdiff(a, b)
    assert d.count == 3 and d.nan_payloads == 2 and "2 NaNs differing in payload or sign" in str(d)
    assert (
        tilegemm.bitdiff(a, a.copy()).nan_payloads == 0 and str(tilegemm.bitdiff(a, a)) == "bit-identical (5 elements)"
    )
    c = np.array([complex(np.nan, 1)], np.complex64)
    e = c.copy()
    e.view(np.uint32)[0] = 0x7FC00001
    d = tilegemm.bitdiff(c, e)
    assert d.nan_payloads == 1 and d.count == 1


@pytest.mark.parametrize(
    "x",
    [
        np.array([[1.0, np.nan], [-0.0, np.inf]], f32),
        np.array([1 + 2j, np.nan, -0.0], np.complex128),
        np.array([3, -7], np.int32),
        np.array([0x0001, 0x8000, 0x7FC1], np.uint16).view(ml_dtypes.bfloat16),
        np.array(-0.0, f32),  # 0-d
        np.zeros((0, 3), f32),
        np.arange(12, dtype=f32).reshape(3, 4).T,  # not contiguous
    ],
    ids=["f32", "c128", "i32", "bf16", "0-d", "empty", "strided"],
)
def test_identical_inputs_report_the_same_as_a_difference_would(x):
    """Equal bytes take a short path; its fields are those the element-wise comparison gives."""
    d = tilegemm.bitdiff(x, x.copy())
    assert (d.count, d.total, d.max_ulp, d.sign_flips, d.first) == (0, x.size, 0, 0, None)
    assert d.nan_mismatch.shape == np.argwhere(np.zeros(x.shape, bool)).shape
    assert d.nan_mismatch.dtype == np.argwhere(np.zeros(x.shape, bool)).dtype
    if x.size:  # one changed bit is still seen, through the same entry
        y = x.copy()
        y.reshape(-1).view(np.uint8)[-1] ^= 1
        assert tilegemm.bitdiff(x, y).count == 1


@pytest.mark.parametrize(
    "x,y,count,ulp,flips,nan",
    [
        ([0.0], [-0.0], 1, 0, 0, 0),  # signed zeros differ in bits, 0 ulp apart
        ([1.0], [np.nextafter(f32(1), f32(2))], 1, 1, 0, 0),
        ([1.0], [np.nan], 1, 0, 0, 1),  # NaN mask
        ([-1e-45], [1e-45], 1, 0, 1, 0),  # opposite signs: a flip, not 2 ulps
        ([-1.0, 3.0], [1.0, 3.0], 1, 0, 1, 0),
        ([2.0**-126], [0.0], 1, 0x00800000, 0, 0),  # a flushed normal: counted steps to zero
    ],
)
def test_reports_each_kind_of_float_difference(x, y, count, ulp, flips, nan):
    d = tilegemm.bitdiff(np.array(x, f32), np.array(y, f32))
    assert (d.count, d.max_ulp, d.sign_flips, len(d.nan_mismatch)) == (count, ulp, flips, nan)
    assert d and not d.identical and d.first is not None and "differ" in str(d)


def test_first_difference_and_share():
    x = np.zeros((3, 4), f32)
    y = x.copy()
    y[1, 2] = 5.0
    y[2, 0] = 1.0
    d = tilegemm.bitdiff(x, y)
    assert d.first == (1, 2) and d.count == 2 and d.share == pytest.approx(2 / 12)


def test_integers_complex_and_16_bit_floats():
    d = tilegemm.bitdiff(np.int32([1, -5, 7]), np.int32([1, 5, 7]))
    assert (d.count, d.max_ulp, d.first) == (1, 10, (1,))
    c = tilegemm.bitdiff(np.complex64([1 + 2j, 3 + 4j]), np.complex64([1 + 2j, 3 - 4j]))
    assert (c.count, c.first, c.sign_flips) == (1, (1,), 1)
    h = tilegemm.bitdiff(np.float16([1.0, 2.0]), np.float16([1.0, 2.001953125]))
    assert (h.count, h.max_ulp) == (1, 1)
    bf = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    g = bf.copy()
    g[1] = 2.015625  # the next bfloat16 after 2
    assert tilegemm.bitdiff(bf, g).max_ulp == 1


def test_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match=r"one shape, got \(2,\) and \(3,\)"):
        tilegemm.bitdiff(np.zeros(2, f32), np.zeros(3, f32))
    with pytest.raises(TypeError, match="one dtype, got float32 and float64"):
        tilegemm.bitdiff(np.zeros(2, f32), np.zeros(2))
    with pytest.raises(TypeError, match="got <U1"):
        tilegemm.bitdiff(np.array(["a"]), np.array(["b"]))


def test_the_usual_stand_in_differs_by_rounding():
    """The README's comparison: the same BF16 inputs through float32 numpy.matmul differ from
    the AMX bits in many elements, each by no more than accumulated float32 rounding allows."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 32)).astype(ml_dtypes.bfloat16)
    amx = tilegemm.matmul(a, b)
    std = a.astype(f32) @ b.astype(f32)
    d = tilegemm.bitdiff(amx, std)
    assert d.count > d.total // 4
    bound = 256 * 2.0**-23 * (np.abs(a.astype(f32)) @ np.abs(b.astype(f32)))
    assert np.all(np.abs(amx.astype(float) - std) <= bound)

"""bitdiff on 16-bit float results (PyTorch's bf16 and fp16 outputs)."""

from __future__ import annotations

import numpy as np
import pytest

import tilegemm
from tilegemm.formats import bf16_dtype


@pytest.mark.parametrize("dtype", [bf16_dtype(), np.dtype(np.float16)], ids=["bfloat16", "float16"])
def test_bitdiff_16_bit_floats(dtype):
    x = np.array([1.0, 2.0, np.nan, 0.0, -3.0, np.inf], np.float32).astype(dtype)
    y = x.copy()
    assert tilegemm.bitdiff(x, y).identical
    y[3] = -0.0  # +0 and -0 differ, 0 ulp apart
    d = tilegemm.bitdiff(x, y)
    assert (d.count, d.max_ulp, d.first) == (1, 0, (3,))
    bits = y.view(np.uint16)
    bits[1] += 1  # the next value up: one ulp of the 16-bit format
    bits[4] += 2  # two steps further from zero
    d = tilegemm.bitdiff(x, y)
    assert (d.count, d.max_ulp) == (3, 2)
    nan2 = x.copy()
    nan2.view(np.uint16)[2] ^= 1  # another NaN payload: a difference, counted apart too
    d = tilegemm.bitdiff(x, nan2)
    assert (d.count, d.nan_payloads, d.first) == (1, 1, (2,))
    nan2[0] = np.nan
    d = tilegemm.bitdiff(x, nan2)
    assert d.count == 2 and d.nan_payloads == 1 and d.nan_mismatch.tolist() == [[0]]


def test_bitdiff_refuses_mixed_dtypes():
    with pytest.raises(TypeError, match="one dtype"):
        tilegemm.bitdiff(np.zeros(2, np.float16), np.zeros(2, bf16_dtype()))

"""PyTorch's own bf16 kernels (``tilegemm.kernels.aten``): the binary32 rounding they run every
step through, and each kernel against the readable reference (``tilegemm.reference.aten``)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegemm.kernels import aten
from tilegemm.reference import aten as ref


def test_r32_is_binary32_rounding():
    """``r32`` against the hardware's own float64 -> float32 conversion (IEEE, gradual
    underflow, under the default MXCSR), over the normal range, the denormal range, ties and
    overflow."""
    rng = np.random.default_rng(7)
    s = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 130, 20000).astype(np.float64))
    ties = (rng.integers(1, 1 << 24, 2000) + 0.5) * np.exp2(rng.integers(-180, 100, 2000).astype(np.float64))
    s = np.concatenate([s, ties, -ties, [0.0, -0.0, 2.0**-150, 2.0**-149 * 1.5, 2.0**128 - 2.0**103, 3e38 * 2]])
    with np.errstate(over="ignore"):
        want = s.astype(np.float32)
    got = np.array([aten.r32(x) for x in s]).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _operands(rng, shape, kind):
    if kind == "normal":
        v = rng.standard_normal(shape)
    elif kind == "tiny":  # sums in the denormal range
        v = rng.standard_normal(shape) * 2.0**-66
    else:  # products that overflow
        v = rng.standard_normal(shape) * 2.0**64
    bits = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("kind", ["normal", "tiny", "huge"])
@pytest.mark.parametrize("K", [1, 3, 4, 7, 16, 17, 63, 64, 65, 100, 143, 200])
def test_kernels_follow_the_reference(K, kind):
    rng = np.random.default_rng(K)
    A = _operands(rng, (2, 5, K), kind)
    B = _operands(rng, (2, K, 7), kind)
    W = np.ascontiguousarray(np.swapaxes(B, -1, -2))
    with np.errstate(all="ignore"):
        for name, rhs in (("notrans", B), ("transa", W), ("sequential", B)):
            out = np.empty((2, 5, 7), np.float32)
            codes = [(np.ascontiguousarray(v).view(np.uint32) >> 16).astype(np.uint16) for v in (A, rhs)]
            getattr(aten, name)(*codes, aten.VALUES, out)
            want = ref.dot(A[:, :, None, :], W[:, None, :, :], name)
            assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), name

"""PyTorch's own bf16 kernels (``tilegemm.kernels.aten``): the binary32 rounding they run every
step through, and each kernel against the readable reference (``tilegemm.reference.aten``)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegemm.formats import kernel_input
from tilegemm.kernels import aten
from tilegemm.onednn import chains
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
            codes = [kernel_input((np.ascontiguousarray(v).view(np.uint32) >> 16).astype(np.uint16)) for v in (A, rhs)]
            getattr(aten, name)(*codes, aten.VALUES, out)
            want = ref.dot(A[:, :, None, :], W[:, None, :, :], name)
            assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), name
            if name != "sequential":  # the binary32 kernels, where their proof holds: only normal data
                assert chains.binary32_steps_hold(*codes) == (kind == "normal")
                if kind == "normal":
                    fused = np.empty((2, 5, 7), np.float32)
                    _fast(name, *codes, fused)
                    assert np.array_equal(fused.view(np.uint32), want.view(np.uint32)), name + "_fast"


def _fast(name, A, B, out):
    """The binary32 kernel of ATen's order ``name`` on bf16 codes, passed as ``_run_aten`` passes
    them (read-only and C-contiguous: one compile per kernel)."""
    A, B = kernel_input(A), kernel_input(B)
    if name == "transa":
        aten.transa_fast(A, B, aten.VALUES, out)
    else:
        aten.notrans_fast(A, B, out)


@pytest.mark.parametrize(
    "name,nb,M,N,K",
    [
        ("notrans", 1, 1, 1, 1),
        ("notrans", 2, 5, 7, 3),  # no group of 4: the tail only, into partial 0
        ("notrans", 1, 4, 9, 64),
        ("notrans", 2, 7, 13, 130),  # tiles cut by M and N, a tail of 2
        ("notrans", 1, 2, 40, 259),  # B in 5 panels over two jobs
        ("transa", 1, 1, 1, 64),  # few rows of A: one output at a time, W as it lies
        ("transa", 2, 2, 33, 130),
        ("transa", 1, 19, 9, 15),  # the most rows that go one output at a time; tails only
        ("transa", 1, 21, 4, 64),  # whole register tiles from here on
        ("transa", 1, 20, 40, 1100),  # tiles cut by M and N; jobs of 32 rows of W; 17 blocks, both tails
        ("transa", 3, 22, 13, 513),
        ("transa", 1, 24, 9, 15),  # no block of 64: tails only
    ],
)
def test_binary32_kernels_tiles_change_no_bit(name, nb, M, N, K):
    """The binary32 kernels' register tiles, packed rows and panels, and transa_fast's few-rows
    path, at every edge of them, against the readable reference's order."""
    rng = np.random.default_rng(nb * 1000 + M * 100 + N + K)
    A = _operands(rng, (nb, M, K), "normal")
    W = _operands(rng, (nb, N, K), "normal")
    rhs = W if name == "transa" else np.swapaxes(W, -1, -2)
    assert chains.binary32_steps_hold(_codes(A), _codes(rhs))
    out = np.empty((nb, M, N), np.float32)
    _fast(name, _codes(A), _codes(rhs), out)
    want = ref.dot(A[:, :, None, :], W[:, None, :, :], name)
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32))


def _bf16(e, rng, shape):
    """bf16 values of biased exponent ``e``, random signs and fractions (float32)."""
    m = rng.integers(0, 128, shape).astype(np.uint32)
    s = rng.integers(0, 2, shape).astype(np.uint32) << 31
    return (s | (np.uint32(e) << 23) | (m << 16)).view(np.float32)


def _codes(x):
    return (np.ascontiguousarray(x).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize(
    "ea,ew,K,holds",
    [
        (71, 71, 130, True),  # products multiples of 2^-126 exactly, sums cancelling into 2^-126
        (70, 71, 130, False),  # ... of 2^-127: a sum may be a denormal
        (190, 180, 200, True),  # sums below 2^127
        (190, 180, 256, False),  # K of 9 bits: the bound reaches 2^128
    ],
)
def test_the_binary32_proof_at_its_edges(ea, ew, K, holds):
    """The proof's two bounds, each at the last exponents it accepts and the first it refuses;
    where it holds, the binary32 kernel gives the reference's bits, cancellations included."""
    rng = np.random.default_rng(ea + ew + K)
    A = _bf16(ea, rng, (1, 6, K))
    W = _bf16(ew, rng, (1, 9, K))
    # row 0 of A against column 1: products that cancel in pairs, in different lanes
    A[0, 0, 1::2] = A[0, 0, 0::2]
    W[0, 1, 1::2] = -W[0, 1, 0::2]
    assert chains.binary32_steps_hold(_codes(A), _codes(W)) == holds
    if holds:  # both binary32 kernels, B as transa and as notrans read it
        for name, rhs in (("transa", W), ("notrans", np.swapaxes(W, -1, -2))):
            out = np.empty((1, 6, 9), np.float32)
            _fast(name, _codes(A), _codes(rhs), out)
            want = ref.dot(A[:, :, None, :], W[:, None, :, :], name)
            assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), name


def test_the_binary32_proof_refuses_what_the_host_could_change():
    """A denormal operand (which DAZ would zero), an infinity or a NaN (whose NaNs are the host's
    own) is refused; operands of zeros are accepted (every product is zero)."""
    A = np.full((1, 2, 3), 0x3F80, np.uint16)
    for code in (0x0001, 0x8040, 0x7F80, 0xFF80, 0x7FC0, 0x7F81):
        W = np.full((1, 2, 3), 0x3F80, np.uint16)
        W[0, 1, 2] = code
        assert not chains.binary32_steps_hold(A, W), hex(code)
        assert not chains.binary32_steps_hold(W, A), hex(code)
    zeros = np.zeros((1, 2, 3), np.uint16)
    zeros[0, 0, 0] = 0x8000
    assert chains.binary32_steps_hold(zeros, A) and chains.binary32_steps_hold(A, zeros)

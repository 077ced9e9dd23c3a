"""The native VDPBF16PS GEMM, run for real on CPUs with AVX512_BF16, against the emulation.

On a CPU without AVX512_BF16 these tests are skipped (the instruction would fault); the check
that ``backend="native"`` then refuses is in ``test_native_api.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits, operands

import tilegemm
from tilegemm import native
from tilegemm.native import jit, vdp

pytestmark = pytest.mark.skipif(
    "avx512_bf16" not in native.this_host().flags, reason="this CPU has no AVX512_BF16 (VDPBF16PS)"
)


def _both(a, b, **kw):
    return (
        tilegemm.matmul(a, b, isa="avx512", backend="native", **kw),
        tilegemm.matmul(a, b, isa="avx512", **kw),
    )


def test_odd_product_first():
    """One pair, C = 2^24: odd product -2^24 first gives 0, then the even 1 gives 1. Even first
    would give 2^24 + 1 = 2^24 (a tie to even), then 0. The silicon must say 1, as the SDM."""
    a = np.array([[1.0, -(2.0**24)]])
    b = np.array([[1.0], [1.0]])
    out = np.full((1, 1), 2.0**24, np.float32)
    tilegemm.matmul(a, b, isa="avx512", backend="native", out=out, accumulate=True)
    assert out[0, 0] == 1.0
    # The documented example: 0 + 2^24 (odd), + 1 ties to 2^24, - 2^24 (odd) = 0, + 1 = 1.
    a = np.array([[1.0, 2.0**24, 1.0, -(2.0**24)]])
    got, want = _both(a, np.ones((4, 1)))
    assert got[0, 0] == 1.0
    assert_bits(got, want, "docs/vdpbf16ps.md example")


def test_daz_ftz_and_odd_k():
    """BF16 denormal read as zero; a tiny sum flushed to a zero of its sign; with odd K the
    padded odd pair runs first and turns a -0 accumulator into +0."""
    got, _ = _both(np.array([[2.0**-130]]), np.array([[2.0**100]]))
    assert got[0, 0] == 0.0
    got, _ = _both(np.array([[-(2.0**-70), -(2.0**-70)]]), np.array([[2.0**-70], [2.0**-70]]))
    assert got.view(np.uint32)[0, 0] == 0x80000000  # -0
    out = np.full((1, 1), -0.0, np.float32)
    tilegemm.matmul(np.array([[0.0]]), np.array([[1.0]]), isa="avx512", backend="native", out=out, accumulate=True)
    assert out.view(np.uint32)[0, 0] == 0  # fma(+0, +0, -0) = +0, then fma(0, 1, +0) = +0


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (5, 7, 3), (37, 65, 45), (64, 64, 64), (21, 513, 17)])
@pytest.mark.parametrize("threads", [1, 2])
def test_matches_emulation(M, K, N, threads):
    rng = np.random.default_rng([M, K, N])
    a, b = operands("bf16", (2, M, K), (K, N), rng, isa="avx512")
    got, want = _both(a, b, threads=threads)
    assert_bits(got, want, f"native VDPBF16PS M x N x K = {M} x {N} x {K}")
    c0 = (rng.standard_normal((2, M, N)) * 4).astype(np.float32)
    out, ref = c0.copy(), c0.copy()
    tilegemm.matmul(a, b, isa="avx512", out=ref, accumulate=True)
    tilegemm.matmul(a, b, isa="avx512", backend="native", out=out, accumulate=True, threads=threads)
    assert_bits(out, ref, "native VDPBF16PS, accumulate")


def test_the_callers_mxcsr_changes_nothing():
    """VDPBF16PS applies DAZ/FTZ and RNE whatever MXCSR holds (SDM); run on this thread with
    MXCSR's FTZ, DAZ and round-toward-zero set, the silicon gives the same bits."""
    from fpenv import DAZ, FTZ, mxcsr_flags

    rng = np.random.default_rng(11)
    a = _floats(rng, (16, 64), -66, -60)
    b = _floats(rng, (64, 16), -66, -60)
    c0 = rng.standard_normal((16, 16)).astype(np.float32) * np.float32(2.0**-125)
    want = c0.copy()
    tilegemm.matmul(a, b, isa="avx512", backend="native", out=want, accumulate=True, threads=1)
    got = c0.copy()
    with mxcsr_flags(FTZ | DAZ | (3 << 13)):
        tilegemm.matmul(a, b, isa="avx512", backend="native", out=got, accumulate=True, threads=1)
    assert_bits(got, want, "native VDPBF16PS under MXCSR FTZ|DAZ|RZ")
    ref = c0.copy()
    tilegemm.matmul(a, b, isa="avx512", out=ref, accumulate=True)
    assert_bits(want, ref, "native against emulated")


def _floats(rng, shape, lo, hi):
    return rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * np.exp2(rng.integers(lo, hi + 1, shape))


def test_auto_runs_it_natively():
    assert native.usable(tilegemm.instructions.INSTRUCTIONS["VDPBF16PS"])
    a, b = operands("bf16", (9, 40), (40, 9), np.random.default_rng(5), isa="avx512")
    assert_bits(tilegemm.matmul(a, b, isa="avx512", backend="auto"), tilegemm.matmul(a, b, isa="avx512"), "auto")


def test_the_loop_is_the_instruction():
    """The compiled loop's arithmetic is VDPBF16PS on zmm registers, four rows at a time."""
    text = jit.assembly(vdp.vdp_ir("v"), "sapphirerapids", "+avx512bf16")
    assert text.count("vdpbf16ps") >= vdp.ROWS + 1 and "zmm" in text
    assert "vfmadd" not in text

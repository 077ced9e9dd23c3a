"""The other CPUs' tile bodies (kernels/isa.py) over several K steps in one call, C held in
registers, against the same steps one call at a time (C through memory after each)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits, link_half_helpers
from numba import literally, njit

from tilegemm.kernels import gemm, isa, tiles
from tilegemm.kernels._cache import stamp_with_dependencies

STEPS = 3


@njit(cache=True)
def _run(A, B, C, scratch, lda, b_step, mr, nc, together, variant):
    """``variant``'s body through the dispatch the superblock loop calls it by
    (``tiles.tile_steps``): the STEPS steps in one call, or one call per step."""
    literally(variant)  # the body is chosen at compile time, as in the loop
    a_step = 16 * lda
    if together:
        tiles.tile_steps(A, 0, lda, mr, B, 0, C, 0, 16, nc, scratch, variant, (), 0, 0, 0, STEPS, b_step)
    else:
        for t in range(STEPS):
            tiles.tile_steps(A, t * a_step, lda, mr, B, t * b_step, C, 0, 16, nc, scratch, variant, (), 0, 0, 0, 1, 0)


# Cached (a closure over a body would compile on every run) and stamped with the kernel sources
# it compiles in, so that an edit to a body recompiles it.
stamp_with_dependencies(_run, gemm.DEPENDENCIES)


def _operands(variant, rng):
    """A panels (16 rows x k_step per step), B blocks, a start C and the element counts."""
    if variant in (isa.I8SAT, isa.I16PAIRS):
        k_step = 64
        a = rng.integers(-128, 128, STEPS * 16 * k_step).astype(np.int8)
        b = rng.integers(-128, 128, STEPS * k_step * 16).astype(np.int8)
        a[::7] = 127  # saturating pairs and quads
        b[::5] = -128
        c = rng.integers(-(2**31), 2**31, 256).astype(np.int32)
        c[:16] = 2**31 - 1000  # int32 saturation within the chain
        return a, b, c, k_step
    k_step = 32
    pool = np.float16([0.0, -0.0, np.inf, -np.inf, np.nan, 6e-8, -6e-8, 65504.0, 2.0**-14, -3.5])
    a = rng.standard_normal(STEPS * 16 * k_step).astype(np.float16)
    b = rng.standard_normal(STEPS * k_step * 16).astype(np.float16)
    for x in (a, b):
        special = rng.random(x.size) < 0.03
        x[special] = rng.choice(pool, int(special.sum()))
    if variant in (isa.F16ACC, isa.F16ACC_NATIVE):
        c = (rng.standard_normal(256) * 8).astype(np.float16).view(np.uint16)
        if variant == isa.F16ACC_NATIVE:  # binary16 codes throughout
            return a.view(np.uint16), b.view(np.uint16), c, k_step
    else:
        c = (rng.standard_normal(256) * 8).astype(np.float32)
        if variant == isa.F32FMA_FAST:  # its proof: no denormal operand, nothing tiny, nothing special
            a = np.where(np.isfinite(a) & (np.abs(a) >= 2.0**-14), a, 1.0).astype(np.float16)
            b = np.where(np.isfinite(b) & (np.abs(b) >= 2.0**-14), b, 1.0).astype(np.float16)
    return a.astype(np.float32), b.astype(np.float32), c, k_step


@pytest.mark.parametrize(
    "variant",
    [isa.I8SAT, isa.I16PAIRS, isa.F32FMA_FAST, isa.F32FMA_EXACT, isa.F16ACC, isa.F16ACC_NATIVE],
    ids=lambda v: str(v),
)
def test_steps_in_one_call_equal_one_call_per_step(variant):
    """A whole tile (C in place) and a partial one (C through the scratch block)."""
    assert variant in isa.TILE_BODIES and variant in tiles.STEP_BODIES
    if variant == isa.F16ACC_NATIVE:
        link_half_helpers()

    rng = np.random.default_rng(variant)
    a, b, c, k_step = _operands(variant, rng)
    if variant == isa.I16PAIRS:
        a = a.view(np.uint8)  # unsigned activations here, signed ones (shifted by +128) for I8SAT
    # A's rows padded by 8 elements (never read), so that A's panels and B's blocks lie at
    # different strides: a body that swapped them would read the wrong elements.
    lda = k_step + 8
    a = np.pad(a.reshape(-1, k_step), ((0, 0), (0, 8)), constant_values=a.dtype.type(1)).ravel()
    for mr, nc in ((16, 16), (5, 11)):
        out = {}
        for together in (True, False):
            C = c.copy()
            _run(a, b, C, np.zeros(256, c.dtype), lda, 16 * k_step, mr, nc, together, variant)
            out[together] = C
        # C's codes as values: NaN payloads are not compared
        view = np.float16 if variant in (isa.F16ACC, isa.F16ACC_NATIVE) else c.dtype
        assert_bits(out[True].view(view), out[False].view(view), f"variant {variant}, {mr} x {nc}")
        assert not np.array_equal(out[True].view(np.uint8), c.view(np.uint8)), "the steps changed nothing"

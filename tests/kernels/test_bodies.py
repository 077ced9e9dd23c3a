"""The float bodies' layouts against each other, on any host (the kernel tester checks each
host's own table row against the reference; this covers the rows other hosts run)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits
from numba import njit

from tilegemm.kernels import bodies
from tilegemm.kernels.bodies import BSRC_FP16


def _run(fn, A, B, C, steps, cols):
    @njit
    def call(A, B, C):
        fn(A, 0, 32 * steps, B, 0, steps * 256, 256, C, 0, cols, steps, 16)

    out = C.copy()
    call(A, B, out)
    return out


@pytest.mark.parametrize("rows,cols,width", [(2, 16, 8), (1, 16, 8), (3, 32, 8), (2, 16, 16), (2, 32, 16)])
def test_interleaved_fp16_body_equals_the_split_one(rows, cols, width):
    """Same fma32 chains, same final adds: the same bits for every input a fast body is given,
    specials included. No NaN operand: the driver sends a block holding one to the exact path,
    since which of several NaN operands an FMA returns is the order LLVM gives its operands, not
    the IR's (on AVX2, a 16-wide body's halves differed so in one NaN's payload). The NaNs that
    infinities make (Inf * 0, Inf - Inf) are the same default NaN in any order, and are kept."""
    steps = 3
    rng = np.random.default_rng([rows, cols, width])
    pool = np.float16([0.0, -0.0, np.inf, -np.inf, 6e-8, -6e-8, 65504.0, 1.0, -3.5])
    halves = rng.standard_normal(cols // 16 * steps * 512).astype(np.float16)
    special = rng.random(halves.size) < 0.05
    halves[special] = rng.choice(pool, int(special.sum()))
    B = halves.view(np.uint32).copy()
    A = (rng.standard_normal(rows * 32 * steps) * 2.0 ** rng.integers(-20, 20, rows * 32 * steps)).astype(np.float32)
    A[::37] = np.float32(np.inf)
    C = (rng.standard_normal(rows * cols) * 8).astype(np.float32)
    split = bodies.float_body("pairs", rows, cols, width, BSRC_FP16, "fast", 4)
    inter = bodies.float_body("pairs", rows, cols, width, BSRC_FP16, "fast", 4, "interleaved")
    got, want = _run(inter, A, B, C, steps, cols), _run(split, A, B, C, steps, cols)
    assert np.isnan(want).any(), "the infinities made no NaN: the case lost its point"
    assert_bits(got, want, f"{rows}x{cols}/{width}")


def test_interleaved_layout_is_fp16_pairs_only():
    with pytest.raises(AssertionError, match="TDPFP16PS"):
        bodies.float_body("pairs", 2, 16, 8, bodies.BSRC_BF16, "fast", 4, "interleaved")

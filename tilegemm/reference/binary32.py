"""binary32 arithmetic with AMX's rounding rules, element-wise over NumPy arrays.

``fma32`` and ``add32`` are one IEEE binary32 operation each, round-to-nearest-even, with
MXCSR.DAZ|FTZ behaviour: a denormal operand is read as a zero of its sign, and a tiny result
(below 2^-126 after rounding to 24 bits with an unbounded exponent) is written as a zero of its
sign (``docs/semantics.md``, "Rounding"). They are ufuncs over the scalar functions of
``tilegemm.kernels.exact``: the reference and the kernels' exact path run one implementation of
the rounding, and ``tests/test_reference.py`` checks it against exact rational arithmetic.
"""

from __future__ import annotations

import numpy as np
from numba import vectorize

from ..formats import daz
from ..kernels import exact

__all__ = ["fma32", "add32", "daz", "fma32_read", "add32_read"]


@vectorize(["float32(float32, float32, float32)"], cache=True)
def fma32_read(a, b, c):
    """fma32 on operands already read (DAZ applied where the instruction applies it)."""
    return exact.fma32(a, b, c)


@vectorize(["float32(float32, float32)"], cache=True)
def add32_read(x, y):
    """add32 on operands already read."""
    return exact.add32(x, y)


def fma32(a, b, c) -> np.ndarray:
    """One binary32 fused multiply-add ``a * b + c``: RNE, DAZ on the operands, FTZ on the result."""
    with np.errstate(all="ignore"):  # NaN, inf and overflow are results here, not accidents
        return np.asarray(fma32_read(daz(a), daz(b), daz(c)), np.float32)


def add32(x, y) -> np.ndarray:
    """One binary32 addition: RNE, DAZ on the operands, FTZ on the result."""
    with np.errstate(all="ignore"):
        return np.asarray(add32_read(daz(x), daz(y)), np.float32)

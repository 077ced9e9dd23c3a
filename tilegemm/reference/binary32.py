"""binary32 arithmetic with AMX's rounding rules, element-wise over NumPy arrays.

``fma32`` and ``add32`` are one IEEE binary32 operation each, round-to-nearest-even, with
MXCSR.DAZ|FTZ behaviour: a denormal operand is read as a zero of its sign, and a tiny result
(below 2^-126 after rounding to 24 bits with an unbounded exponent) is written as a zero of its
sign (``docs/semantics.md``, "Rounding"). They are ufuncs over the scalar functions of
``tilegemm.kernels.exact``: the reference and the kernels' exact path run one implementation of
the rounding, and ``tests/test_reference.py`` checks it against exact rational arithmetic.

A NaN result is the one an x86 core returns (``docs/semantics.md``, "NaN bits"): the scalar
functions apply the rule themselves (``exact.nan_fma32``, ``exact.nan_add32``). ``fma32_x86`` and
``add32_x86`` spell the same rule out in NumPy, with the negated product AMX-COMPLEX needs; the
tests hold the two spellings to each other.
"""

from __future__ import annotations

import numpy as np

from ..formats import daz
from ..kernels import exact, rounding
from ..kernels._cache import lazy_vectorize

# The kernel modules the ufuncs inline: a change to one recompiles the cached code.
_DEPENDS = (exact, rounding)

__all__ = ["fma32", "add32", "daz", "fma32_read", "add32_read", "fma32_x86", "add32_x86", "quiet", "INDEF"]


@lazy_vectorize(["float32(float32, float32, float32)"], _DEPENDS)
def fma32_read(a, b, c):
    """fma32 on operands already read (DAZ applied where the instruction applies it)."""
    return exact.fma32(a, b, c)


@lazy_vectorize(["float32(float32, float32)"], _DEPENDS)
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


# -- x86's NaN results (SSE order), for the instructions whose NaN outputs tilegemm spells out ------

#: The x86 default NaN ("QNaN floating-point indefinite").
INDEF = np.uint32(0xFFC00000)
_QUIET = np.uint32(0x00400000)


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _value(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def quiet(x) -> np.ndarray:
    """The NaN ``x`` with its quiet bit set (sign and payload kept)."""
    return _value(_bits(x) | _QUIET)


def fma32_x86(a, b, c, *, negate_product: bool = False) -> np.ndarray:
    """``fma32`` on operands already read, with the NaN x86 returns: a or b NaN -> the first of
    them, quieted; else c NaN -> c quieted, even when a * b is Inf * 0; else a new NaN (Inf * 0,
    Inf - Inf) -> INDEF. ``negate_product`` computes ``-(a*b) + c``, a NaN operand keeping its
    sign. Broadcasts like a ufunc."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float32), np.asarray(b, np.float32), np.asarray(c, np.float32))
    with np.errstate(all="ignore"):
        r = fma32_read(-a if negate_product else a, b, c)
    out = np.where(np.isnan(r), _value(INDEF), r)
    out = np.where(np.isnan(c), quiet(c), out)
    out = np.where(np.isnan(b), quiet(b), out)
    out = np.where(np.isnan(a), quiet(a), out)
    return np.asarray(out, np.float32)


def add32_x86(x, y) -> np.ndarray:
    """``add32`` on operands already read, with the NaN x86 returns: x NaN -> x quieted; else y
    NaN -> y quieted; else +Inf + -Inf -> INDEF."""
    x, y = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32))
    with np.errstate(all="ignore"):
        r = add32_read(x, y)
    out = np.where(np.isnan(r), _value(INDEF), r)
    out = np.where(np.isnan(y), quiet(y), out)
    out = np.where(np.isnan(x), quiet(x), out)
    return np.asarray(out, np.float32)

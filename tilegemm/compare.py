"""``bitdiff``: the one way tilegemm compares two results.

Two results agree when every non-NaN element has the same bit pattern (so +0 and -0 differ) and
both have NaN in the same places; NaN payloads are not compared (SEMANTICS.md, "NaN"). Tests, the
demo and users validating their own ports all go through this function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BitDiff", "bitdiff"]


@dataclass(frozen=True)
class BitDiff:
    """How far two arrays are apart, bitwise.

    Attributes
    ----------
    count : int
        Elements whose bits differ (a NaN-mask disagreement counts; two NaNs do not).
    total : int
        Elements compared.
    max_ulp : int
        Largest distance in units in the last place among elements that are both non-NaN
        (floats: steps between the two values on their format's number line, binary32 or
        binary16, +0 and -0 being 0 apart; integers: the absolute difference).
    nan_mismatch : numpy.ndarray
        Indices (as from ``numpy.argwhere``) where exactly one side is NaN.
    first : tuple or None
        Index of the first differing element, for messages.
    """

    count: int
    total: int
    max_ulp: int
    nan_mismatch: np.ndarray
    first: tuple | None

    @property
    def share(self) -> float:
        """Fraction of elements whose bits differ."""
        return self.count / self.total if self.total else 0.0

    @property
    def identical(self) -> bool:
        return self.count == 0

    def __bool__(self) -> bool:  # "is there a difference?"
        return self.count != 0

    def __str__(self) -> str:
        if self.identical:
            return f"bit-identical ({self.total} elements)"
        return (
            f"{self.count} of {self.total} elements differ ({self.share:.2%}), max {self.max_ulp} ulp, "
            f"{len(self.nan_mismatch)} NaN-mask mismatches, first at {self.first}"
        )


def _ordered(x: np.ndarray) -> np.ndarray:
    """binary32 (or binary16) bits -> integers in numeric order (+0 and -0 both map to 0)."""
    signed = np.dtype(f"i{x.dtype.itemsize}")
    bits = x.view(signed).astype(np.int64)
    return np.where(bits < 0, -(bits & (2 ** (8 * x.dtype.itemsize - 1) - 1)), bits)


def bitdiff(x, y) -> BitDiff:
    """Compare two float32 (or float16) or int32 results bit for bit.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> d = tilegemm.bitdiff(np.float32([1, np.nan, 0.0]), np.float32([1, np.nan, -0.0]))
    >>> d.count, d.max_ulp
    (1, 0)
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.shape != y.shape:
        raise ValueError(f"bitdiff needs arrays of one shape, got {x.shape} and {y.shape}")
    if x.dtype != y.dtype:
        raise TypeError(f"bitdiff needs arrays of one dtype, got {x.dtype} and {y.dtype}")
    if x.dtype in (np.float32, np.float16):  # binary16: the FP16-accumulator profile's results
        nx, ny = np.isnan(x), np.isnan(y)
        both = ~nx & ~ny
        unsigned = np.dtype(f"u{x.dtype.itemsize}")
        differ = (x.view(unsigned) != y.view(unsigned)) & both
        differ |= nx != ny
        ulp = np.abs(_ordered(x) - _ordered(y))
        ulp = np.where(both, ulp, 0)
    elif x.dtype.kind in "iu":
        nx = ny = np.zeros(x.shape, bool)
        differ = x != y
        ulp = np.abs(x.astype(np.int64) - y.astype(np.int64))
    else:
        raise TypeError(f"bitdiff compares float32, float16 or integer results, got {x.dtype}")
    where = np.argwhere(differ)
    return BitDiff(
        count=int(differ.sum()),
        total=int(x.size),
        max_ulp=int(ulp.max()) if ulp.size else 0,
        nan_mismatch=np.argwhere(nx != ny),
        first=tuple(int(i) for i in where[0]) if len(where) else None,
    )

"""``bitdiff``: the one way tilegemm compares two results.

Two results agree when every element has the same bit pattern: +0 and -0 differ, and so do two
NaNs of another sign or payload (docs/semantics.md, section 8). Those NaN-against-NaN differences
are also counted on their own (``nan_payloads``), so that a NaN rule that differs reads as such.
Tests, the demo and users validating their own ports all go through this function.
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
        Elements whose bits differ (two NaNs of other bits included).
    total : int
        Elements compared.
    max_ulp : int
        Largest distance in units in the last place among elements that are both non-NaN and
        not of opposite signs (floats: steps between the two values on the binary32 number line,
        +0 and -0 being 0 apart; integers: the absolute difference). A distance across zero
        counts every binary32 value between the two and says nothing useful, so pairs of
        opposite sign are counted in ``sign_flips`` instead.
    sign_flips : int
        Float elements where both values are non-zero, non-NaN and of opposite signs.
    nan_mismatch : numpy.ndarray
        Indices (as from ``numpy.argwhere``) where exactly one side is NaN.
    first : tuple or None
        Index of the first differing element, for messages.
    nan_payloads : int
        Of ``count``, the elements that are NaN on both sides with different bits (payload or
        sign).
    """

    count: int
    total: int
    max_ulp: int
    nan_mismatch: np.ndarray
    first: tuple | None
    sign_flips: int = 0
    nan_payloads: int = 0

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
        n = self.nan_payloads
        payloads = f", {n} NaN{'s' if n > 1 else ''} differing in payload or sign" if n else ""
        if self.identical:
            return f"bit-identical ({self.total} elements)"
        if n == self.count:
            return (
                f"{n} of {self.total} elements differ ({self.share:.2%}), only in NaN payload or sign, "
                f"first at {self.first}"
            )
        flips = f", {self.sign_flips} of opposite sign" if self.sign_flips else ""
        return (
            f"{self.count} of {self.total} elements differ ({self.share:.2%}), max {self.max_ulp} ulp"
            f"{flips}, {len(self.nan_mismatch)} NaN-mask mismatches{payloads}, first at {self.first}"
        )


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _is_float(dt: np.dtype) -> bool:
    """IEEE-style floats: NumPy's, and ml_dtypes' (bfloat16, float8_*), whatever their kind."""
    return dt.kind == "f" or (dt.type.__module__ == "ml_dtypes" and dt.itemsize in _UINT)


def _float_part(x: np.ndarray, y: np.ndarray):
    """(differ, ulp, opposite, NaN of x, NaN of y, NaN on both sides with other bits) for one
    float array pair, element-wise."""
    uint = _UINT[x.dtype.itemsize]
    wide = np.float64 if x.dtype.itemsize == 8 else np.float32
    nx, ny = np.isnan(x.astype(wide)), np.isnan(y.astype(wide))
    both = ~nx & ~ny
    bx, by = x.view(uint), y.view(uint)
    differ = (bx != by) | (nx != ny)
    ox, oy = _ordered(bx), _ordered(by)
    opposite = both & (np.sign(ox) * np.sign(oy) < 0)
    ulp = np.where(both & ~opposite, np.abs(ox - oy), 0)
    payload = nx & ny & (bx != by)
    return differ, ulp, opposite, nx, ny, payload


def _ordered(bits: np.ndarray) -> np.ndarray:
    """A float's bit patterns -> integers in numeric order (+0 and -0 both map to 0). Python
    integers for 64-bit patterns would overflow int64 differences; floats up to 32 bits are exact."""
    top = np.uint64(1) << np.uint64(8 * bits.dtype.itemsize - 1)
    b = bits.astype(np.uint64)
    mag = (b & ~top).astype(np.int64)
    return np.where((b & top) != 0, -mag, mag)


def bitdiff(x, y) -> BitDiff:
    """Compare two results bit for bit: floats (float16, bfloat16, float32, float64, complex64/128:
    each part), or integers.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> d = tilegemm.bitdiff(np.float32([1, np.nan, 0.0]), np.float32([1, np.nan, -0.0]))
    >>> d.count, d.max_ulp
    (1, 0)
    >>> tilegemm.bitdiff(np.float32([1, -1e-45]), np.float32([np.nextafter(1, 2, dtype=np.float32), 1e-45])).sign_flips
    1
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.shape != y.shape:
        raise ValueError(f"bitdiff needs arrays of one shape, got {x.shape} and {y.shape}")
    if x.dtype != y.dtype:
        raise TypeError(f"bitdiff needs arrays of one dtype, got {x.dtype} and {y.dtype}")
    if x.dtype.kind in "ciu" or _is_float(x.dtype):
        # The common answer first: the same bytes (so the same NaN places) is bit-identical.
        if np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8)):
            return BitDiff(0, int(x.size), 0, np.empty((0, x.ndim), np.intp), None, 0)
    if x.dtype.kind == "c" or _is_float(x.dtype):
        parts = [(x.real, y.real), (x.imag, y.imag)] if x.dtype.kind == "c" else [(x, y)]
        results = [_float_part(np.ascontiguousarray(p), np.ascontiguousarray(q)) for p, q in parts]
        differ = np.logical_or.reduce([r[0] for r in results])
        ulp = np.maximum.reduce([r[1] for r in results])
        flips = int(np.logical_or.reduce([r[2] for r in results]).sum())
        nx = np.logical_or.reduce([r[3] for r in results])
        ny = np.logical_or.reduce([r[4] for r in results])
        payloads = int(np.logical_or.reduce([r[5] for r in results]).sum())
    elif x.dtype.kind in "iu":
        nx = ny = np.zeros(x.shape, bool)
        differ = x != y
        ulp = np.abs(x.astype(np.int64) - y.astype(np.int64))
        flips = payloads = 0
    else:
        raise TypeError(f"bitdiff compares float, complex or integer results, got {x.dtype}")
    where = np.argwhere(differ)
    return BitDiff(
        count=int(differ.sum()),
        total=int(x.size),
        max_ulp=int(ulp.max()) if ulp.size else 0,
        nan_mismatch=np.argwhere(nx != ny),
        first=tuple(int(i) for i in where[0]) if len(where) else None,
        sign_flips=flips,
        nan_payloads=payloads,
    )

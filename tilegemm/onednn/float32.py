"""binary32 additions on bit patterns for the oneDNN and ATen models, fast where that is exact."""

from __future__ import annotations

import math

import numpy as np

from ..api import _LAUNCH
from ..formats import kernel_input
from ..kernels.onednn import add_lanes
from ..kernels.onednn import add_tree as _add_tree

__all__ = ["add_tree", "stored", "vaddps"]


def vaddps(x, y, out: np.ndarray | None = None) -> np.ndarray:
    """binary32 bits ``x + y`` (IEEE, RNE, denormals kept), broadcast, into ``out`` if given
    (which may be ``x`` or ``y``): ``tilegemm.kernels.onednn.vaddps``'s bits, with the host's own
    addition on the lanes where that is exact (``add_lanes``)."""
    x = np.asarray(x, np.uint32)
    y = np.asarray(y, np.uint32)
    shape = np.broadcast_shapes(x.shape, y.shape)
    cols = shape[-1] if shape and shape[-1] else 1
    rows = math.prod(shape) // cols if cols else 0
    r = np.empty(shape, np.uint32)
    direct = out is not None and out.shape == shape and out.dtype == np.uint32 and out.flags.c_contiguous
    if out is not None and direct:
        r = out  # (add_lanes reads each row before it writes it)
    if r.size:
        with _LAUNCH:
            add_lanes(_rows(x, shape, rows, cols), _rows(y, shape, rows, cols), r.reshape(rows, cols))
    if out is not None and not direct:
        out[...] = r
        return out
    return r


def add_tree(leaves: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """binary32 bits: a fixed tree of :func:`vaddps` additions over ``leaves`` (n, ...), made in
    one pass that keeps each strip's sums in cache (``kernels.onednn.add_tree``). ``ops`` (k, 2):
    addition ``i`` adds values ``ops[i]`` in that order, value ``v < n`` being ``leaves[v]`` and
    ``v >= n`` the sum of addition ``v - n``; the last sum is returned, of shape ``leaves[0]``'s."""
    leaves = np.asarray(leaves)
    if leaves.dtype != np.uint32 or leaves.ndim < 1:
        raise ValueError(f"leaves must be binary32 bits (uint32, one row or more), not {leaves.dtype} {leaves.shape}")
    n = leaves.shape[0]
    flat = np.ascontiguousarray(leaves).reshape(n, -1)
    ops = np.asarray(ops, np.int64)
    if ops.ndim != 2 or ops.shape[1] != 2 or not len(ops):
        raise ValueError(f"ops must be a non-empty (k, 2) array of additions, not shape {ops.shape}")
    limit = n + np.arange(len(ops))  # each addition reads leaves and earlier sums only
    if (ops < 0).any() or (ops >= limit[:, None]).any():
        i = int(np.argmax((ops < 0).any(axis=1) | (ops >= limit[:, None]).any(axis=1)))
        raise ValueError(f"addition {i} reads value {ops[i].tolist()}: only 0 to {limit[i] - 1} exist then")
    out = np.empty(flat.shape[1], np.uint32)
    if out.size:
        with _LAUNCH:
            _add_tree(flat, ops, out)
    return out.reshape(leaves.shape[1:])


def _rows(v: np.ndarray, shape: tuple, rows: int, cols: int) -> np.ndarray:
    """``v`` broadcast to ``shape`` as ``add_lanes`` reads it: one row for all (a scalar, a
    bias), or every row, C-contiguous (another broadcast, such as a column, is copied out)."""
    core = stored(v)
    if core.size == 1:
        return kernel_input(np.full((1, cols), core.reshape(()), np.uint32))  # read-only: one compile
    if math.prod(core.shape[:-1]) == 1 and core.shape[-1] == cols:
        return kernel_input(core).reshape(1, cols)
    return kernel_input(np.broadcast_to(v, shape)).reshape(rows, cols)


def stored(v: np.ndarray) -> np.ndarray:
    """The part of ``v`` that is stored: its first element along each axis it is broadcast along
    (stride 0), so that a row expanded over a matrix (a bias) is handled as one row."""
    return v[tuple(slice(0, 1) if st == 0 else slice(None) for st in v.strides)]

"""binary32 additions on bit patterns for the oneDNN and ATen models, fast where that is exact."""

from __future__ import annotations

import numpy as np

from ..api import _LAUNCH
from ..formats import kernel_input
from ..kernels.onednn import add_lanes
from ..kernels.onednn import vaddps as _exact_add

__all__ = ["vaddps"]


def vaddps(x, y, out: np.ndarray | None = None) -> np.ndarray:
    """binary32 bits ``x + y`` (IEEE, RNE, denormals kept), broadcast, into ``out`` if given
    (which may be ``x`` or ``y``): ``tilegemm.kernels.onednn.vaddps``'s bits, with the host's own
    addition on the lanes where that is exact (``add_lanes``)."""
    x = np.asarray(x, np.uint32)
    y = np.asarray(y, np.uint32)
    shape = np.broadcast_shapes(x.shape, y.shape)
    cols = shape[-1] if shape and shape[-1] else 1
    # C-contiguous 2-D operands (a broadcast one copied out: the kernel vectorises on these)
    fx, fy = (kernel_input(np.broadcast_to(v, shape)).reshape(-1, cols) for v in (x, y))
    r = np.empty(fx.shape, np.uint32)
    special = np.empty(fx.shape, np.bool_)
    with _LAUNCH:
        add_lanes(fx, fy, fx.view(np.float32), fy.view(np.float32), r.view(np.float32), special)
    if special.any():
        lanes = np.nonzero(special)
        r[lanes] = _exact_add(fx[lanes], fy[lanes])
    if out is None:
        return r.reshape(shape)
    out[...] = r.reshape(shape)
    return out

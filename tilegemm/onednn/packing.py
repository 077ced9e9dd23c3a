"""Packing a B that is stored transposed (``F.linear``'s weight, ``x @ w.T``), in one pass.

``tilegemm.pack`` reads B row by row along N; for ``w.T`` of a row-major ``w`` (N, K) that walks
memory with a stride of K elements and takes several times longer than the product it feeds.
:func:`pack_transposed` reads ``w`` along its rows (K) instead and writes the same VNNI blocks
(``tilegemm.packing``: block (kb, nb), row r, column n, slot j holds ``B[32 kb + 2 r + j][16 nb +
n]`` = ``w[16 nb + n][32 kb + 2 r + j]``), zero-filled beyond B. It rearranges codes only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import workers
from ..instructions import resolve
from ..packing import TILE_N, TILE_ROWS, PackedB

__all__ = ["pack_transposed"]


@njit(cache=True, nogil=True)
def _pack_rows(worker, workers, w, dst):
    """w (nB, N, K) codes -> dst (nB, KB, NB, 16, 16, group), zero-filled beforehand: the column
    panels of worker ``worker`` of ``workers``."""
    nB, N, K = w.shape
    KB, NB, group = dst.shape[1], dst.shape[2], dst.shape[5]
    step = 16 * group
    for job in range(nB * NB * worker // workers, nB * NB * (worker + 1) // workers):
        b = job // NB
        nb = job % NB
        for kb in range(KB):  # one 1 KiB block at a time: 16 rows of w, 64 bytes of each
            for n in range(min(16, N - nb * 16)):
                row = w[b, nb * 16 + n]
                for r in range(16):
                    for j in range(group):
                        k = kb * step + r * group + j
                        if k < K:
                            dst[b, kb, nb, r, n, j] = row[k]


def pack_transposed(w_codes: np.ndarray, isa: str, dtype: str) -> PackedB:
    """The PackedB of ``B = w.swapaxes(-1, -2)`` from ``w`` (..., N, K) codes (any layout; read
    along K), identical to ``tilegemm.packing.pack_codes(B)``."""
    _, _, instr = resolve(isa, dtype)
    *batch, N, K = w_codes.shape
    kb = max(1, -(-K // instr.k_step))
    nb = max(1, -(-N // TILE_N))
    nbatch = int(np.prod(batch, dtype=np.int64))
    blocks = np.zeros((nbatch, kb, nb, TILE_ROWS, TILE_N, instr.group), w_codes.dtype)
    if K and N and nbatch:
        rows = np.ascontiguousarray(w_codes).reshape(nbatch, N, K)
        workers.run(_pack_rows, workers.count(rows.size), rows, blocks)
    data = blocks.view(np.uint8).reshape(tuple(batch) + (kb, nb, TILE_ROWS, 64))
    return PackedB(tuple(batch) + (K, N), dtype, data, isa)

"""B in the seed's VNNI tile-blocked layout: one contiguous 1 KiB block per (k-block, n-block).

``pack_b_bf16_vnni`` in the seed writes, for each k-block ``kb`` and n-block ``jb`` (in that order),
16 rows of 64 bytes, row ``r`` holding ``B[kb*32 + 2r + j][jb*16 + n]`` at 16-bit element ``2n + j``
(SEMANTICS.md, "VNNI layout"); INT8 packs quads the same way. That is exactly what ``TILELOADD``
with stride 64 reads. K is padded with zeros to whole tile steps and N to whole tiles.

This module rearranges bytes only; converting values is ``formats``' job.
"""

from __future__ import annotations

import numpy as np

from .formats import Format, get_format

__all__ = ["PackedB", "pack", "TILE_N", "TILE_ROWS"]

TILE_N = 16  # C tile columns (16 x 4 bytes)
TILE_ROWS = 16  # rows of a tile register


class PackedB:
    """A B operand (or a stack of them) packed for the tile multiply.

    Attributes
    ----------
    shape : tuple
        The logical shape ``(..., K, N)`` of B.
    dtype : str
        The tilegemm dtype it was packed for.
    data : numpy.ndarray
        The packed bytes, uint8 of shape ``(..., K_blocks, N_blocks, 16, 64)``: ``data[..., kb, nb]``
        is the 1 KiB block ``TILELOADD`` reads with stride 64.
    """

    __slots__ = ("shape", "dtype", "data", "_kernel_b", "_stats")

    def __init__(self, shape: tuple[int, ...], dtype: str, data: np.ndarray):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.data = data
        self._kernel_b: np.ndarray | None = None
        self._stats: object = None

    @property
    def format(self) -> Format:
        return get_format(self.dtype)

    def __repr__(self) -> str:
        return f"PackedB(shape={self.shape}, dtype={self.dtype!r}, {self.data.nbytes} bytes)"

    def __getstate__(self):
        return {"shape": self.shape, "dtype": self.dtype, "data": self.data}

    def __setstate__(self, state):
        self.__init__(state["shape"], state["dtype"], state["data"])

    def elements(self) -> np.ndarray:
        """The packed blocks as internal bits (uint16 for BF16/FP16): ``(..., KB, NB, 16, 16, group)``."""
        fmt = self.format
        blocks = self.data.view(fmt.bits(b_side=True))
        return blocks.reshape(blocks.shape[:-1] + (TILE_N, fmt.group))

    def unpack(self) -> np.ndarray:
        """B back in row-major form, as the rounded values the kernels multiply."""
        fmt = self.format
        *batch, K, N = self.shape
        el = self.elements()  # (..., KB, NB, R, n, g)
        nd = len(batch)
        axes = tuple(range(nd)) + tuple(nd + i for i in (0, 2, 4, 1, 3))  # (..., KB, R, g, NB, n)
        rows = el.transpose(axes)
        kb, nb = el.shape[nd], el.shape[nd + 1]
        full = rows.reshape(tuple(batch) + (kb * TILE_ROWS * fmt.group, nb * TILE_N))
        return np.ascontiguousarray(full[..., :K, :N]).view(fmt.b_element)

    def kernel_b(self) -> np.ndarray:
        """What the kernels read, ``(batch, KB, NB, 16, ...)`` (cached).

        Blocks are stored column-panel first, ``(batch, NB, KB, ...)``, so the blocks one C
        superblock reads along K are one contiguous stream. Integer kernels read the packed bytes
        (``[quad][n][4]``). Float kernels read exact float32 values with the pair split into
        planes, ``[pair][even/odd][n]``, so a vector of 16 columns loads in one go (kernels/tiles.py).
        """
        if self._kernel_b is None:
            el = self.elements()
            flat = el.reshape((-1,) + el.shape[-5:]).swapaxes(1, 2)
            if self.format.is_float:
                flat = flat.swapaxes(-1, -2)
                out = np.empty(flat.shape, np.float32)  # written once, in the final order
                self.format.to_kernel(flat, out=out)
                self._kernel_b = out
            else:
                self._kernel_b = np.ascontiguousarray(flat)
        return self._kernel_b


def pack(b, dtype: str = "bf16") -> PackedB:
    """Pack B (K x N, or a stack ``(..., K, N)``) into the VNNI tile-blocked layout.

    Values are converted to ``dtype`` once, exactly as :func:`tilegemm.matmul` converts them.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> p = tilegemm.pack(np.arange(6.0).reshape(3, 2))
    >>> p.shape, p.data.shape
    ((3, 2), (1, 1, 16, 64))
    >>> p.unpack().astype(float).tolist()
    [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    """
    fmt = get_format(dtype)
    b = np.asarray(b)
    if b.ndim < 2:
        raise ValueError(f"pack takes a B of at least 2 dimensions (K, N), got shape {b.shape}")
    return _pack_elements(fmt, fmt.to_bits(b, "b", b_side=True))


def _pack_elements(fmt: Format, el: np.ndarray) -> PackedB:
    """Internal bits (..., K, N) -> PackedB, in one compiled pass (``convert.pack_b``)."""
    from .convert import pack_b

    *batch, K, N = el.shape
    kb = max(1, -(-K // fmt.k_step))
    nb = max(1, -(-N // TILE_N))
    nbatch = int(np.prod(batch, dtype=np.int64))
    blocks = np.zeros((nbatch, kb, nb, TILE_ROWS, TILE_N, fmt.group), el.dtype)
    if K and N and nbatch:
        pack_b(el.reshape(nbatch, K, N), blocks)
    data = blocks.view(np.uint8).reshape(tuple(batch) + (kb, nb, TILE_ROWS, 64))
    return PackedB(tuple(batch) + (K, N), fmt.name, data)

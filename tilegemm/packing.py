"""Operands in the layouts the kernels read: B in the seed's VNNI tile blocks, A in tile panels.

``pack_b_bf16_vnni`` in the seed writes, for each k-block ``kb`` and n-block ``jb`` (in that
order), 16 rows of 64 bytes, row ``r`` holding ``B[kb*32 + 2r + j][jb*16 + n]`` at 16-bit element
``2n + j`` (``docs/semantics.md``, "The B operand"); INT8 packs quads the same way. That is
exactly what ``TILELOADD`` with stride 64 reads. K is padded with zeros to whole tile steps and
N to whole tiles, the blocks start on a 64-byte boundary. :class:`PackedB` holds that; the blocked
kernels read it as it is, with two small tables made on first use (each block's smallest exponent,
INT8 column sums); the superblock loop reads a form made on first use.

A is cut into panels of one tile (16 rows x one K step) each, contiguous, in a compiled pass that
also finds the exponent range the fast-path proof needs (``tilegemm.plan``).

Complex FP16 (AMX-COMPLEX) packs like the others with one dword per element (B is plain
row-major: group 1); its kernels read each element as its two parts side by side. The 8-bit
floats (AMX-FP8) pack as bytes in quads, like INT8, and their kernels read exact binary64 values.

The ACE families' layouts (MX values times their block scales, BF16 with denormals kept) are
built by ``tilegemm.ace``; a PackedB for an MX dtype carries B's block scales.

This module rearranges elements (widening 16-bit floats exactly where a kernel reads float32);
it never rounds: converting user values is ``formats``' job.
"""

from __future__ import annotations

import numpy as np

from . import ace, convert, float8, layouts, workers
from .formats import FP16, NumberFormat, check_fp8_overflow, kernel_input
from .instructions import DEFAULT_ISA, Instruction, resolve

__all__ = [
    "PackedB",
    "pack",
    "pack_codes",
    "a_panels",
    "build_a",
    "build_b",
    "tile_operands",
    "exponent_range",
    "tile_operands",
    "exponent_range",
    "aligned_zeros",
    "TILE_N",
    "TILE_ROWS",
]

TILE_N = 16  # C tile columns (16 x 4 bytes)
TILE_ROWS = 16  # rows of a tile register


def int_absmax(x: np.ndarray) -> int:
    """The largest magnitude of an integer array, as a Python int (0 when empty): no overflow at
    the type's minimum."""
    return max(-int(x.min()), int(x.max())) if x.size else 0


class PackedB:
    """A B operand (or a stack of them) packed for the tile multiply.

    Attributes
    ----------
    shape : tuple
        The logical shape ``(..., K, N)`` of B.
    dtype : str
        The dtype it was packed for (within profile ``isa``).
    isa : str
        The profile it was packed for; any profile whose instruction reads the same layout
        (:attr:`tilegemm.instructions.Instruction.b_layout`) can use it.
    instruction : Instruction
        The instruction record it was packed for.
    data : numpy.ndarray
        The packed bytes, uint8 of shape ``(..., K_blocks, N_blocks, 16, 64)``: ``data[..., kb, nb]``
        is the 1 KiB block ``TILELOADD`` reads with stride 64 (for ACE: 16 zmm rows, one K step each).
    scales : numpy.ndarray or None
        B's MX block scales (E8M0 codes, ``(..., ceil(K / 32), N)``) for the ACE MX dtypes, as given
        to :func:`pack`; None: every scale 1.0.
    """

    __slots__ = ("shape", "dtype", "isa", "instruction", "data", "scales", "_kernel_b", "_ranges", "_tables")

    def __init__(self, shape: tuple[int, ...], dtype: str, data: np.ndarray, isa: str = DEFAULT_ISA, scales=None):
        _, name, instr = resolve(isa, dtype)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = name
        self.isa = isa
        self.instruction = instr
        self.data = data
        self.scales = scales
        self._kernel_b: dict[str, np.ndarray] = {}
        self._ranges: dict[str, tuple[int, int] | None] = {}
        self._tables: dict[str, np.ndarray] = {}

    @property
    def format(self) -> NumberFormat:
        """B's number format."""
        return self.instruction.b

    def __repr__(self) -> str:
        return f"PackedB(shape={self.shape}, dtype={self.dtype!r}, isa={self.isa!r}, {self.data.nbytes} bytes)"

    def __getstate__(self) -> dict:
        return {"shape": self.shape, "dtype": self.dtype, "isa": self.isa, "data": self.data, "scales": self.scales}

    def __setstate__(self, state: dict) -> None:
        self.__init__(  # type: ignore[misc]
            state["shape"], state["dtype"], state["data"], state.get("isa", DEFAULT_ISA), state.get("scales")
        )

    def elements(self) -> np.ndarray:
        """The packed blocks as codes: ``(..., KB, NB, 16, 16, group)``."""
        instr = self.instruction
        blocks = self.data.view(instr.b.storage)
        return blocks.reshape(blocks.shape[:-1] + (TILE_N, instr.group))

    def holds_nan(self) -> bool:
        """Whether B holds a NaN (found once, kept)."""
        if "nan" not in self._tables:
            self._tables["nan"] = np.array(self.instruction.b.holds_nan(self.data.view(self.instruction.b.storage)))
        return bool(self._tables["nan"])

    def unpack(self) -> np.ndarray:
        """B back in row-major form, as the rounded values the kernels multiply."""
        instr = self.instruction
        *batch, K, N = self.shape
        el = self.elements()  # (..., KB, NB, R, n, g)
        nd = len(batch)
        axes = tuple(range(nd)) + tuple(nd + i for i in (0, 2, 4, 1, 3))  # (..., KB, R, g, NB, n)
        rows = el.transpose(axes)
        kb, nb = el.shape[nd], el.shape[nd + 1]
        full = rows.reshape(tuple(batch) + (kb * TILE_ROWS * instr.group, nb * TILE_N))
        return np.ascontiguousarray(full[..., :K, :N]).view(instr.b.element)

    def kernel_b(self, layout: str, daz: bool, options=None) -> np.ndarray:
        """What a kernel family reads, ``(batch, NB, KB, 16, ...)`` (made once per layout, kept):
        ``tilegemm.layouts`` says how each layout is built.

        Blocks are stored column-panel first, ``(batch, NB, KB, ...)``, so the blocks one C
        superblock reads along K are one contiguous stream. A layout may depend on the call's
        switches (``options``; ``Layout.keyed_by``).
        """
        lay = layouts.get(layout)
        key = f"{lay.key(options)}:{daz}"
        if key not in self._kernel_b:
            B, rng = lay.pack_b(self.instruction, daz, self.elements(), self.scales, options)
            self._kernel_b[key], self._ranges[key] = B, rng
        return self._kernel_b[key]

    def blocks(self, word: np.dtype | type) -> np.ndarray:
        """The packed blocks as the blocked kernels read them: ``(batch, KB, NB, 1024 // size)``
        of ``word`` (uint32: a dword per pair of 16-bit elements of one column; uint8: the bytes),
        a view of :attr:`data` (copied once, and kept, if the data is not contiguous)."""
        key = f"blocks:{np.dtype(word).str}"
        if key not in self._tables:
            d = self.data
            kb, nb = d.shape[-4], d.shape[-3]
            flat = d.reshape((-1, kb, nb, 1024))
            if not flat.flags.c_contiguous:
                flat = np.ascontiguousarray(flat)
            self._tables[key] = flat.view(word)
        return self._tables[key]

    def block_exponents(self) -> np.ndarray:
        """Per packed block, ``(batch, KB, NB)`` int16: the smallest biased binary32 exponent of
        its non-zero finite values as the instruction reads them (255: none; -1: a BF16 block
        holding a denormal), made once and kept. The blocked kernels decide each block's path
        from it (``tilegemm.plan``). 16-bit float formats only."""
        if "exponents" not in self._tables:
            codes = self.blocks(np.uint16)
            out = np.empty(codes.shape[:3], np.int16)
            if out.size:
                workers.run(convert.block_exponents, workers.count(codes.size), codes, self.format is FP16, out)
            self._tables["exponents"] = out
        return self._tables["exponents"]

    def column_sums(self) -> np.ndarray:
        """``(batch, NB * 16)`` int32: each column's sum over K of B's bytes (with their
        signedness), modulo 2^32, made once and kept (INT8 formats only): the correction the
        VNNI kernels apply where A and B have one signedness."""
        if "colsums" not in self._tables:
            blocks = self.blocks(self.format.storage)
            out = np.empty((blocks.shape[0], blocks.shape[2] * TILE_N), np.int32)
            if out.size:
                quads = blocks.reshape(blocks.shape[:3] + (TILE_ROWS, TILE_N, 4))
                workers.run(convert.column_sums, workers.count(quads.size), quads, out)
            self._tables["colsums"] = out
        return self._tables["colsums"]

    def int8_absmax(self) -> int:
        """The largest ``|b|`` of an INT8 B (the zero padding changes nothing), made once and kept."""
        if "absmax" not in self._tables:
            self._tables["absmax"] = np.array(int_absmax(self.data.view(self.format.storage)))
        return int(self._tables["absmax"])

    def exponent_range(self, layout: str, daz: bool, options=None) -> tuple[int, ...] | None:
        """The range of :meth:`kernel_b` that the layout's proof reads (made with it, kept)."""
        self.kernel_b(layout, daz, options)
        return self._ranges[f"{layouts.get(layout).key(options)}:{daz}"]


def aligned_zeros(shape: tuple[int, ...], dtype: np.dtype | type, align: int = 64) -> np.ndarray:
    """Zeros whose data starts on an ``align``-byte boundary. NumPy's large arrays start 16 bytes
    into a page, so every 64-byte vector load of a packed B block would straddle two cache lines;
    aligned, a tile block is 16 whole lines."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.zeros(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def exponent_range(x: np.ndarray, denormals: bool = False) -> tuple[int, int] | None:
    """Smallest and largest unbiased exponent of the non-zero finite values, or None.

    Takes binary32 arrays, and binary64 ones (the 8-bit floats' kernel operands). A binary32
    denormal counts as exponent -127, below every normal, so that the fast-path proof
    (``plan.fast_path_ok``) refuses it; the paths that read denormals as zero have zeroed them
    before they get here. ``denormals``: a binary32 denormal present makes the smallest exponent
    -149 instead (for a C that is not read with DAZ: its grid is 2^-149).
    """
    from .convert import exponent_bounds

    if x.size == 0:
        return None
    if x.dtype == np.float64:
        e = (np.ascontiguousarray(x).view(np.uint64) >> np.uint64(52)) & np.uint64(0x7FF)
        live = e[(e != 0) & (e != 0x7FF)]
        return (int(live.min()) - 1023, int(live.max()) - 1023) if live.size else None
    bits = np.ascontiguousarray(x).view(np.uint32).reshape(-1)
    bounds = workers.run(exponent_bounds, workers.count(bits.size), bits)
    lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
    if denormals and np.any(((bits & 0x7F800000) == 0) & ((bits & 0x007FFFFF) != 0)):
        return (-149, max(int(hi) - 127, -149))
    return None if lo > hi else (int(lo) - 127, int(hi) - 127)


def exponent_range64(x: np.ndarray) -> tuple[int, int] | None:
    """Smallest and largest exponent (``frexp``'s minus one) of the non-zero finite binary64 values
    (the 8-bit floats' kernel blocks), or None."""
    v = x[np.isfinite(x) & (x != 0)]
    if v.size == 0:
        return None
    e = np.frexp(v)[1] - 1
    return int(e.min()), int(e.max())


def build_b(
    instr: Instruction, lay: layouts.Layout, daz: bool, el: np.ndarray, scales=None, options=None, summary: bool = True
):
    """VNNI blocks of B's codes ``(..., KB, NB, 16, 16, group)`` as layout ``lay`` of the
    instruction layouts reads them, ``(batch, NB, KB, 16, ...)``, and the exponent range of their
    values (None for codes, and where there is no non-zero finite value).

    With ``lay.planes`` each group is split into planes of 16 columns (``[pair][even/odd][n]``,
    that is ``[k][n]``; a complex element ``[k][re/im][n]``), so a vector of 16 columns loads in one
    go; the values are the codes themselves (``lay.values`` None), the 8-bit floats' exact values,
    or the format's exact binary32 widening (denormals read as zero with ``daz``). ``summary``
    False: the range is not computed (None).
    """
    fmt = instr.b
    if fmt.lanes > 1:
        el = el.view(fmt.part.storage)  # type: ignore[attr-defined]  # an element's parts side by side
    flat = el.reshape((-1,) + el.shape[-5:]).swapaxes(1, 2)
    if lay.planes:
        flat = flat.swapaxes(-1, -2)
    values = lay.dtype
    if values is None:
        return np.ascontiguousarray(flat), None
    if fmt.minifloat is not None:  # the 8-bit floats' exact values
        vals = float8.decode_table(fmt, np.dtype(values).name)[np.ascontiguousarray(flat)]
        if not summary:
            return vals, None
        return vals, exponent_range64(vals) if values == np.float64 else exponent_range(vals)
    out = np.empty(flat.shape, np.float32)  # written once, in the final order
    fmt.widen_fn(daz)(flat, out=out.view(np.uint32))
    return out, (exponent_range(out) if summary else None)


def pack(b, dtype: str = "bf16", isa: str = DEFAULT_ISA, scales=None, fp8_overflow: str = "error") -> PackedB:
    """Pack B (K x N, or a stack ``(..., K, N)``) into the VNNI tile-blocked layout.

    Values are converted to ``dtype`` once, exactly as :func:`tilegemm.matmul` converts them
    (``fp8_overflow`` as there).
    ``scales``: for the ACE MX dtypes, B's block scales (E8M0, ``(..., ceil(K / 32), N)``; None:
    1.0), kept with the packed B; ``ValueError`` for any other dtype.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> p = tilegemm.pack(np.arange(6.0).reshape(3, 2))
    >>> p.shape, p.data.shape
    ((3, 2), (1, 1, 16, 64))
    >>> p.unpack().astype(float).tolist()
    [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    """
    check_fp8_overflow(fp8_overflow)
    _, name, instr = resolve(isa, dtype)
    b = instr.b.asarray(b, "b", name)
    if b.ndim < 2:
        raise ValueError(f"pack takes a B of at least 2 dimensions (K, N), got shape {b.shape}")
    ace.check_operand(instr, b, "b", name)
    sb = None
    if isinstance(scales, tuple) and len(scales) == 2 and any(s is None or np.ndim(s) == 2 for s in scales):
        raise TypeError(
            "pack takes B's block scales alone (scales=sb), not the (sa, sb) pair of matmul: A's scales "
            "come with each call"
        )
    if scales is not None:
        sb = ace.check_scales(instr, name, (None, scales), (1, b.shape[-2]), b.shape)[1]
    return pack_codes(instr.b.to_codes(b, "b", name, fp8_overflow), isa, name, sb)


def pack_codes(el: np.ndarray, isa: str, dtype: str, scales=None) -> PackedB:
    """B's codes (..., K, N) -> PackedB, in one compiled pass (``convert.pack_b``); ``scales``:
    B's checked MX block scales, kept with it."""
    _, _, instr = resolve(isa, dtype)
    *batch, K, N = el.shape
    kb = max(1, -(-K // instr.k_block))
    nb = max(1, -(-N // TILE_N))
    nbatch = int(np.prod(batch, dtype=np.int64))
    blocks = aligned_zeros((nbatch, kb, nb, TILE_ROWS, TILE_N, instr.group), el.dtype)
    if K and N and nbatch:
        workers.run(convert.pack_b, workers.count(el.size), kernel_input(el.reshape(nbatch, K, N)), blocks)
    data = blocks.view(np.uint8).reshape(tuple(batch) + (kb, nb, TILE_ROWS, 64))
    return PackedB(tuple(batch) + (K, N), dtype, data, isa, scales)


def a_panels(
    instr: Instruction, layout: str, a: np.ndarray, k_blocks: int, scales=None, options=None
) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """A (nA, M, K) as the kernels' panels ``(nA, M_tiles, k_blocks, 16, k_block)`` of ``layout``
    (``tilegemm.layouts``), and the range its proof reads (None: no non-zero finite value)."""
    return layouts.get(layout).pack_a(instr, a, k_blocks, scales, options)


def build_a(instr: Instruction, lay: layouts.Layout, a: np.ndarray, k_blocks: int, scales=None, options=None):
    """A (nA, M, K) as layout ``lay`` of the instruction layouts: panels ``(nA, M_tiles, k_blocks,
    16, k_block)`` (a complex element as its two parts: ``2 * k_block`` values), and, for values,
    the exponent range of the non-zero finite ones.

    ``a`` holds codes, or float32 values headed for the format, which the same compiled pass rounds
    (RNE) and widens (or, for an 8-bit float, a compiled pass before it; a format without a panel
    mode of its own is widened first and laid out as bits). Denormal inputs are read as zero where
    the instruction does so.
    """
    nA, M, K = a.shape
    fmt = instr.a
    panels = (nA, -(-M // TILE_ROWS), k_blocks, TILE_ROWS, instr.k_block * fmt.lanes)
    values = lay.dtype
    if values is None:  # the codes as they are; float32 headed for binary16 rounded first
        if a.dtype == np.float32:
            a = fmt.to_codes(a, "a", instr.mnemonic)
        A = np.zeros(panels, fmt.storage)
        workers.run(convert.pack_a_int, workers.count(a.size), kernel_input(a), A)
        return A, None
    if fmt.minifloat is not None:
        if a.dtype == np.float32:  # headed for an 8-bit float: rounded here (RNE, as ml_dtypes)
            a = fmt.f32_round(a.view(np.uint32))  # type: ignore[misc]
        A8 = np.zeros(panels, values)
        return A8, float8.pack_a(a, fmt, A8)
    if fmt.lanes > 1:
        a = np.ascontiguousarray(a).view(fmt.part.storage)  # type: ignore[attr-defined]  # (nA, M, 2K)
    f32 = a.dtype == np.float32
    mode = fmt.panel_mode(instr.daz_inputs, f32)
    out = np.zeros(panels, np.uint32)
    if mode is None:  # a format without a mode of its own: widened first, then laid out as bits
        codes = fmt.f32_round(a.view(np.uint32)) if f32 else a  # type: ignore[misc]
        a = np.ascontiguousarray(fmt.widen_fn(instr.daz_inputs)(codes), np.uint32)
        f32, mode = False, convert.MODE_BITS32
    # One compiled pass per dtype, whatever the caller's layout (a transposed A) and writeability.
    src = kernel_input(a.view(np.uint32) if f32 else a)
    shares = workers.run(convert.pack_a_float, workers.count(src.size), src, mode, out)
    lo, hi = min(s[0] for s in shares), max(s[1] for s in shares)
    return out.view(np.float32), (None if lo > hi else (int(lo), int(hi)))


def tile_operands(
    instr: Instruction, layout: str, a_codes: np.ndarray, b_codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Tile registers' contents as a kernel family's operands for one tile multiply: A as one
    panel ``(1, 1, 1, 16, ...)`` and B as one kernel block ``(1, 1, 1, 16, ...)``, zero-padded.

    ``a_codes``: (M, group*K4) codes of the A tile; ``b_codes``: (K4, N, group) codes of the B
    tile in VNNI order. The layout is the kernel family's (``tilegemm.layouts``). Runs no
    parallel code: the tile API calls it once per instruction.
    """
    lay = layouts.get(layout)
    m, kk = a_codes.shape
    panel = np.zeros((1, 1, 1, TILE_ROWS, instr.k_block), instr.a.storage)
    panel[0, 0, 0, :m, :kk] = a_codes
    if instr.a.lanes > 1:
        panel = panel.view(instr.a.part.storage)  # type: ignore[attr-defined]  # (re, im) side by side
    if lay.dtype is None:  # the codes
        A = panel
    elif instr.a.minifloat is not None:
        A = float8.decode_table(instr.a, lay.dtype.name)[panel]
    else:
        A = instr.a.widen_fn(instr.daz_inputs)(panel).view(np.float32)
    k4, n, g = b_codes.shape
    el = np.zeros((1, 1, TILE_ROWS, TILE_N, g), instr.b.storage)
    el[0, 0, :k4, :n] = b_codes
    return A, lay.pack_b(instr, instr.daz_inputs, el, summary=False)[0]

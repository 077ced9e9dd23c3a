"""One core's AMX tile unit: 8 tile registers, the palette-1 configuration, and counters.

Instructions are methods named after them; the tile multiplies (``tdpbf16ps`` ...) are made from
the instruction records of :mod:`tilegemm.instructions`, one method per record with a tile form.
Each checks every condition under which the SDM raises a fault before it changes anything, so a
fault leaves registers, configuration and counters exactly as they were. A multiply runs its
kernel family's tile entry point (``tilegemm.kernels.gemm``: the exact variant on the one tile), the exact
arithmetic of ``docs/semantics.md`` that the fast ``matmul`` path is tested against bit for bit.
Instructions with open points take their switches as keywords (``u.tdpbf8ps(0, 1, 2,
fp8_inf_cancel="sde_revive")``), defaulting to the normative readings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..dispatch import FAMILIES
from ..formats import daz
from ..instructions import INSTRUCTIONS, Instruction
from ..packing import tile_operands
from .ace import ACE_PALETTE, OUTER_INSTRUCTIONS, AceInstructions
from .config import COLSB, ROWS, GPFault, PFFault, TileConfig, UDFault

__all__ = ["TileUnit", "Counters", "TILE_INSTRUCTIONS"]

_NUM_TILES = 8
#: The instructions with a tile form, by TileUnit method name.
TILE_INSTRUCTIONS = {i.tile_method: i for i in INSTRUCTIONS.values() if i.tile_method is not None}


@dataclass
class Counters:
    """What the code executed: instructions by mnemonic, bytes moved, multiply-accumulates."""

    instructions: Counter
    bytes_loaded: int = 0
    bytes_stored: int = 0
    macs: int = 0

    @property
    def tile_loads(self) -> int:
        return self.instructions["tileloadd"]

    @property
    def multiplies(self) -> int:
        return sum(self.instructions[m] for m in TILE_INSTRUCTIONS)

    @property
    def outer_products(self) -> int:
        """ACE outer products executed."""
        return sum(self.instructions[m] for m in OUTER_INSTRUCTIONS)

    @property
    def vector_loads(self) -> int:
        """64-byte zmm loads (the ACE kernels' operands)."""
        return self.instructions["vmovdqu64"]

    @property
    def load_to_compute(self) -> float:
        """Tile loads per tile multiply (the seed's 1x1: 2.0)."""
        return self.tile_loads / self.multiplies if self.multiplies else float("nan")


class TileUnit(AceInstructions):
    """The state of one core's tile unit. Memory is a writable 1-D uint8 NumPy array ``buf``,
    addressed by byte ``offset`` and ``stride`` as C would address it through a pointer.

    ``native=True`` runs every load, store, TILEZERO and multiply on this CPU's tile registers
    (``tilegemm.native.unit``; faults are still checked first), so a program written against
    this API runs natively unchanged; ``tilegemm.native.NativeUnavailable`` where the CPU or the
    kernel does not allow it.

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm.amx import TileConfig, TileUnit
    >>> u = TileUnit()
    >>> u.ldtilecfg(TileConfig(rows=(1, 1, 1) + (0,) * 5, colsb=(4, 4, 4) + (0,) * 5))
    >>> mem = np.zeros(12, np.uint8)
    >>> mem[0:4] = np.float16([1, 2]).view(np.uint8)  # A: one FP16 pair
    >>> mem[4:8] = np.float16([3, 4]).view(np.uint8)  # B: one VNNI row with one pair
    >>> u.tileloadd(1, mem, 0, 4); u.tileloadd(2, mem, 4, 4); u.tilezero(0)
    >>> u.tdpfp16ps(0, 1, 2)
    >>> u.tile(0, np.float32)  # 1*3 + 2*4
    array([[11.]], dtype=float32)

    Palette 2 (ACE, ``tilegemm.amx.ace``): 16 x 64-byte tiles reached through zmm registers, the
    block-scale register ``bsr`` and the outer products (``u.top4mxhf8ps(dst, za, zb, imm8)``).
    """

    def __init__(self, native: bool = False):
        self.tiles = np.zeros((_NUM_TILES, ROWS, COLSB), np.uint8)
        self.bsr = np.full((2, 64), 0x7F, np.uint8)  # ACE's bsr0: halves H and L
        self.config: TileConfig | None = None
        self.counters = Counters(Counter())
        self._native = None
        if native:  # this CPU's tile registers (tilegemm.native.unit); raises where there are none
            from ..native.unit import NativeTiles

            self._native = NativeTiles.for_host()

    @property
    def native(self) -> bool:
        """Whether loads, stores, TILEZERO and the multiplies run on this CPU's tile registers."""
        return self._native is not None

    # -- state helpers ------------------------------------------------------------------------

    def _shape(self, instr: str, t: int) -> tuple[int, int]:
        if self.config is None:
            raise UDFault(
                instr, t, "tiles are not configured (no LDTILECFG with a palette 1 since reset or TILERELEASE)"
            )
        if not isinstance(t, (int, np.integer)) or not 0 <= t < _NUM_TILES:
            raise UDFault(instr, t, f"tile register {t!r} does not exist (TMM0..TMM7)")
        if self.config.palette == ACE_PALETTE:
            return ROWS, COLSB  # palette 2: every tile is 16 rows of 64 bytes
        rows, colsb = self.config.rows[t], self.config.colsb[t]
        if rows == 0:
            raise UDFault(instr, t, "the tile is not configured (rows = colsb = 0)")
        return rows, colsb

    def _not_palette2(self, instr: str, t) -> None:
        if self.config is not None and self.config.palette == ACE_PALETTE:
            raise UDFault(instr, t, "palette 2 (ACE) reaches tiles through zmm registers only (TILEMOVROW, TILEMOVCOL)")

    def _count(self, instr: str, **amounts) -> None:
        self.counters.instructions[instr] += 1
        for k, v in amounts.items():
            setattr(self.counters, k, getattr(self.counters, k) + v)

    @staticmethod
    def _span(instr, t, buf, offset, stride, rows, colsb) -> np.ndarray:
        """Byte addresses a load/store touches; #PF if any lies outside ``buf``."""
        if not isinstance(buf, np.ndarray) or buf.ndim != 1 or buf.dtype != np.uint8:
            raise TypeError(
                f"{instr}: memory must be a 1-D uint8 numpy array, got {type(buf).__name__} {getattr(buf, 'dtype', '')}"
            )
        starts = int(offset) + int(stride) * np.arange(rows, dtype=np.int64)
        lo, hi = int(starts.min()), int(starts.max()) + colsb
        if lo < 0 or hi > buf.size:
            raise PFFault(instr, t, f"rows reach bytes [{lo}, {hi}) but memory holds [0, {buf.size})")
        return starts

    # -- configuration ------------------------------------------------------------------------

    def ldtilecfg(self, cfg) -> None:
        """LDTILECFG: load a :class:`TileConfig` or its 64 bytes; palette 0 releases the tiles."""
        cfg = TileConfig.from_bytes(cfg) if isinstance(cfg, (bytes, bytearray, np.ndarray)) else cfg
        if not isinstance(cfg, TileConfig):
            raise TypeError(f"ldtilecfg takes a TileConfig or 64 bytes, got {type(cfg).__name__}")
        cfg.validate("ldtilecfg")
        if self._native is not None and cfg.palette == ACE_PALETTE:
            raise GPFault("ldtilecfg", None, "palette 2 (ACE) is not supported by this CPU")
        self._count("ldtilecfg")
        self.tiles[...] = 0  # LDTILECFG zeroes every tile
        if cfg.palette == ACE_PALETTE:
            self.bsr[...] = 0x7F  # ... and with palette 2 sets every block scale to 1.0
        self.config = None if cfg.palette == 0 else cfg

    def sttilecfg(self) -> bytes:
        """STTILECFG: the current 64-byte configuration (all zero when unconfigured)."""
        self._count("sttilecfg")
        return self.config.to_bytes() if self.config is not None else bytes(64)

    def tilerelease(self) -> None:
        """TILERELEASE: zero every tile and return to the unconfigured state."""
        self._count("tilerelease")
        self.tiles[...] = 0
        self.config = None

    # -- data movement ------------------------------------------------------------------------

    def tileloadd(self, t: int, buf: np.ndarray, offset: int, stride: int) -> None:
        """TILELOADD: ``rows`` rows of ``colsb`` bytes from ``buf[offset + r*stride]``; the rest
        of the register becomes zero."""
        rows, colsb = self._shape("tileloadd", t)
        self._not_palette2("tileloadd", t)
        starts = self._span("tileloadd", t, buf, offset, stride, rows, colsb)
        if self._native is not None:
            self._native.execute(self, ("load", int(t)), buf, offset, stride)
        else:
            data = buf[starts[:, None] + np.arange(colsb)]
            self.tiles[t] = 0
            self.tiles[t, :rows, :colsb] = data
        self._count("tileloadd", bytes_loaded=rows * colsb)

    def tilestored(self, t: int, buf: np.ndarray, offset: int, stride: int) -> None:
        """TILESTORED: the configured rows and bytes of tile ``t`` to ``buf[offset + r*stride]``."""
        rows, colsb = self._shape("tilestored", t)
        self._not_palette2("tilestored", t)
        starts = self._span("tilestored", t, buf, offset, stride, rows, colsb)
        if not buf.flags.writeable:
            raise PFFault("tilestored", t, "memory is read-only")
        if self._native is not None:
            self._native.execute(self, ("store", int(t)), buf, offset, stride)
        else:
            buf[starts[:, None] + np.arange(colsb)] = self.tiles[t, :rows, :colsb]
        self._count("tilestored", bytes_stored=rows * colsb)

    def tilezero(self, t: int) -> None:
        """TILEZERO: tile ``t`` becomes all zero."""
        self._shape("tilezero", t)
        if self._native is not None:
            self._native.execute(self, ("zero", int(t)))
        else:
            self.tiles[t] = 0
        self._count("tilezero")

    def tile(self, t: int, dtype=np.uint8) -> np.ndarray:
        """A copy of tile ``t``'s configured rows and bytes, viewed as ``dtype``."""
        rows, colsb = self._shape("tile", t)
        return self.tiles[t, :rows, :colsb].copy().view(dtype)

    # -- the multiplies -----------------------------------------------------------------------

    def _multiply(self, record: Instruction, dst: int, a: int, b: int, switches: dict) -> None:
        instr = str(record.tile_method)
        codes = record.option_codes(record.options(switches, instr))
        m, dcolsb = self._shape(instr, dst)
        self._not_palette2(instr, dst)  # tilegemm's reading: palette 2 has the outer products only
        arows, acolsb = self._shape(instr, a)
        brows, bcolsb = self._shape(instr, b)
        if len({int(dst), int(a), int(b)}) != 3:
            raise UDFault(instr, dst, f"operands must be three distinct tiles, got tmm{dst}, tmm{a}, tmm{b}")
        for t, c in ((dst, dcolsb), (a, acolsb), (b, bcolsb)):
            if c % 4:
                raise UDFault(instr, t, f"colsb = {c} is not a multiple of 4")
        k4, n = acolsb // 4, dcolsb // 4
        if arows != m:
            raise UDFault(instr, a, f"A has {arows} rows but dst has {m}")
        if brows != k4:
            raise UDFault(instr, b, f"B has {brows} rows but A's colsb / 4 = {k4}")
        if bcolsb != dcolsb:
            raise UDFault(instr, b, f"B has colsb = {bcolsb} but dst has colsb = {dcolsb}")
        if self._native is not None:
            if switches:
                raise ValueError(
                    f"switches ({', '.join(switches)}) choose readings of the emulation; a native unit runs "
                    f"{record.mnemonic} itself and takes none"
                )
            self._native.execute(self, ("dp", record, int(dst), int(a), int(b)))
            self._count(instr, macs=m * n * k4 * record.group)
            return
        family = FAMILIES[record.kernel]
        d = self.tiles[dst, :m, :dcolsb].view(record.acc)
        if record.dst_daz:
            d = daz(d)  # the first add reads a denormal dst as zero
        # C as the family's kernels see it; a complex family keeps (re, im) per output, and the
        # instruction's part of it is its dst.
        lanes = 2 if record.part is not None else 1
        C = np.zeros((1, m, n * lanes), record.acc)
        C[0, :, (record.part or 0) :: lanes] = d
        a_codes = self.tiles[a, :m, :acolsb].view(record.a.storage)
        b_codes = self.tiles[b, :k4, :bcolsb].view(record.b.storage).reshape(k4, n, record.group)
        A, B = tile_operands(record, family.a_layout, a_codes, b_codes)
        family.entry("tile")(A, B, C, k4 * record.group, *codes)
        self.tiles[dst] = 0  # rows M..15 and bytes colsb..63 of dst become zero
        self.tiles[dst, :m, :dcolsb] = np.ascontiguousarray(C[0, :, (record.part or 0) :: lanes]).view(np.uint8)
        self._count(instr, macs=m * n * k4 * record.group)


def _tile_method(record: Instruction):
    def method(self, dst, a, b, **switches):
        self._multiply(record, dst, a, b, switches)

    method.__name__ = method.__qualname__ = str(record.tile_method)
    method.__doc__ = (
        f"{record.mnemonic}: dst ({record.acc}) += a ({record.a.name}) x b ({record.b.name}, groups of "
        f"{record.group} along K): {record.summary}. ``dst``, ``a``, ``b``: tile numbers"
        + (f"; switches: {', '.join(s.name for s in record.switches)}" if record.switches else "")
        + f". See {record.doc}."
    )
    return method


for _name, _record in TILE_INSTRUCTIONS.items():
    setattr(TileUnit, _name, _tile_method(_record))

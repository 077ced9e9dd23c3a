"""The ACE instructions of the tile unit: palette 2, the block-scale register, TILEMOVROW/TILEMOVCOL
and the outer products (``docs/ace.md``).

With palette 2 every tile is 16 rows of 64 bytes, reached through zmm registers only: TILELOADD
and TILESTORED raise #UD, TILEMOVROW / TILEMOVCOL move rows and columns between a tile and a zmm
register, TILEZERO works. The block-scale register bsr0 has two 64-byte halves, H (A's scales by
default) and L (B's): BSRINIT sets all 128 bytes to 0x7F (1.0), BSRMOVH / BSRMOVL / BSRMOVF move
them to and from zmm registers. Each outer product (TOP4BSSD ... TOP4MXBSSPS) adds the outer
product of two zmm registers into a tile; the MX forms read their scales from bsr0 through imm8.

A zmm register is a 64-byte NumPy array (any dtype; viewed as bytes). Operands are given in Intel
order, destination first: ``u.tilemovrow(3, zmm, idx)`` writes row ``idx`` of tmm3 and
``u.tilemovrow(zmm, 3, idx)`` reads it into ``zmm``; ``u.bsrmovh(0, zmm)`` writes H, and
``u.bsrmovh(zmm, 0)`` reads it. Every fault is checked before anything changes (#UD unless
palette 2 is loaded, for a tile index above 7 or a bsr other than bsr0, and where a switch asks
for one). The outer products run the readable per-instruction definitions of
``tilegemm.reference.ace``, which the compiled GEMM kernels are tested against bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..instructions import ACE_TILE_SWITCHES, INSTRUCTIONS, Instruction
from ..reference import ace as ref
from .config import PFFault, UDFault

__all__ = ["AceInstructions", "OUTER_INSTRUCTIONS", "ACE_PALETTE"]

ACE_PALETTE = 2
#: The ACE outer products, by TileUnit method name.
OUTER_INSTRUCTIONS = {i.outer_method: i for i in INSTRUCTIONS.values() if i.outer_method is not None}
_TILES = 8


def _tile_switches(names: tuple[str, ...], given: dict, instr: str) -> dict:
    """The tile API's own switches among ``given`` (validated), with defaults for the others."""
    out = {}
    for name in names:
        sw = ACE_TILE_SWITCHES[name]
        value = given.pop(name, sw.default)
        if not sw.accepts(value):
            raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, sw.values))}")
        out[name] = value
    return out


def _register(x, what: str) -> np.ndarray:
    """A zmm register's 64 bytes, as a writable view when ``x`` is a writable array."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{what} must be a 64-byte numpy array (a zmm register), got {type(x).__name__}")
    if x.nbytes != 64 or not x.flags.c_contiguous:
        raise ValueError(
            f"{what} must be a C-contiguous numpy array of 64 bytes (a zmm register), got {x.shape} {x.dtype}"
        )
    return x.view(np.uint8).reshape(64)


class AceInstructions:
    """The palette-2 half of :class:`tilegemm.amx.TileUnit` (a mixin: the unit holds the state)."""

    tiles: np.ndarray
    bsr: np.ndarray  # (2, 64): bsr0's halves H and L
    config: object
    _count: Callable[..., None]  # the unit's counters (TileUnit)
    _span: Callable[..., Any]

    # -- checks ------------------------------------------------------------------------------

    def _ace(self, instr: str, tile=None) -> None:
        """#UD unless palette 2 is loaded; #UD for a tile index outside 0..7."""
        palette = getattr(self.config, "palette", None)
        if palette != ACE_PALETTE:
            state = "tiles are not configured" if palette is None else f"palette {palette} is loaded"
            raise UDFault(instr, tile, f"{instr.upper()} needs palette 2 (ACE); {state}")
        if tile is not None and (not isinstance(tile, (int, np.integer)) or not 0 <= tile < _TILES):
            raise UDFault(instr, tile, f"tile register {tile!r} does not exist (TMM0..TMM7)")

    def _bsr_index(self, instr: str, bsr) -> None:
        if not isinstance(bsr, (int, np.integer)) or isinstance(bsr, bool) or bsr != 0:
            raise UDFault(instr, None, f"block-scale register bsr{bsr} does not exist (only bsr0)")

    @staticmethod
    def _index(instr: str, idx, tilemov_index: str) -> int:
        """The row or column a TILEMOV reads from imm8 or r32 ``idx``: bits 15:0 masked to 3:0 (or
        #UD above 15 under ``ace_tilemov_index="fault"``)."""
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)) or not 0 <= idx < 2**32:
            raise ValueError(f"{instr}: the index must be an imm8 or r32 value in [0, 2^32), got {idx!r}")
        low = int(idx) & 0xFFFF
        if tilemov_index == "fault" and low > 15:
            raise UDFault(
                instr, None, f"index {int(idx):#x} (bits 15:0 = {low}) exceeds 15 (ace_tilemov_index='fault')"
            )
        return low & 15

    # -- the block-scale register ------------------------------------------------------------

    def bsrinit(self) -> None:
        """BSRINIT: all 128 bytes of bsr0 become 0x7F (every scale 1.0)."""
        self._ace("bsrinit")
        self.bsr[...] = 0x7F
        self._count("bsrinit")

    def _bsrmov(self, instr: str, halves: tuple[int, ...], operands: tuple) -> None:
        write = not isinstance(operands[0], np.ndarray)  # bsr first: bsr0 <- zmm; last: zmm <- bsr0
        bsr, regs = (operands[0], operands[1:]) if write else (operands[-1], operands[:-1])
        if any(not isinstance(r, np.ndarray) for r in regs):
            shape = ", ".join(["zmm"] * len(halves))
            raise TypeError(f"{instr}: operands are (bsr, {shape}) to write bsr0 or ({shape}, bsr) to read it")
        self._ace(instr)
        self._bsr_index(instr, bsr)
        zmms = [_register(r, "zmm") for r in regs]
        if not write and any(not z.flags.writeable for z in zmms):
            raise ValueError(f"{instr}: a destination zmm is read-only")
        for h, z in zip(halves, zmms):
            if write:
                self.bsr[h] = z
            else:
                z[...] = self.bsr[h]
        self._count(instr)

    def bsrmovh(self, dst, src) -> None:
        """BSRMOVH: ``bsrmovh(0, zmm)`` writes half H (A's scales); ``bsrmovh(zmm, 0)`` reads it."""
        self._bsrmov("bsrmovh", (0,), (dst, src))

    def bsrmovl(self, dst, src) -> None:
        """BSRMOVL: ``bsrmovl(0, zmm)`` writes half L (B's scales); ``bsrmovl(zmm, 0)`` reads it."""
        self._bsrmov("bsrmovl", (1,), (dst, src))

    def bsrmovf(self, a, b, c) -> None:
        """BSRMOVF: ``bsrmovf(0, zmm_h, zmm_l)`` writes both halves (H first); ``bsrmovf(zmm_h,
        zmm_l, 0)`` reads them."""
        self._bsrmov("bsrmovf", (0, 1), (a, b, c))

    # -- moves between tiles and zmm registers -----------------------------------------------

    def tilemovrow(self, dst, src, idx, *, ace_tilemov_index: str = "mask") -> None:
        """TILEMOVROW: ``tilemovrow(t, zmm, idx)`` writes row ``idx`` of tile t; ``tilemovrow(zmm,
        t, idx)`` reads it into ``zmm``."""
        mode = _tile_switches(("ace_tilemov_index",), {"ace_tilemov_index": ace_tilemov_index}, "tilemovrow")
        write = not isinstance(dst, np.ndarray)
        t = dst if write else src
        self._ace("tilemovrow", t)
        row = self._index("tilemovrow", idx, mode["ace_tilemov_index"])
        z = _register(src if write else dst, "zmm")
        if write:
            self.tiles[t, row] = z
        else:
            if not z.flags.writeable:
                raise ValueError("tilemovrow: the destination zmm is read-only")
            z[...] = self.tiles[t, row]
        self._count("tilemovrow")

    def tilemovcol(self, dst: int, src, idx, *, ace_tilemov_index: str = "mask") -> None:
        """TILEMOVCOL ``tilemovcol(t, zmm, idx)``: dword ``idx`` of every row r of tile t becomes
        dword r of ``zmm``."""
        mode = _tile_switches(("ace_tilemov_index",), {"ace_tilemov_index": ace_tilemov_index}, "tilemovcol")
        self._ace("tilemovcol", dst)
        col = self._index("tilemovcol", idx, mode["ace_tilemov_index"])
        z = _register(src, "zmm")
        self.tiles[dst].view(np.uint32)[:, col] = z.view(np.uint32)
        self._count("tilemovcol")

    # -- vector loads and stores (AVX-512), counted like tile loads ----------------------------

    def vmovdqu64_load(self, buf: np.ndarray, offset: int) -> np.ndarray:
        """A zmm register loaded from 64 bytes of ``buf`` at ``offset`` (#PF outside ``buf``)."""
        self._span("vmovdqu64", None, buf, offset, 0, 1, 64)
        self._count("vmovdqu64", bytes_loaded=64)
        return buf[int(offset) : int(offset) + 64].copy()

    def vmovdqu64_store(self, buf: np.ndarray, offset: int, zmm) -> None:
        """64 bytes of ``zmm`` stored to ``buf`` at ``offset``."""
        z = _register(zmm, "zmm")
        self._span("vmovdqu64", None, buf, offset, 0, 1, 64)
        if not buf.flags.writeable:
            raise PFFault("vmovdqu64", None, "memory is read-only")
        buf[int(offset) : int(offset) + 64] = z
        self._count("vmovdqu64", bytes_stored=64)

    # -- the outer products ------------------------------------------------------------------

    def _outer(self, record: Instruction, dst, za, zb, imm8, switches: dict) -> None:
        instr = str(record.outer_method)
        switches = dict(switches)
        tile_sw = _tile_switches(
            ("ace_scale_imm_fields", "ace_bsr_a_half", "ace_imm_reserved") if record.imm8 else (), switches, instr
        )
        options: dict[str, Any] = record.options(switches, instr)  # the GEMM switches: ValueError / TypeError
        self._ace(instr, dst)
        a, b = _register(za, "zA"), _register(zb, "zB")
        if record.imm8:
            if isinstance(imm8, bool) or not isinstance(imm8, (int, np.integer)) or not 0 <= imm8 < 256:
                raise ValueError(f"{instr}: imm8 must be an integer in [0, 255], got {imm8!r}")
            fields = tile_sw["ace_scale_imm_fields"]
            if tile_sw["ace_imm_reserved"] == "fault" and ref.reserved_imm8(int(imm8), fields):
                raise UDFault(instr, dst, f"imm8 {int(imm8):#04x} sets reserved bits (ace_imm_reserved='fault')")
        elif imm8 is not None:
            raise TypeError(f"{instr} takes no imm8")
        c = self.tiles[dst].view(record.acc)
        if record.scale_block:
            placement: dict[str, Any] = {k: tile_sw[k] for k in ("ace_scale_imm_fields", "ace_bsr_a_half")}
            out = ref.top4mx(c, a, b, self.bsr[0], self.bsr[1], int(imm8), record.a, record.b, **placement, **options)
        elif record.is_float:
            out = ref.top2bf16(c, a, b, **options)
        else:
            out = ref.top4_int(c, a, b, record.a, record.b)
        self.tiles[dst] = np.ascontiguousarray(out, record.acc).view(np.uint8)
        self._count(instr, macs=16 * 16 * record.group)


def _outer_method(record: Instruction):
    if record.imm8:

        def method(self, dst, za, zb, imm8, **switches):
            self._outer(record, dst, za, zb, imm8, switches)

    else:

        def method(self, dst, za, zb, **switches):  # type: ignore[misc]
            self._outer(record, dst, za, zb, None, switches)

    method.__name__ = method.__qualname__ = str(record.outer_method)
    sws = [s.name for s in record.switches] + (
        ["ace_scale_imm_fields", "ace_bsr_a_half", "ace_imm_reserved"] if record.imm8 else []
    )
    method.__doc__ = (
        f"{record.mnemonic}: tile ``dst`` ({record.acc}) += outer product of zmm registers ``za`` "
        f"({record.a.name}) and ``zb`` ({record.b.name}), {record.group} elements a dword"
        + (", scales from bsr0 selected by ``imm8``" if record.imm8 else "")
        + f": {record.summary}. Switches: {', '.join(sws) or 'none'}. See {record.doc}."
    )
    return method


for _name, _record in OUTER_INSTRUCTIONS.items():
    setattr(AceInstructions, _name, _outer_method(_record))

"""The tile configuration (the 64-byte LDTILECFG block) and the faults of the tile unit.

Palette 1 (AMX) is described below; palette 2 (ACE) is byte 0 = 2 and 63 zero bytes, every tile
16 rows of 64 bytes (``TileConfig(palette=2)``).

Layout (docs/tiles-config-load-store.md): byte 0 ``palette_id``, byte 1 ``start_row``, bytes 2..15
zero, bytes 16..31 ``colsb[0..7]`` (u16 little-endian), bytes 32..47 zero, bytes 48..55
``rows[0..7]``, bytes 56..63 zero. Limits: rows <= 16, colsb <= 64, and a tile's rows and colsb
are both zero (unused) or both non-zero; anything else is #GP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TileConfig", "TileFault", "UDFault", "GPFault", "PFFault", "ROWS", "COLSB"]

ROWS = 16  # palette 1: at most 16 rows ...
COLSB = 64  # ... of at most 64 bytes


class TileFault(Exception):
    """A fault the hardware would raise; the instruction changed no state.

    Attributes: ``vector`` ("#UD", "#GP", "#PF"), ``instruction``, ``tile`` (or None), ``rule``.
    """

    vector = "#?"

    def __init__(self, instruction: str, tile, rule: str):
        self.instruction, self.tile, self.rule = instruction, tile, rule
        where = (
            f" on tmm{tile}"
            if isinstance(tile, (int, np.integer)) and 0 <= tile < 8
            else (f" on tile {tile!r}" if tile is not None else "")
        )
        super().__init__(f"{self.vector} in {instruction.upper()}{where}: {rule}")


class UDFault(TileFault):
    """Invalid opcode: unconfigured or missing tile, operands that do not fit together."""

    vector = "#UD"


class GPFault(TileFault):
    """General protection: an invalid tile configuration."""

    vector = "#GP"


class PFFault(TileFault):
    """Page fault: a tile load or store touching memory outside the buffer."""

    vector = "#PF"


def _field(name: str, value, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not 0 <= value <= top:
        raise ValueError(f"{name}={value} does not fit its field of the configuration (0..{top})")
    return int(value)


@dataclass(frozen=True)
class TileConfig:
    """A palette-1 tile configuration.

    Examples
    --------
    >>> from tilegemm.amx import TileConfig
    >>> cfg = TileConfig(rows=(16,) * 8, colsb=(64,) * 8)
    >>> TileConfig.from_bytes(cfg.to_bytes()) == cfg
    True
    """

    palette: int = 1
    start_row: int = 0
    rows: tuple = (0,) * 8
    colsb: tuple = (0,) * 8
    reserved: bytes = bytes(64)  # what a from_bytes() block held in its reserved bytes

    def __post_init__(self):
        # Each field is a byte (colsb: a 16-bit word) of the 64-byte block: an integer that fits,
        # or TypeError / ValueError naming it (what LDTILECFG does with the value is its own check).
        for name, top in (("palette", 0xFF), ("start_row", 0xFF)):
            _field(name, getattr(self, name), top)
        for name, top in (("rows", 0xFF), ("colsb", 0xFFFF)):
            values = getattr(self, name)
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise TypeError(f"{name} must be a sequence of 8 integers, got {values!r}")
            object.__setattr__(self, name, tuple(_field(f"{name}[{i}]", v, top) for i, v in enumerate(values)))

    def to_bytes(self) -> bytes:
        """The 64-byte LDTILECFG block."""
        if len(self.rows) != 8 or len(self.colsb) != 8:
            raise ValueError(
                f"a tile configuration has 8 rows and 8 colsb (palette 2 leaves them 0), got {len(self.rows)} "
                f"and {len(self.colsb)}"
            )
        out = bytearray(self.reserved)
        out[0], out[1] = self.palette & 0xFF, self.start_row & 0xFF
        out[16:32] = np.array(self.colsb, "<u2").tobytes()
        out[48:56] = bytes(r & 0xFF for r in self.rows)
        return bytes(out)

    @classmethod
    def from_bytes(cls, block) -> TileConfig:
        """Read a 64-byte LDTILECFG block (bytes or a uint8 array); reserved bytes are kept so that
        loading it can fault on them."""
        block = bytes(np.asarray(block, np.uint8).tobytes() if isinstance(block, np.ndarray) else block)
        if len(block) != 64:
            raise ValueError(f"a tile configuration is 64 bytes, got {len(block)}")
        reserved = bytearray(block)
        reserved[0:2] = b"\0\0"
        reserved[16:32] = bytes(16)
        reserved[48:56] = bytes(8)
        return cls(
            block[0],
            block[1],
            tuple(block[48:56]),
            tuple(int(x) for x in np.frombuffer(block[16:32], "<u2")),
            bytes(reserved),
        )

    def validate(self, instruction: str = "ldtilecfg") -> None:
        """Raise :class:`GPFault` where LDTILECFG would."""
        if self.palette not in (0, 1, 2):
            raise GPFault(instruction, None, f"palette {self.palette} is not supported (0, 1, or 2 for ACE)")
        if self.palette == 2:  # ACE: the palette byte and 63 zero bytes; every tile 16 x 64 bytes
            block = self.to_bytes()
            if any(block[1:]):
                first = next(i for i in range(1, 64) if block[i])
                raise GPFault(instruction, None, f"palette 2: byte {first} is {block[first]}, bytes 1..63 must be 0")
            return
        if any(self.reserved):
            first = next(i for i, x in enumerate(self.reserved) if x)
            raise GPFault(instruction, None, f"reserved byte {first} is {self.reserved[first]}, must be 0")
        if self.palette == 0:
            return
        for t, (r, c) in enumerate(zip(self.rows, self.colsb)):
            if r > ROWS:
                raise GPFault(instruction, t, f"rows = {r} exceeds {ROWS}")
            if c > COLSB:
                raise GPFault(instruction, t, f"colsb = {c} exceeds {COLSB}")
            if (r == 0) != (c == 0):
                raise GPFault(instruction, t, f"rows = {r} and colsb = {c}: both must be zero or both non-zero")
        if self.start_row >= ROWS:
            raise GPFault(instruction, None, f"start_row = {self.start_row} must be below {ROWS}")

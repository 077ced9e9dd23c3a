"""The AMX register file as a Python API: write the seed's intrinsic code in Python, line for line.

- :class:`TileConfig`: the 64-byte LDTILECFG block.
- :class:`TileUnit`: 8 tile registers, the configuration, counters; one method per instruction.
- :mod:`tilegemm.amx.intrinsics`: the C names (``_tile_loadd`` ...) over a default unit.
- :mod:`tilegemm.amx.seed`: the seed article's kernels ported to the intrinsics.
- :mod:`tilegemm.amx.ace`: palette 2 (ACE): the block-scale register, TILEMOVROW/TILEMOVCOL and
  the outer products, as methods of :class:`TileUnit`; :mod:`tilegemm.amx.ace_seed` ports the
  seed's 2x2 kernel (and the excerpt's 32 x 64 block) to them.
- :class:`TileFault` and its #UD / #GP / #PF subclasses, raised where the SDM faults.
"""

from . import ace, ace_seed, intrinsics, seed
from .config import GPFault, PFFault, TileConfig, TileFault, UDFault
from .unit import Counters, TileUnit

__all__ = [
    "TileConfig",
    "TileUnit",
    "Counters",
    "TileFault",
    "UDFault",
    "GPFault",
    "PFFault",
    "intrinsics",
    "seed",
    "ace",
    "ace_seed",
]

"""tilegemm: Intel AMX tile matrix multiplies, bit for bit, on any CPU.

Public names only; see ``tilegemm.matmul`` to start.
"""

from . import reference
from .api import matmul
from .compare import BitDiff, bitdiff
from .dispatch import TILINGS
from .formats import DTYPES
from .packing import PackedB, pack

__all__ = ["matmul", "pack", "PackedB", "bitdiff", "BitDiff", "reference", "DTYPES", "TILINGS", "__version__"]
__version__ = "0.1.0"

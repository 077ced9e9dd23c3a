"""tilegemm: Intel AMX tile matrix multiplies, bit for bit, on any CPU.

Start with :func:`tilegemm.matmul`. Public names are listed in ``__all__``; the public submodules
(``tilegemm.reference``, ``tilegemm.amx``, ``tilegemm.inspect``, ``tilegemm.model``,
``tilegemm.instructions`` ...) are attributes of the package, imported on first use so that
``import tilegemm`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from .kernels import _cache

# Before any module defining a cached kernel runs: each such kernel gets tilegemm's own cache (a
# per-user folder, an index locked while it changes); Numba's caching of other code is untouched.
_cache.install_import_hook()

from .api import matmul  # noqa: E402
from .compare import BitDiff, bitdiff  # noqa: E402
from .dispatch import TILINGS  # noqa: E402
from .explain import explain  # noqa: E402
from .instructions import DTYPES, ISAS  # noqa: E402
from .packing import PackedB, pack  # noqa: E402

__all__ = [
    "matmul",
    "pack",
    "PackedB",
    "bitdiff",
    "BitDiff",
    "explain",
    "reference",
    "DTYPES",
    "ISAS",
    "TILINGS",
    "__version__",
]
__version__ = "0.2.0"

#: Submodules reachable as ``tilegemm.<name>`` and imported on first access.
SUBMODULES = (
    "amx",
    "benchmark",
    "compare",
    "convert",
    "dask",
    "dispatch",
    "explain",
    "formats",
    "inspect",
    "instructions",
    "layouts",
    "model",
    "onednn",
    "native",
    "packing",
    "perf",
    "plan",
    "profiles",
    "reference",
    "testing",
    "torch",
)


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tilegemm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))

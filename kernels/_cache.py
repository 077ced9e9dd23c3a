"""Keep Numba's on-disk cache honest for kernels that inline code from other modules."""

from __future__ import annotations

import hashlib


def dependency_stamp(own_stamp, paths) -> str:
    """A cache stamp covering the function's own source and every file it compiles in."""
    h = hashlib.sha256(repr(own_stamp).encode())
    for path in paths:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def stamp_with_dependencies(dispatcher, modules) -> None:
    """Make ``cache=True`` notice edits to the modules a kernel inlines, not only its own file.

    Numba stamps an on-disk cache with the content hash of the function's own source file, so a
    change to ``tiles.py`` or ``vector.py`` alone would leave a stale ``gemm`` in ``__pycache__``.
    This extends the stamp (a private attribute of Numba's cache, checked by a test on the
    installed Numba version; where it is absent, nothing happens).
    """
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        paths = [m.__file__ for m in modules]
        cache_file._source_stamp = dependency_stamp(cache_file._source_stamp, paths)

"""Where and how tilegemm's compiled code is cached on disk.

- :func:`install_locator`: compiled kernels are cached in a per-user folder, never next to the
  installed package (a cache folder inside ``site-packages/tilegemm`` would outlive an
  uninstall and hide a later editable install). ``NUMBA_CACHE_DIR``, when set, wins as it does
  for every Numba user; otherwise the platform's user cache folder (``~/.cache/tilegemm`` on
  Linux, ``$XDG_CACHE_HOME/tilegemm`` where that is set) is used. Only tilegemm's own source files
  are affected: the locator declines every other function.
- :func:`stamp_with_dependencies`: the on-disk cache of a kernel notices edits to the modules it
  inlines, not only its own file.

Both reach into Numba's caching internals (``numba.core.caching``); ``tests/kernels/test_cache.py``
checks them against the installed Numba.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ["install_locator", "cache_root", "stamp_with_dependencies", "dependency_stamp"]


def cache_root() -> str:
    """The folder tilegemm caches compiled code in when ``NUMBA_CACHE_DIR`` is not set."""
    from numba.misc.appdirs import AppDirs

    return str(AppDirs(appname="tilegemm", appauthor=False).user_cache_dir)


def _package_roots() -> tuple[str, ...]:
    here = os.path.dirname(os.path.realpath(__file__))  # kernels/
    package = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)  # tilegemm/ (or the tree root)
    roots = {here, os.path.realpath(package)}
    framework = os.path.realpath(os.path.join(here, os.pardir, "tilegemm"))  # source tree layout
    if os.path.isdir(framework):
        roots.add(framework)
    return tuple(sorted(roots))


def install_locator() -> None:
    """Put tilegemm's cache locator in front of Numba's in-tree one (once per process)."""
    from numba.core import caching, config

    if any(getattr(c, "_tilegemm", False) for c in caching.CacheImpl._locator_classes):
        return
    roots = tuple(r + os.sep for r in _package_roots())

    class TilegemmCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """Caches tilegemm's own functions under :func:`cache_root`."""

        _tilegemm = True

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(cache_root(), self.get_suitable_cache_subpath(py_file))

        def get_cache_path(self):
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file):
            if config.CACHE_DIR or not os.path.realpath(py_file).startswith(roots):
                return None  # NUMBA_CACHE_DIR set, or not ours: Numba's own locators decide
            return super().from_function(py_func, py_file)

    classes = caching.CacheImpl._locator_classes
    after = next((i + 1 for i, c in enumerate(classes) if c is caching.UserProvidedCacheLocator), 0)
    classes.insert(after, TilegemmCacheLocator)


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
    change to ``tiles.py`` or ``vector.py`` alone would leave a stale ``gemm`` in the cache. This
    extends the stamp (a private attribute of Numba's cache, checked by a test on the installed
    Numba version; where it is absent, nothing happens).
    """
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        paths = [m.__file__ for m in modules]
        cache_file._source_stamp = dependency_stamp(cache_file._source_stamp, paths)

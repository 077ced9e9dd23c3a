"""Where and how tilegemm's compiled code is cached on disk.

- :func:`install_locator`: compiled kernels are cached in a per-user folder, never next to the
  installed package (a cache folder inside ``site-packages/tilegemm`` would outlive an
  uninstall and hide a later editable install). ``NUMBA_CACHE_DIR``, when set, wins as it does
  for every Numba user; otherwise the platform's user cache folder (``~/.cache/tilegemm`` on
  Linux, ``$XDG_CACHE_HOME/tilegemm`` where that is set) is used. Only tilegemm's own source files
  are affected: the locator declines every other function.
- :func:`stamp_with_dependencies`: the on-disk cache of a kernel notices edits to the modules it
  inlines, not only its own file.
- :func:`install_cache_lock`: Numba saves a cache entry in two steps (the index naming a data
  file, then the data), without a lock, so two processes compiling different specializations of
  one function at once (two test workers, two dask workers on a cold cache) can both take data
  file 1 and leave an index entry pointing at the other's machine code. A file lock per index
  makes each save, and each load, one step.
- :func:`lazy_vectorize`: a ``numba.vectorize`` ufunc built on its first call rather than at
  import. Numba caches a ufunc's element function but compiles its array loop afresh in every
  process, about 0.1 s each; building the seventeen of them eagerly was most of ``import tilegemm``.

All but the last reach into Numba's caching internals (``numba.core.caching``); ``tests/kernels/test_cache.py``
checks them against the installed Numba.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from typing import Any, Callable, Iterator

__all__ = [
    "install_locator",
    "install_cache_lock",
    "cache_root",
    "stamp_with_dependencies",
    "dependency_stamp",
    "lazy_vectorize",
]


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


def install_cache_lock() -> None:
    """Hold an exclusive lock on ``<index>.lock`` while Numba saves a cache entry (reading the
    index, choosing a data file, writing both) and a shared one while it loads one (once per
    process; POSIX ``flock``; where the lock file cannot be opened, Numba runs unlocked, as before).
    Applies to every Numba cache file in the process, tilegemm's or not."""
    try:
        import fcntl
    except ImportError:  # not POSIX: Numba's own behaviour
        return
    from numba.core import caching

    cls: Any = caching.IndexDataCacheFile
    if getattr(cls, "_tilegemm_locked", False):
        return
    save, load = cls.save, cls.load

    @contextlib.contextmanager
    def locked(cache_file: Any, kind: int) -> Iterator[None]:
        try:
            f = open(cache_file._index_path + ".lock", "a+b")
        except OSError:
            yield
            return
        with f:
            fcntl.flock(f, kind)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def locked_save(self: Any, key: Any, data: Any) -> None:
        with locked(self, fcntl.LOCK_EX):
            save(self, key, data)

    def locked_load(self: Any, key: Any) -> Any:
        with locked(self, fcntl.LOCK_SH):
            return load(self, key)

    cls.save, cls.load = locked_save, locked_load
    cls._tilegemm_locked = True


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
    cache = getattr(dispatcher, "_cache", None) or getattr(dispatcher, "cache", None)  # njit; a ufunc's
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        paths = [m.__file__ for m in modules]
        cache_file._source_stamp = dependency_stamp(cache_file._source_stamp, paths)


class LazyUfunc:
    """A ``numba.vectorize(signatures, cache=True)`` ufunc, compiled on its first use.

    Calls, keywords (``out=``) and attributes (``types``, ``reduce``, ...) go to the real ufunc.
    Not callable from ``@njit`` code: kernels call the scalar functions the ufunc wraps.
    """

    def __init__(self, signatures: list[str], func: Callable[..., Any], depends: tuple = ()) -> None:
        self._signatures = signatures
        self._func = func
        self._depends = depends
        self._ufunc: Any = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, func)

    @property
    def ufunc(self) -> Any:
        """The compiled NumPy ufunc (built now if this is the first use)."""
        if self._ufunc is None:
            with self._lock:
                if self._ufunc is None:
                    from numba import vectorize

                    ufunc = vectorize(self._signatures, cache=True)(self._func)
                    stamp_with_dependencies(getattr(ufunc, "_dispatcher", None), self._depends)
                    self._ufunc = ufunc
        return self._ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.ufunc(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.ufunc, name)

    def __reduce__(self) -> str:
        return self.__qualname__  # pickled by name, as a module-level ufunc is

    def __repr__(self) -> str:
        state = "compiled" if self._ufunc is not None else "compiled on first use"
        return f"<tilegemm ufunc {self.__name__} {self._signatures} ({state})>"


def lazy_vectorize(signatures: list[str], depends: tuple = ()) -> Callable[[Callable[..., Any]], LazyUfunc]:
    """Decorator: ``numba.vectorize(signatures, cache=True)``, built on first use (:class:`LazyUfunc`);
    its cache is stamped with the modules in ``depends`` (:func:`stamp_with_dependencies`)."""

    def wrap(func: Callable[..., Any]) -> LazyUfunc:
        return LazyUfunc(signatures, func, depends)

    return wrap

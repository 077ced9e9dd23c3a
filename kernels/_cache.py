"""Where and how tilegemm's compiled code is cached on disk, without changing Numba's caching of
any other package's functions.

Each of tilegemm's cached Numba functions gets its own cache object, :class:`TilegemmCache`, in
place of the ``FunctionCache`` that ``cache=True`` gives it (:func:`own_cache`). Numba's global
classes (``CacheImpl._locator_classes``, ``IndexDataCacheFile``) are left as they are, so a user's
``@njit(cache=True)`` function caches where Numba puts it with or without tilegemm imported.

- :class:`TilegemmCacheLocator`: compiled kernels are cached in a per-user folder, never next to
  the installed package (a cache folder inside ``site-packages/tilegemm`` would outlive an
  uninstall and hide a later editable install). ``NUMBA_CACHE_DIR``, when set, wins as it does
  for every Numba user; otherwise the platform's user cache folder (``~/.cache/tilegemm`` on
  Linux, ``$XDG_CACHE_HOME/tilegemm`` where that is set) is used.
- :class:`LockedIndexDataCacheFile`: Numba saves a cache entry in two steps (the index naming a
  data file, then the data), without a lock, so two processes compiling different
  specializations of one function at once (two test workers, two dask workers on a cold cache)
  can both take data file 1 and leave an index entry pointing at the other's machine code. A file
  lock per index makes each save, and each load, one step.
- :func:`install_import_hook`: the kernel modules do not name :func:`own_cache` where they define
  their functions. Instead an import hook, which acts on ``tilegemm.*`` modules only, passes each
  such module to :func:`own_caches` once the module has run, before any code outside it can call
  its functions. None of tilegemm's modules compiles while it is being imported (a test checks).
  Numba's own cache object, built by ``njit`` before it is replaced, may have created an empty
  folder for itself; it never writes an entry.
- :func:`stamp_with_dependencies`: the on-disk cache of a kernel notices edits to the modules it
  inlines, not only its own file.
- :func:`lazy_vectorize`: a ``numba.vectorize`` ufunc built on its first call rather than at
  import. Numba caches a ufunc's element function but compiles its array loop afresh in every
  process, about 0.1 s each; building the eighteen of them eagerly was most of ``import tilegemm``.

The cache classes subclass Numba's private caching classes (``numba.core.caching``);
``tests/kernels/test_cache.py`` checks them against the installed Numba.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Iterator

from numba.core import caching, config
from numba.core.dispatcher import Dispatcher
from numba.np.ufunc.ufuncbuilder import UFuncDispatcher

fcntl: Any
try:
    import fcntl
except ImportError:  # not POSIX: Numba's own unlocked behaviour
    fcntl = None

__all__ = [
    "TilegemmCache",
    "TilegemmCacheLocator",
    "LockedIndexDataCacheFile",
    "own_cache",
    "own_caches",
    "install_import_hook",
    "cache_root",
    "stamp_with_dependencies",
    "closure_jit",
    "dependency_stamp",
    "lazy_vectorize",
]

#: The package whose modules the import hook hands to :func:`own_caches`.
PACKAGE = __name__.partition(".")[0]


def cache_root() -> str:
    """The folder tilegemm caches compiled code in when ``NUMBA_CACHE_DIR`` is not set."""
    from numba.misc.appdirs import AppDirs

    return str(AppDirs(appname="tilegemm", appauthor=False).user_cache_dir)


#: Where a process writes a portable cache instead (``python -m tilegemm compile --into``).
INTO_ENV = "TILEGEMM_PRECOMPILED_INTO"

#: The portable cache an installed tilegemm ships, inside the package (``setup.py`` builds it).
PRECOMPILED = "_precompiled"


def portable_subpath(py_func) -> str:
    """A function's folder in a portable cache: its module's package (``tilegemm.kernels``),
    the same wherever the package is installed."""
    return py_func.__module__.rpartition(".")[0] or py_func.__module__


@functools.lru_cache(maxsize=None)
def _content_hash(path: str, mtime: float, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class TilegemmCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Caches a function under ``NUMBA_CACHE_DIR`` when that is set, else under :func:`cache_root`,
    in a folder per source folder (named as Numba names its own); in a process that builds a
    portable cache (:data:`INTO_ENV`), in that folder, by module (:func:`portable_subpath`).

    The stamp is the source file's content hash, whatever the Numba version (older ones stamp with
    the modification time, which a reinstall changes), so an entry outlives a reinstall of the
    same sources and matches the same sources installed elsewhere."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        into = os.environ.get(INTO_ENV)
        if into:
            self._cache_path = os.path.join(into, portable_subpath(py_func))
        else:
            root = config.CACHE_DIR or cache_root()
            self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        st = os.stat(self._py_file)
        return _content_hash(self._py_file, st.st_mtime, st.st_size)


class _TilegemmCacheImpl(caching.CompileResultCacheImpl):
    # Numba's own locators follow, for a function without a source file on disk or where the
    # folder above cannot be written (NUMBA_CACHE_LOCATOR_CLASSES, where set, replaces the whole
    # list, as it does for every function).
    _locator_classes = [TilegemmCacheLocator, *caching.CompileResultCacheImpl._locator_classes]


@contextlib.contextmanager
def _locked(path: str, exclusive: bool) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (created if need be); unlocked where it cannot be opened."""
    if fcntl is None:
        yield
        return
    try:
        f = open(path, "a+b")
    except OSError:  # a read-only cache folder: Numba's behaviour, unlocked
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class LockedIndexDataCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files, with an exclusive lock on ``<index>.lock`` while an entry is
    saved (reading the index, choosing a data file, writing both) or the index is emptied, and a
    shared one while an entry is loaded (POSIX ``flock``)."""

    def _lock(self, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return _locked(self._index_path + ".lock", exclusive)

    def save(self, key, data):
        with self._lock(exclusive=True):
            super().save(key, data)

    def load(self, key):
        with self._lock(exclusive=False):
            return super().load(key)

    def flush(self):
        with self._lock(exclusive=True):
            super().flush()


@functools.lru_cache(maxsize=None)
def _shipped_roots() -> tuple[str, ...]:
    """The portable caches (:data:`PRECOMPILED`) a process may read, first found first: the
    imported package's own, then those of every installed copy of the distribution. The second
    serves a source checkout imported from its own root after ``pip install .`` there (the
    README's ``pip install . && python -m tilegemm demo``): Python imports the checkout, which
    has no compiled code, while the install beside it does. An entry of another copy is as safe
    as one of the package's own, since Numba's key holds the sources' content hash."""
    roots = []
    package_file = getattr(sys.modules.get(PACKAGE), "__file__", None)
    if package_file:
        roots.append(os.path.join(os.path.dirname(package_file), PRECOMPILED))
    try:
        for dist in importlib.metadata.distributions(name=PACKAGE):
            roots.append(str(dist.locate_file(os.path.join(PACKAGE, PRECOMPILED))))
    except Exception:  # a broken installed distribution's metadata costs only its compiled code
        pass
    unique = dict.fromkeys(os.path.realpath(r) for r in roots)
    return tuple(r for r in unique if os.path.isdir(r))


class TilegemmCache(caching.FunctionCache):
    """Numba's ``FunctionCache`` with :class:`TilegemmCacheLocator` and
    :class:`LockedIndexDataCacheFile`."""

    _impl_class = _TilegemmCacheImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        # Numba's constructor names IndexDataCacheFile itself; the same file, locked.
        self._cache_file = LockedIndexDataCacheFile(
            cache_path=self.cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp(),
        )
        self._shipped: list[caching.IndexDataCacheFile] = []
        if isinstance(self._impl.locator, TilegemmCacheLocator):
            for root in _shipped_roots():
                folder = os.path.join(root, portable_subpath(py_func))
                if os.path.isdir(folder):
                    self._shipped.append(
                        caching.IndexDataCacheFile(
                            cache_path=folder, filename_base=self._impl.filename_base, source_stamp=None
                        )
                    )

    def _load_overload(self, sig, target_context):
        """The entry from the cache, else from a portable cache (:func:`_shipped_roots`), whose
        entries Numba checks as its own: the stamp (the sources and their dependencies),
        the Numba version, the signature, the CPU and the function's bytecode."""
        data = super()._load_overload(sig, target_context)
        if data is not None or not self._enabled:
            return data
        for shipped in self._shipped:
            shipped._source_stamp = self._cache_file._source_stamp  # with its dependencies
            data = shipped.load(self._index_key(sig, target_context.codegen()))
            if data is not None:
                return self._impl.rebuild(target_context, data)
        return None


def _cache_attribute(dispatcher: Any) -> str | None:
    """Where a dispatcher keeps its cache: ``_cache`` (``njit``), ``cache`` (a ufunc's)."""
    if isinstance(dispatcher, Dispatcher):
        return "_cache"
    if isinstance(dispatcher, UFuncDispatcher):
        return "cache"
    return None


def own_cache(dispatcher: Any) -> Any:
    """Give a Numba dispatcher built with ``cache=True`` (an ``njit`` function's, or a ufunc's) a
    :class:`TilegemmCache` of its own, and return it. Anything else, a dispatcher without caching
    included, is returned as it is; so is one that has its :class:`TilegemmCache` already (its
    stamp, :func:`stamp_with_dependencies`, is kept)."""
    attribute = _cache_attribute(dispatcher)
    if attribute is None:
        return dispatcher
    cache = getattr(dispatcher, attribute)
    if isinstance(cache, caching.FunctionCache) and not isinstance(cache, TilegemmCache):
        setattr(dispatcher, attribute, TilegemmCache(dispatcher.py_func))
    return dispatcher


def own_caches(module: ModuleType) -> None:
    """:func:`own_cache` for each dispatcher among ``module``'s globals that tilegemm defines (a
    function imported from another package keeps the cache Numba gave it)."""
    for value in list(vars(module).values()):
        # The type test comes first: a LazyUfunc would build its ufunc on a look-up of py_func.
        if _cache_attribute(value) is not None:
            defined_in = getattr(value.py_func, "__module__", None) or ""
            if defined_in.startswith(PACKAGE + "."):
                own_cache(value)


class _OwnCachesLoader(importlib.machinery.SourceFileLoader):
    """Python's source loader, then :func:`own_caches` on the module it has run."""

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        own_caches(module)


class _OwnCachesFinder(importlib.abc.MetaPathFinder):
    """Finds a ``tilegemm.*`` module as the finders after it would, and loads it with
    :class:`_OwnCachesLoader`. Every other module it leaves to them untouched."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(PACKAGE + "."):
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if isinstance(finder, _OwnCachesFinder) or find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        # A module not loaded from a source file (a zip archive, a compiled module) is left as
        # found: Numba's own locators serve whatever it defines.
        if type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _OwnCachesLoader(spec.loader.name, spec.loader.path)
        return spec


def install_import_hook() -> None:
    """Put :class:`_OwnCachesFinder` first on ``sys.meta_path`` (once per process), and pass the
    ``tilegemm.*`` modules already imported to :func:`own_caches`. Called by ``tilegemm``'s
    ``__init__`` before it imports any module that defines a cached function."""
    if not any(isinstance(f, _OwnCachesFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _OwnCachesFinder())
    for name, module in list(sys.modules.items()):
        if name.startswith(PACKAGE + ".") and module is not None:
            own_caches(module)


def closure_jit(tag: str, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``njit(**options)`` for a function a kernel factory defines per variant, under a name of its
    own: the qualname gets ``__<tag>``.

    Numba names compiled code after the function's qualname, its argument types and a counter
    local to the process. Two closures of one factory (the job loop of the BF16 pairs and of
    VDPBF16PS, say) share a qualname and argument types, so the cached entries that call them,
    compiled in two processes, can hold code under one symbol name; a third process loading both
    then runs the first one loaded for both. ``tag`` must name everything the closure captures.
    """

    def wrap(fn: Callable[..., Any]) -> Any:
        from numba import njit

        fn.__qualname__ = f"{fn.__qualname__}__{tag}"
        return njit(**options)(fn)

    return wrap


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
    gives the dispatcher its :class:`TilegemmCache` first (:func:`own_cache`; the kernel modules
    call this while they run, before the import hook would) and extends that cache's stamp (a
    private attribute of Numba's cache file, checked by a test on the installed Numba version;
    where it is absent, nothing is stamped).
    """
    own_cache(dispatcher)
    attribute = _cache_attribute(dispatcher)
    cache_file = getattr(getattr(dispatcher, attribute), "_cache_file", None) if attribute else None
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
                    from numba.np.ufunc.decorators import Vectorize

                    # numba.vectorize(signatures, cache=True), step by step: the element
                    # function gets tilegemm's cache, stamped, before its first signature compiles.
                    ufunc = Vectorize(self._func, cache=True)
                    dispatcher = ufunc._dispatcher
                    own_cache(dispatcher)
                    if self._depends:
                        stamp_with_dependencies(dispatcher, self._depends)
                    for signature in self._signatures:
                        ufunc.add(signature)
                    ufunc.disable_compile()
                    self._ufunc = ufunc.build_ufunc()
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

"""tilegemm's cache of compiled code: where it lies, what invalidates it, its lock, and that
Numba's caching of any other code is left as it was."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tilegemm.kernels import _cache
from tilegemm.kernels import gemm as G


def test_gemm_cache_stamp_covers_its_dependencies(tmp_path):
    cache_file = G.gemm_amx_fast._cache._cache_file
    own = G.gemm_amx_fast._cache._impl.locator.get_source_stamp()
    files = [m.__file__ for m in G.DEPENDENCIES]
    assert cache_file._source_stamp == _cache.dependency_stamp(own, files)
    # An edit to one dependency changes the stamp, so the stale cache entry is not loaded.
    copies = []
    for f in files:
        copies.append(tmp_path / f.split("/")[-1])
        shutil.copy(f, copies[-1])
    before = _cache.dependency_stamp(own, copies)
    with open(copies[0], "a") as f:
        f.write("\n# edited\n")
    assert _cache.dependency_stamp(own, copies) != before


def test_packing_and_ufunc_stamps_cover_the_kernel_modules_they_inline():
    """The conversions' cached loops and ufuncs inline ``kernels.rounding`` (and the FP8 packing
    ``kernels.exact``): an edit there must recompile them, as one to ``tiles.py`` does the tile
    loop. A ufunc's cache hangs off its dispatcher's ``cache``, an njit function's off ``_cache``."""
    from tilegemm import convert, float8
    from tilegemm.kernels import exact, rounding
    from tilegemm.kernels import isa as kisa
    from tilegemm.reference import binary32, isa

    for disp, deps in (
        (convert.pack_a_float, [rounding]),
        (convert.f32_round_fp16.ufunc._dispatcher, [rounding]),
        (float8._pack_a, [exact]),
        # the reference's ufuncs run the kernels' scalar arithmetic (the NaN rule included)
        (binary32.fma32_read.ufunc._dispatcher, [exact, rounding]),
        (isa._fma32_bits.ufunc._dispatcher, [kisa, exact, rounding]),
    ):
        cache = getattr(disp, "_cache", None) or disp.cache
        own = cache._impl.locator.get_source_stamp()
        assert cache._cache_file._source_stamp == _cache.dependency_stamp(own, [m.__file__ for m in deps]), disp


def _run_cold(tmp_path, **env_extra):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), **env_extra)
    # Two small cached functions, one from each source folder (a kernel takes tens of seconds to
    # compile; the locator treats every function of tilegemm's own files alike).
    code = (
        "import numpy as np; from tilegemm import convert; from tilegemm.kernels import rounding; "
        "print(hex(rounding.f32_to_bf16(np.uint32(0x3F808000))), "
        "convert._exponent_update(np.uint32(0x3F800000), 255, 0))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0x3f80 (127, 127)"  # 1 + 2^-8 is a tie: even, 1.0


def test_compiled_code_goes_to_the_user_cache(tmp_path):
    """Never into the package: a cache folder there would outlive an uninstall."""
    import pathlib

    import tilegemm

    package = pathlib.Path(tilegemm.__file__).resolve().parent
    before = set(package.rglob("*.nb[ic]")) | set(package.parent.joinpath("kernels").rglob("*.nb[ic]"))
    _run_cold(tmp_path)
    after = set(package.rglob("*.nb[ic]")) | set(package.parent.joinpath("kernels").rglob("*.nb[ic]"))
    assert after == before
    written = sorted(p.name for p in (tmp_path / "xdg" / "tilegemm").rglob("*.nbi"))
    assert any(n.startswith("rounding.f32_to_bf16-") for n in written), written
    assert any(n.startswith("convert._exponent_update-") for n in written), written


def test_numba_cache_dir_wins(tmp_path):
    _run_cold(tmp_path, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    assert list((tmp_path / "numba").rglob("rounding.f32_to_bf16-*.nbi"))
    assert not (tmp_path / "xdg" / "tilegemm").exists()


def _module(tmp_path, name, source, module_name=None):
    """Run ``source`` as a module from a file ``<name>.py`` under ``tmp_path``."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name or name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_USER_FUNCTION = "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x * 2 + 1\n"


def test_own_caches_takes_only_tilegemm_functions(tmp_path, monkeypatch):
    """The import hook's walk replaces the cache of a function a ``tilegemm.*`` module defines,
    never that of a function it imports from elsewhere."""
    from numba.core import caching, config

    # A cache made here creates its folder: under the test's own, not the user's cache.
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))

    foreign = _module(tmp_path, "usermod", _USER_FUNCTION)
    ours = _module(tmp_path, "ownmod", _USER_FUNCTION, module_name="tilegemm._test_own_caches")
    ours.imported = foreign.f
    _cache.own_caches(ours)
    assert type(foreign.f._cache) is caching.FunctionCache
    assert type(ours.f._cache) is _cache.TilegemmCache
    assert type(ours.f._cache._cache_file) is _cache.LockedIndexDataCacheFile
    assert ours.f._cache.cache_path.startswith(str(tmp_path)), ours.f._cache.cache_path


_EVERY_MODULE = r"""
import gc, importlib, pkgutil
import tilegemm
from numba.core import caching
from numba.core.dispatcher import Dispatcher
from numba.np.ufunc.ufuncbuilder import UFuncDispatcher
from tilegemm.kernels import _cache
for info in pkgutil.walk_packages(tilegemm.__path__, "tilegemm."):
    if info.name != "tilegemm.__main__":
        importlib.import_module(info.name)
ours = [
    d for d in gc.get_objects()
    if isinstance(d, (Dispatcher, UFuncDispatcher)) and d.py_func.__module__.startswith("tilegemm.")
]
cached = [(d.py_func.__module__ + "." + d.py_func.__qualname__, getattr(d, "_cache", None) or d.cache) for d in ours]
cached = [(name, c) for name, c in cached if isinstance(c, caching.FunctionCache)]
assert len(cached) > 50, sorted(cached)
numbas = sorted(name for name, c in cached if type(c) is not _cache.TilegemmCache)
assert not numbas, numbas
compiled = sorted(d.py_func.__qualname__ for d in ours if d.overloads)
assert not compiled, compiled
print("ok")
"""


def test_every_cached_kernel_has_tilegemm_cache():
    """With every tilegemm module imported, each of tilegemm's ``cache=True`` functions holds a
    :class:`TilegemmCache`, and none has compiled yet: one compiled while its module ran would
    have gone through Numba's own cache, before the import hook replaced it."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _EVERY_MODULE], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


_UNTOUCHED = r"""
import importlib.machinery, sys
import numpy as np
from numba.core import caching
locators = list(caching.CacheImpl._locator_classes)
index_file = dict(vars(caching.IndexDataCacheFile))
function_cache = dict(vars(caching.FunctionCache))
if sys.argv[2] == "tilegemm":
    import tilegemm
    a = np.float32([[1, 2], [3, 4]])
    assert tilegemm.matmul(a, a, "bf16").tolist() == [[7, 10], [15, 22]]
    assert caching.CacheImpl._locator_classes == locators
    assert all(c.__module__ == "numba.core.caching" for c in locators), locators
    assert dict(vars(caching.IndexDataCacheFile)) == index_file
    assert dict(vars(caching.FunctionCache)) == function_cache
sys.path.insert(0, sys.argv[1])
import usermod
assert type(usermod.__loader__) is importlib.machinery.SourceFileLoader
assert usermod.f(np.int64(20)) == 41
assert type(usermod.f._cache) is caching.FunctionCache
assert type(usermod.f._cache._cache_file) is caching.IndexDataCacheFile
print(usermod.f._cache.cache_path)
"""


def test_numba_caching_of_other_code_is_untouched(tmp_path):
    """After ``import tilegemm`` and a matmul, Numba's caching classes are as they were, and a
    user's ``cache=True`` function caches next to its source, as without tilegemm."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # Numba's in-tree cache
    run_cache = os.environ.get("NUMBA_CACHE_DIR")
    if run_cache and sys.platform.startswith("linux"):
        # tilegemm's per-user folder is $XDG_CACHE_HOME/tilegemm there: this test run's cache, so
        # the subprocess loads the BF16 kernels the run compiled instead of compiling them
        # again in a folder of its own (about a minute of a cold run)
        xdg = tmp_path / "xdg"
        xdg.mkdir()
        (xdg / "tilegemm").symlink_to(run_cache, target_is_directory=True)
        env["XDG_CACHE_HOME"] = str(xdg)
    written = {}
    for run in ("tilegemm", "numba"):
        folder = tmp_path / run
        folder.mkdir()
        (folder / "usermod.py").write_text(_USER_FUNCTION)
        done = subprocess.run(
            [sys.executable, "-c", _UNTOUCHED, str(folder), run], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == str(folder / "__pycache__"), done.stdout
        written[run] = sorted(p.name for p in (folder / "__pycache__").iterdir() if p.suffix != ".pyc")
    assert written["tilegemm"] == written["numba"], written
    assert {n.split(".")[-1] for n in written["numba"]} == {"nbi", "nbc"}, written  # no lock file


def _lock_state(fcntl, path):
    """The lock another open file of ``path`` sees held: "none", "shared" or "exclusive"."""
    with open(path, "a+b") as f:
        for kind, state in ((fcntl.LOCK_EX, "none"), (fcntl.LOCK_SH, "shared")):
            try:
                fcntl.flock(f, kind | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            fcntl.flock(f, fcntl.LOCK_UN)
            return state
        return "exclusive"


def test_tilegemm_caches_take_the_lock(tmp_path, monkeypatch):
    """A compile through tilegemm's cache reads the index under a shared lock to look for an entry,
    then reads and writes it under an exclusive one to save the new entry."""
    fcntl = pytest.importorskip("fcntl")
    from numba.core import config

    assert type(G.gemm_amx_fast._cache._cache_file) is _cache.LockedIndexDataCacheFile
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))
    f = _cache.own_cache(_module(tmp_path, "lockmod", _USER_FUNCTION).f)
    cache_file = f._cache._cache_file
    assert cache_file._index_path.startswith(str(tmp_path / "cache"))
    lock = cache_file._index_path + ".lock"
    seen = []
    load_index, save_index = cache_file._load_index, cache_file._save_index

    def watched_load_index():
        seen.append(("read", _lock_state(fcntl, lock)))
        return load_index()

    def watched_save_index(overloads):
        seen.append(("write", _lock_state(fcntl, lock)))
        save_index(overloads)

    monkeypatch.setattr(cache_file, "_load_index", watched_load_index)
    monkeypatch.setattr(cache_file, "_save_index", watched_save_index)
    assert f(np.int64(20)) == 41
    assert seen == [("read", "shared"), ("read", "exclusive"), ("write", "exclusive")]


def test_import_builds_no_ufunc():
    """``import tilegemm`` compiles no ufunc loop (each costs about 0.1 s in every process); the
    first call builds it, and it then behaves as the NumPy ufunc it wraps."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, tilegemm, tilegemm.reference, tilegemm.kernels.onednn as k\n"
        "from tilegemm.reference import ace, binary32, isa\n"
        "from tilegemm.kernels._cache import LazyUfunc\n"
        "mods = (tilegemm.convert, ace, binary32, isa, k)\n"
        "lazy = list({id(o): o for m in mods for o in vars(m).values() if isinstance(o, LazyUfunc)}.values())\n"
        "assert len(lazy) == 19, len(lazy)\n"
        "built = [u.__name__ for u in lazy if u._ufunc is not None]\n"
        "assert not built, built\n"
        "from tilegemm import convert\n"
        "assert convert.f32_to_bf16._ufunc is None\n"
        "codes = convert.f32_to_bf16(np.float32([1.0, 1.00390625, 3.0]).view(np.uint32))\n"
        "assert codes.dtype == np.uint16 and codes.tolist() == [0x3F80, 0x3F80, 0x4040], codes\n"
        "assert convert.f32_to_bf16._ufunc is not None and convert.f32_to_e5m2._ufunc is None\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_lazy_ufunc_keywords_attributes_and_pickle():
    import pickle

    import numpy as np

    from tilegemm import convert

    f = convert.fp16_to_f32
    out = np.zeros(2, np.uint32)
    f(np.uint16([0x3C00, 0x0001]), out=out)  # 1.0 and the smallest binary16 denormal, 2^-24
    assert out.tolist() == [0x3F800000, 0x33800000]
    assert f.nin == 1 and f.types == ["H->I"]
    assert f.__name__ == "fp16_to_f32" and "exact" in f.__doc__
    assert pickle.loads(pickle.dumps(f)) is f


def _race(tmp_path, file_class, monkeypatch):
    """Two writers, ``a`` and ``b`` (threads, each with its own open lock file, as two processes
    have), save different keys into one empty index, stepped through Numba's save:

    1. ``a`` reads the index (holding the lock, where there is one) and stops;
    2. ``b`` starts and runs until it has read the index too and stops, or until it would wait
       for the lock (``fcntl.flock`` is tried without blocking first, so this is seen, not timed);
    3. ``a`` names data file 1 in the index and stops before writing the data;
    4. if ``b`` has read the index, it saves in full: it read the index as empty, so it names
       data file 1 too, in place of ``a``'s entry, and writes its data there;
    5. ``a`` writes its data, and ``b``, if it was waiting for the lock, saves in full.

    Returns where ``b`` first stopped, and what a fresh reader of the index loads for each key."""
    import fcntl as real_fcntl
    import queue
    import threading

    def make():
        return file_class(cache_path=str(tmp_path), filename_base="f-1.py311", source_stamp="stamp")

    stops = {w: queue.Queue() for w in "ab"}  # where each writer has stopped
    go = {(w, stop): threading.Event() for w in "ab" for stop in ("read", "data")}
    files = {}
    for w in "ab":
        files[w] = cache_file = make()

        def stop(at, w=w):
            stops[w].put(at)
            assert go[w, at].wait(60), (w, at)  # a bound on a hang, not a timing

        def read_index(read=cache_file._load_index, stop=stop):
            overloads = read()
            stop("read")
            return overloads

        def write_data(name, data, write=cache_file._save_data, stop=stop):
            stop("data")
            write(name, data)

        cache_file._load_index = read_index
        cache_file._save_data = write_data

    class Fcntl:
        """fcntl as _cache uses it; writer b first tries the lock without waiting and says so."""

        LOCK_EX, LOCK_SH, LOCK_UN = real_fcntl.LOCK_EX, real_fcntl.LOCK_SH, real_fcntl.LOCK_UN

        @staticmethod
        def flock(f, operation):
            if threading.current_thread().name == "b" and operation != real_fcntl.LOCK_UN:
                try:
                    return real_fcntl.flock(f, operation | real_fcntl.LOCK_NB)
                except BlockingIOError:
                    stops["b"].put("lock")
            return real_fcntl.flock(f, operation)

    monkeypatch.setattr(_cache, "fcntl", Fcntl)
    writers = {
        w: threading.Thread(target=files[w].save, args=(key, f"{w}'s code"), name=w)
        for w, key in (("a", "int"), ("b", "float"))
    }
    writers["a"].start()
    assert stops["a"].get(timeout=60) == "read"
    writers["b"].start()
    b_stop = stops["b"].get(timeout=60)
    assert b_stop in ("read", "lock"), b_stop
    go["a", "read"].set()
    assert stops["a"].get(timeout=60) == "data"
    go["b", "read"].set()
    go["b", "data"].set()
    if b_stop == "read":
        writers["b"].join(60)
        assert not writers["b"].is_alive()
    go["a", "data"].set()
    for w in writers.values():
        w.join(60)
        assert not w.is_alive()
    reader = make()
    return b_stop, reader.load("int"), reader.load("float")


def test_concurrent_saves_of_one_function_keep_their_own_code(tmp_path, monkeypatch):
    """Two processes save different specializations of one function into an empty index at
    once; with tilegemm's lock the second waits, and each entry keeps its own code."""
    pytest.importorskip("fcntl")
    assert _race(tmp_path, _cache.LockedIndexDataCacheFile, monkeypatch) == ("lock", "a's code", "b's code")


def test_the_race_is_real_without_the_lock(tmp_path, monkeypatch):
    """The same steps with Numba's own saving: the int entry is lost and the float entry names
    the int code (so the lock above is what keeps the entries apart)."""
    pytest.importorskip("fcntl")
    from numba.core import caching

    # Should this start failing, Numba has made saving atomic itself and the lock is redundant.
    assert _race(tmp_path, caching.IndexDataCacheFile, monkeypatch) == ("read", None, "a's code")


def _nested_jits(tree):
    """(function name, decorator source) of every function defined inside another function and
    decorated with Numba's jit, except those inlined as IR (``inline="always"``)."""
    import ast

    out = []
    for outer in ast.walk(tree):
        if not isinstance(outer, ast.FunctionDef):
            continue
        for node in ast.walk(outer):
            if node is outer or not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                text = ast.unparse(dec)
                if (
                    ("njit" in text or "closure_jit" in text)
                    and 'inline="always"' not in text
                    and "inline='always'" not in text
                ):
                    out.append((node.name, text))
    return out


def test_kernel_closures_compile_under_names_of_their_own():
    """A closure a kernel factory makes per variant and compiles as its own function (not inlined)
    goes through ``closure_jit`` with a tag: Numba names compiled code after the qualname, the
    argument types and a per-process counter, so two variants' closures compiled in two processes
    can share a symbol, and a process loading both cached entries would run one for both (the
    AMX BF16 and VDPBF16PS job loops did: the second dtype called gave the first one's bits)."""
    import ast
    import pathlib

    from tilegemm.kernels import blocked

    bad = {}
    for path in sorted(pathlib.Path(blocked.__file__).parent.glob("*.py")):
        plain = [(n, d) for n, d in _nested_jits(ast.parse(path.read_text())) if not d.startswith("closure_jit")]
        if plain:
            bad[path.name] = plain
    # superblock_step compiles for reading its code only and is never cached.
    assert bad == {"gemm.py": [("step", "njit")]}, bad
    names = {
        blocked._float_job(dot, fp16, body, blocked._P.flag_rows)[0].py_func.__qualname__
        for dot, fp16, body in (
            (False, False, blocked._P.pairs_bf16),
            (False, True, blocked._P.pairs_fp16),
            (True, False, blocked._P.dot),
        )
    }
    assert len(names) == 3, names


# -- the portable cache an installed tilegemm ships (tilegemm.precompile, setup.py) -------------

_SMALL_CALLS = """
import sys, numpy as np, tilegemm
from tilegemm import convert
from tilegemm.kernels import rounding
assert tilegemm.__file__.startswith(sys.argv[1]), tilegemm.__file__
print(hex(rounding.f32_to_bf16(np.uint32(0x3F808000))), convert._exponent_update(np.uint32(0x3F800000), 255, 0))
fs = (rounding.f32_to_bf16, convert._exponent_update)
print(sum(len(f.stats.cache_hits) for f in fs), sum(len(f.stats.cache_misses) for f in fs))
"""


def _copy_package(dest):
    """tilegemm laid out as an install lays it out (``kernels`` a folder inside the package), with
    no compiled code."""
    import pathlib

    import tilegemm

    package = pathlib.Path(tilegemm.__file__).parent
    shutil.copytree(package, dest / "tilegemm", ignore=shutil.ignore_patterns("__pycache__", _cache.PRECOMPILED))
    return dest


def _small_calls(site, user_cache, *behind, **env_extra):
    """Run the two small cached functions of ``_run_cold`` from the copy at ``site`` (with the
    folders ``behind`` after it on the path); return ``(cache hits, cache misses)`` of their first
    calls."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", _cache.INTO_ENV)}
    path = os.pathsep.join(str(p) for p in (site, *behind))
    env.update(PYTHONPATH=path, NUMBA_CACHE_DIR=str(user_cache), **env_extra)
    done = subprocess.run(
        [sys.executable, "-c", _SMALL_CALLS, str(site)], env=env, capture_output=True, text=True, cwd=site
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result, counts = done.stdout.strip().splitlines()
    assert result == "0x3f80 (127, 127)"
    hits, misses = map(int, counts.split())
    return hits, misses


def test_a_portable_cache_serves_the_package_wherever_it_is_installed(tmp_path):
    """A process with ``TILEGEMM_PRECOMPILED_INTO`` writes its compiled code by module into that
    folder; a copy of the package holding it as ``_precompiled`` then compiles nothing on a first
    call, from another path too, and writes nothing into its own cache. An edit to a source file
    makes Numba refuse the entry: that function compiles again."""
    site = _copy_package(tmp_path / "site")
    shipped = site / "tilegemm" / _cache.PRECOMPILED
    assert _small_calls(site, tmp_path / "c0", **{_cache.INTO_ENV: str(shipped)}) == (0, 2)
    written = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*.nbi"))
    assert [w.split("-")[0] for w in written] == [
        "tilegemm.kernels/rounding.f32_to_bf16",
        "tilegemm/convert._exponent_update",
    ]
    assert not list((tmp_path / "c0").rglob("*.nbi"))  # (Numba's own cache objects make empty folders)

    assert _small_calls(site, tmp_path / "c1") == (2, 0)
    assert not list((tmp_path / "c1").rglob("*.nbi"))
    moved = tmp_path / "elsewhere"
    shutil.copytree(site, moved)
    assert _small_calls(moved, tmp_path / "c2") == (2, 0)
    # code for another CPU is refused by Numba's own key (the LLVM CPU name and features)
    assert _small_calls(moved, tmp_path / "c4", NUMBA_CPU_NAME="generic", NUMBA_CPU_FEATURES="") == (0, 2)

    with open(moved / "tilegemm" / "kernels" / "rounding.py", "a") as f:
        f.write("\n# edited\n")
    assert _small_calls(moved, tmp_path / "c3") == (1, 1)


def test_the_stamp_is_the_sources_content_not_their_time(tmp_path):
    """A reinstall of the same sources (new modification times) keeps the cache."""
    import hashlib
    import os

    from tilegemm.kernels import rounding

    src = tmp_path / "rounding.py"
    shutil.copy(rounding.__file__, src)
    locator = _cache.TilegemmCacheLocator(rounding.f32_to_bf16.py_func, str(src))
    stamp = locator.get_source_stamp()
    assert stamp == hashlib.sha256(src.read_bytes()).hexdigest()
    os.utime(src, (1_000_000_000, 1_000_000_000))
    assert locator.get_source_stamp() == stamp
    src.write_text(src.read_text() + "\n# edited\n")
    assert locator.get_source_stamp() != stamp


def test_a_checkout_reads_the_portable_cache_of_the_install_beside_it(tmp_path):
    """``pip install . && python -m tilegemm demo`` from a checkout imports the checkout (Python
    puts the current folder first), which has no compiled code; the installed copy's portable
    cache, found through the distribution's metadata, serves it. Without the installed copy's
    metadata, nothing does."""
    site = _copy_package(tmp_path / "site")
    shipped = site / "tilegemm" / _cache.PRECOMPILED
    assert _small_calls(site, tmp_path / "c0", **{_cache.INTO_ENV: str(shipped)}) == (0, 2)
    checkout = _copy_package(tmp_path / "checkout")
    if not _cache._shipped_roots():  # (an installed copy with compiled code would serve it too)
        assert _small_calls(checkout, tmp_path / "c1", site) == (0, 2)  # no metadata: a mere folder
    info = site / "tilegemm-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tilegemm\nVersion: 0.0.0\n")
    assert _small_calls(checkout, tmp_path / "c2", site) == (2, 0)
    assert not list((tmp_path / "c2").rglob("*.nbi"))

"""The compiled-kernel cache is invalidated by edits to any module the tile loop inlines."""

from __future__ import annotations

import shutil

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

    for disp, deps in (
        (convert.pack_a_float, [rounding]),
        (convert.f32_round_fp16.ufunc._dispatcher, [rounding]),
        (float8._pack_a, [exact]),
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


def test_locator_declines_other_functions(tmp_path, monkeypatch):
    from numba.core import caching, config

    monkeypatch.setattr(config, "CACHE_DIR", "")
    locator = next(c for c in caching.CacheImpl._locator_classes if getattr(c, "_tilegemm", False))
    other = tmp_path / "mod.py"
    other.write_text("def f():\n    return 1\n")
    ns: dict = {}
    exec(compile(other.read_text(), str(other), "exec"), ns)
    assert locator.from_function(ns["f"], str(other)) is None
    assert locator.from_function(G.gemm_int.py_func, G.__file__) is not None


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
        "assert len(lazy) == 17, len(lazy)\n"
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


_RACE = r"""
import pathlib, sys, time
import numpy as np
from numba.core import caching
if sys.argv[2] == "lock":
    import tilegemm  # installs the cache lock
# Both writers meet after choosing a data file and before naming it in the index (unlocked,
# both have read the empty index and chosen file 1; locked, the second is still waiting for the
# lock, so the first goes on after a timeout). Then "a" writes its index entry first and its
# data last, so that unlocked, the index names b's entry and the data file holds a's code.
me, other = sys.argv[1], "b" if sys.argv[1] == "a" else "a"
before, after = {"a": (0.0, 1.0), "b": (0.3, 0.0)}[me]
root = pathlib.Path(sys.argv[3])
save_index = caching.IndexDataCacheFile._save_index
def slow(self, overloads):
    (root / f"ready-{me}").touch()
    deadline = time.monotonic() + 2
    while not (root / f"ready-{other}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(before)
    save_index(self, overloads)
    time.sleep(after)
caching.IndexDataCacheFile._save_index = slow
sys.path.insert(0, sys.argv[3])
from racemod import f
print(f(np.int64(20)) if sys.argv[1] == "a" else f(np.float64(20.5)))
"""


def _race(tmp_path, lock):
    import os
    import subprocess
    import sys

    (tmp_path / "racemod.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x * 2 + 1\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = [sys.executable, "-c", _RACE]
    procs = [subprocess.Popen(run + [w, lock, str(tmp_path)], env=env, stdout=subprocess.PIPE) for w in "ab"]
    assert [p.communicate()[0].split() for p in procs] == [[b"41"], [b"42.0"]]
    check = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import tilegemm; from racemod import f; "
        "print(f(np.int64(20)), f(np.float64(20.5)))"
    )
    return subprocess.run([sys.executable, "-c", check, str(tmp_path)], env=env, capture_output=True, text=True)


def test_concurrent_compiles_of_one_function_keep_their_own_code(tmp_path):
    """Two processes compile different specializations of one cached function into an empty
    cache at once; a third loads both and gets each one's own code."""
    done = _race(tmp_path, "lock")
    assert done.returncode == 0 and done.stdout.split() == ["41", "42.0"], (done.stdout, done.stderr[-1500:])


def test_the_race_is_real_without_the_lock(tmp_path):
    """The same race with Numba's own saving: the float entry names the int code (so the lock
    above is what keeps the entries apart, not the timing)."""
    done = _race(tmp_path, "none")
    # Should this start failing, Numba has made saving atomic itself and the lock is redundant.
    assert done.returncode != 0 or done.stdout.split() != ["41", "42.0"], done.stdout

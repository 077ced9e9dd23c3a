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


def _int8_entry() -> str:
    """The name of the entry point an int8 call compiles on this host."""
    from tilegemm import dispatch

    kernel = dispatch.lookup("amx", "int8", "2x2")
    return kernel.blocked_name or kernel.family.fast


def _run_cold(tmp_path, **env_extra):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), **env_extra)
    code = "import numpy as np, tilegemm; print(tilegemm.matmul(np.int8([[1, 2]]), np.int8([[3], [4]]), 'int8'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[[11]]"


def test_compiled_code_goes_to_the_user_cache(tmp_path):
    """Never into the package: a cache folder there would outlive an uninstall."""
    import pathlib

    import tilegemm

    package = pathlib.Path(tilegemm.__file__).resolve().parent
    before = set(package.rglob("*.nb[ic]")) | set(package.parent.joinpath("kernels").rglob("*.nb[ic]"))
    _run_cold(tmp_path)
    after = set(package.rglob("*.nb[ic]")) | set(package.parent.joinpath("kernels").rglob("*.nb[ic]"))
    assert after == before
    written = list((tmp_path / "xdg" / "tilegemm").rglob("*.nbi"))
    assert any(_int8_entry() in p.name for p in written), written


def test_numba_cache_dir_wins(tmp_path):
    _run_cold(tmp_path, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    assert list((tmp_path / "numba").rglob(f"*{_int8_entry()}*.nbi"))
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

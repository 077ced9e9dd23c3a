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

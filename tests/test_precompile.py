"""tilegemm.precompile: which calls ``python -m tilegemm compile`` (and ``pip install .``) makes
ahead of time, in which processes, and that they leave a first call nothing to compile."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tilegemm import precompile
from tilegemm.instructions import PROFILES, resolve


def test_every_dtype_of_every_profile_is_compiled():
    """Every name a call can give (aliases such as "int8" included) runs a job's kernels."""
    named = {(isa, resolve(isa, d)[1]) for isa, prof in PROFILES.items() for d in prof.names()}
    assert named == set(precompile.jobs()) and len(precompile.jobs()) == len(named)


def test_shares_keep_each_group_in_one_process_and_balance():
    """Jobs that compile the same kernels (the four int8 forms of AMX, say) go to one process:
    two would each compile them."""
    jobs = precompile.jobs()
    for n in (1, 2, 3, 64):
        parts = precompile.shares(jobs, n)
        assert sorted(j for p in parts for j in p) == sorted(jobs)
        assert 1 <= len(parts) <= n
        where = {}
        for i, p in enumerate(parts):
            for job in p:
                where.setdefault(precompile._group(job), set()).add(i)
        assert all(len(s) == 1 for s in where.values()), where
        if n == 2:
            biggest = max(sum(1 for j in jobs if precompile._group(j) == g) for g in where)
            assert abs(len(parts[0]) - len(parts[1])) <= biggest
    assert precompile._group(("amx", "s8s8")) == precompile._group(("amx", "u8u8"))


@pytest.mark.parametrize(
    "only,message",
    [(["amx"], "--only takes ISA:DTYPE (e.g. amx:bf16), got 'amx'"), (["sse:bf16"], "unknown isa 'sse'")],
)
def test_only_names_what_it_refuses(only, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        precompile.parse_only(only)


_FIRST_CALLS = """
import sys, numpy as np
from numba.core import event
import tilegemm
from tilegemm import precompile
compiled = []
class Compiles(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
if sys.argv[1] == "compile":
    precompile.run([("avx2", "u8s8")])
    sys.exit()
event.register("numba:compile", Compiles())
precompile.warm("avx2", "u8s8")
a, b = tilegemm.instructions.resolve("avx2", "u8s8")[2].sample(33, 70, 21, np.random.default_rng(5))
got = tilegemm.matmul(a, b, "u8s8", isa="avx2")
assert got.dtype == np.int32 and (got == tilegemm.reference.matmul(a, b, "u8s8", isa="avx2")).all()
print(compiled)
print(tilegemm.__file__, file=sys.stderr)
"""


@pytest.mark.deep
def test_compiled_ahead_a_first_use_compiles_nothing(tmp_path):
    """After ``precompile.run`` in one process, another with the same cache makes a first use's
    calls (from zero and accumulated, a matrix-vector product, a packed B, the reference) without
    compiling anything."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(precompile.INTO_ENV, None)
    for step in ("compile", "use"):
        done = subprocess.run([sys.executable, "-c", _FIRST_CALLS, step], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.deep
def test_a_wheel_carries_the_kernels_compiled_for_this_cpu(tmp_path):
    """setup.py's build step: the wheel holds the portable cache of the pairs asked for, and the
    package installed from it makes their first calls without compiling, from an empty user
    cache, with the bits of the reference."""
    import zipfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TILEGEMM_PRECOMPILE="avx2:u8s8")
    env.pop("NUMBA_CACHE_DIR", None)
    wheels = tmp_path / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", root, "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = wheels.glob("tilegemm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("tilegemm/_precompiled/tilegemm.kernels/") and n.endswith(".nbc") for n in names)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = dict(os.environ, PYTHONPATH=str(site), NUMBA_CACHE_DIR=str(tmp_path / "empty"))
    env.pop(precompile.INTO_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_CALLS, "use"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout
    assert "site/tilegemm" in done.stderr, done.stderr  # the installed copy ran

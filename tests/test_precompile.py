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
print(compiled)
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

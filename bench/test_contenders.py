"""Every contender of ``tilegemm.benchmark`` on the seed's square sizes, grouped by dtype and size.

Run: ``pytest bench --benchmark-only`` (add ``--benchmark-json=out.json`` to keep the numbers).
The same table drives ``python -m tilegemm bench``; this suite is the pytest-benchmark view of it.
Sizes stop at 1024 by default so a run stays short; ``TILEGEMM_BENCH_SIZES=256,2048`` changes them.
"""

from __future__ import annotations

import os

import pytest

from tilegemm import benchmark as tb

SIZES = [int(s) for s in os.environ.get("TILEGEMM_BENCH_SIZES", "256,512,1024").split(",")]
# The slowest baselines are left out above this size: they take minutes (numpy has no int8 or
# float16 BLAS; see the CLI's --budget for the same rule there).
SLOW = {"numpy int8": 512, "numpy float16": 256, "torch float16": 512}
CASES = [(c, n) for c in tb.contenders() for n in SIZES if n <= SLOW.get(c.name, 1 << 30)]


@pytest.mark.parametrize("contender,n", CASES, ids=[f"{c.group}-{c.name}-{n}" for c, n in CASES])
def test_contender(benchmark, contender, n):
    why = tb.unavailable(contender)
    if why:
        pytest.skip(why)
    benchmark.group = f"{contender.group} n={n}"
    benchmark.extra_info["gflops_per_second_at_mean"] = None
    a, b = tb.inputs(contender.group, n)
    run = contender.prepare(a, b, None, contender.group)
    run()  # compile and warm up outside the timing
    benchmark.pedantic(run, rounds=max(3, tb.reps_for(n) // 2), warmup_rounds=1)
    benchmark.extra_info["gflops_per_second_at_mean"] = 2.0 * n**3 / benchmark.stats.stats.mean / 1e9

"""Threads for the compiled entry points, without Numba's parallel loops.

A GEMM entry point is one *worker* of several (``docs/architecture.md``, "The microkernel
contract"): called as ``entry(worker, workers, *operands)``, it runs its own share of the call's
jobs, or takes jobs from a counter the workers share, and returns. The packing passes and scans
of ``tilegemm/`` are workers the same way. They are compiled with ``nogil=True``, so :func:`run`
runs ``workers`` of them at once on Python threads, the calling thread running worker 0.

Why not ``prange``: Numba compiles a parallel loop's body a second time, as a function of its own,
and each compiled level optimizes and generates machine code again for everything it links in,
so an entry in ``prange`` compiled its whole kernel one more time: first calls and the test suite
spent about 40% of their compiling on it (``docs/performance.md``, 2026-12-08). Threads are made
per call, as the native programs' are
(``tilegemm.native.gemm``): a call runs on several threads only where its work is large
(``tilegemm.plan.threads_for``), a thread costs far less than that, and calls from several
threads at once (dask, a user's own pool) share nothing.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

#: Values below which a pass (packing, a scan) runs on the calling thread alone: a thread made for
#: the call costs tens of microseconds, about what a pass over this many values takes.
SERIAL_VALUES = 1 << 16


def count(values: int) -> int:
    """Workers for a pass over ``values`` values: Numba's thread count for the calling thread (which
    ``tilegemm.matmul``'s ``threads`` and its plan set), or 1 below :data:`SERIAL_VALUES`."""
    import numba

    return 1 if values < SERIAL_VALUES else numba.get_num_threads()


def run(entry: Callable[..., Any], workers: int, *operands: Any) -> list[Any]:
    """``entry(w, workers, *operands)`` for ``w`` in ``range(workers)``, on ``workers`` threads at
    once (the calling thread runs ``w = 0``); their results in order. The first exception any
    worker raised is raised once all have returned."""
    workers = max(1, int(workers))
    if workers == 1:
        return [entry(0, 1, *operands)]
    results: list[Any] = [None] * workers
    failed: list[BaseException] = []

    def work(w: int) -> None:
        try:
            results[w] = entry(w, workers, *operands)
        except BaseException as e:  # re-raised in the calling thread
            failed.append(e)

    others = [threading.Thread(target=work, args=(w,), name=f"tilegemm-worker-{w}") for w in range(1, workers)]
    for th in others:
        th.start()
    work(0)
    for th in others:
        th.join()
    if failed:
        raise failed[0]
    return results

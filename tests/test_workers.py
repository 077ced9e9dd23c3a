"""tilegemm.workers: the GEMM entry points as workers on threads, instead of Numba's prange."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest
from conftest import assert_bits, operands

import tilegemm
from tilegemm import dispatch, plan, workers
from tilegemm.kernels import blocked, gemm


def test_run_calls_every_worker_at_once_and_keeps_their_order():
    """Each worker waits at a barrier of all of them: run on one thread after another, the first
    would wait for good (here, until the barrier's timeout breaks it)."""
    barrier = threading.Barrier(3, timeout=30)
    seen: list[tuple[int, int, str]] = []

    def worker(w, nw, tag):
        barrier.wait()
        seen.append((w, nw, threading.current_thread().name))
        return (w, tag)

    assert workers.run(worker, 3, "x") == [(0, "x"), (1, "x"), (2, "x")]
    assert sorted(s[:2] for s in seen) == [(0, 3), (1, 3), (2, 3)]
    assert threading.current_thread().name in [s[2] for s in seen if s[0] == 0]
    assert workers.run(lambda w, nw: (w, nw), 1) == [(0, 1)]
    assert workers.run(lambda w, nw: (w, nw), 0) == [(0, 1)]  # at least one worker


def test_a_failing_worker_raises_after_every_worker_has_returned():
    done = []

    def worker(w, nw):
        if w == 1:
            raise ValueError(f"worker {w} failed")
        done.append(w)

    with pytest.raises(ValueError, match="worker 1 failed"):
        workers.run(worker, 3)
    assert sorted(done) == [0, 2]


def _entries():
    for fam in dispatch.FAMILIES.values():
        for which in ("fast", "exact"):
            try:
                yield f"{fam.name}:{which}", fam.entry(which)
            except ValueError:  # a family whose proof falls back to another family
                pass
    for name in blocked.ENTRY_BODIES:
        yield f"blocked:{name}", getattr(blocked, name)


def test_gemm_entries_are_workers_that_release_the_gil():
    """Every GEMM entry takes its worker index and count first and is compiled without prange
    (``parallel``), with ``nogil`` so that the workers' threads run at once."""
    import inspect

    seen = 0
    for name, entry in _entries():
        opts = entry.targetoptions
        assert opts.get("nogil") and not opts.get("parallel"), (name, opts)
        assert list(inspect.signature(entry.py_func).parameters)[:2] == ["w", "nw"], name
        seen += 1
    assert seen >= 30, seen


@pytest.mark.parametrize("nw", [2, 3, 5])
def test_any_share_of_jobs_gives_the_bits_of_one_worker(nw, monkeypatch):
    """The superblock loop's workers each take a contiguous share of the superblocks (``share``),
    the blocked driver's take jobs from a shared counter, the packing passes a share of the rows
    or blocks. With more workers than this host has cores (Numba's thread count, which
    ``tilegemm.matmul`` reads, made ``nw``) the bits are those of the reference, through both
    drivers and every pass."""
    spans = [gemm.share.py_func(7, w, nw) for w in range(nw)]
    assert spans[0][0] == 0 and spans[-1][1] == 7
    assert all(spans[i][1] == spans[i + 1][0] for i in range(nw - 1))
    counts = []
    run = workers.run

    def counted(entry, n, *operands):
        counts.append((entry.__name__, n))
        return run(entry, n, *operands)

    monkeypatch.setattr(workers, "run", counted)
    monkeypatch.setattr(numba, "get_num_threads", lambda: nw)
    monkeypatch.setattr(plan, "threads_for", lambda macs, requested: None)
    monkeypatch.setattr(workers, "SERIAL_VALUES", 0)  # the packing passes too, small as they are
    rng = np.random.default_rng(nw)
    for dtype in ("tf32", "bf16", "s8s8", "hf8"):
        a, b = operands(dtype, (2, 70, 130), (130, 90), rng)
        want = np.stack([tilegemm.reference.matmul(x, b, dtype) for x in a])
        assert_bits(tilegemm.matmul(a, b, dtype, tiling="2x2"), want, f"{dtype}, {nw} workers")
    assert {n for _, n in counts} == {nw}, counts
    names = {name for name, _ in counts}
    assert {"pack_a_float", "pack_b", "_pack_a"} <= names, names
    assert len({name for name in names if name.startswith("gemm_")}) >= 3, names  # the drivers' entries

"""What a call costs besides time: its peak extra memory against the operands' own bytes, and the
threads small and large calls run on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc

import numba
import numpy as np
import pytest
from conftest import assert_bits, operands

import tilegemm
from tilegemm import dispatch, plan
from tilegemm.kernels import blocked


def _extra(call):
    """Peak bytes traced during ``call()`` beyond those traced before it (NumPy's allocations,
    the result included), and the call's result."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - before, out


def _work(dtype, nC, m, n, threads):
    """Bytes the blocked entry point allocates itself (tracemalloc does not see Numba's
    allocations), from the kernel's own upper bound."""
    k = dispatch.lookup("amx", dtype, "2x2")
    if k.blocked_name is None:
        pytest.skip("this target runs the superblock loop (no row in the per-target table)")
    name = k.blocked_name
    return blocked.work_bytes(blocked.ENTRY_BODIES[name], nC, m, n, plan.k_chunk(k, m), threads, k.engine)


@pytest.mark.parametrize("dtype,given_out", [("bf16", False), ("bf16", True), ("s8s8", True)])
def test_peak_extra_memory_with_a_fresh_packedb_is_below_the_operands(dtype, given_out):
    """The operands' own bytes: A as the caller passes it (float32 or int8 here) and B as the
    caller passes it, i.e. the PackedB's data, made fresh so that the call makes its tables. The
    extra memory: everything the call allocates at its peak, the result included unless the
    caller passes ``out`` (an int32 result is twice A and B of int8 together: no call could
    return it within their bytes)."""
    rng = np.random.default_rng(0)
    n = 1024
    a, b = tilegemm.instructions.resolve("amx", dtype)[2].sample(n, n, n, rng)
    tilegemm.matmul(a[:40, :70], tilegemm.pack(b[:70, :30], dtype))  # compile outside the measurement
    packed = tilegemm.pack(b, dtype)
    own = a.nbytes + packed.data.nbytes
    out = np.empty((n, n), tilegemm.instructions.resolve("amx", dtype)[2].acc) if given_out else None
    extra, got = _extra(lambda: tilegemm.matmul(a, packed, threads=2, out=out))
    extra += _work(dtype, 1, n, n, min(2, numba.config.NUMBA_NUM_THREADS))
    assert extra <= own, f"{extra / 1e6:.1f} MB extra for {own / 1e6:.1f} MB of operands"
    if not given_out:
        assert extra >= got.nbytes  # the measurement sees the result


def test_a_long_dot_product_packs_b_in_slabs():
    """(1 x 10^7) @ (10^7 x 1) in float32: 80 MB of operands. Packing the whole B would take 320 MB
    (N padded to 16 columns) and A's panels as much again; the call packs B in slabs instead."""
    rng = np.random.default_rng(1)
    k = 10**7
    a = rng.standard_normal((1, k)).astype(np.float32)
    b = rng.standard_normal((k, 1)).astype(np.float32)
    tilegemm.matmul(a[:, :100], b[:100])  # compile outside the measurement
    own = a.nbytes + b.nbytes
    extra, out = _extra(lambda: tilegemm.matmul(a, b, threads=1))
    extra += _work("bf16", 1, 1, 1, 1)
    assert extra <= own, f"{extra / 1e6:.1f} MB extra for {own / 1e6:.1f} MB of operands"
    # 3 x 10^5 of it, ten slabs: the reference's bits
    head = tilegemm.matmul(a[:, : 3 * 10**5], b[: 3 * 10**5], threads=1)
    assert_bits(head, tilegemm.reference.matmul(a[:, : 3 * 10**5], b[: 3 * 10**5]), "slabs")


def test_a_long_dot_product_peak_resident_memory():
    """The same call measured by the operating system in a fresh process (resident high-water
    mark): it sees Numba's allocations too."""
    from tilegemm import perf

    try:
        mem = perf.peak_memory(1, 10**7, 1, packed=False)
    except (RuntimeError, KeyError) as e:  # not Linux, or /proc unreadable
        pytest.skip(f"no resident high-water mark here: {e}")
    assert mem["own"] == 8 * 10**7
    assert mem["extra"] <= mem["own"], mem


def test_slabs_give_the_bits_of_one_call(monkeypatch):
    """Slab boundaries fall on whole K steps, and each slab restarts its blocks' paths from C:
    forced into many slabs, a call with tiny values gives the reference's bits."""
    rng = np.random.default_rng(2)
    a, b = operands("bf16", (19, 32 * 9 + 5), (32 * 9 + 5, 21), rng)
    a[:, 40:70] *= 2.0**-70
    monkeypatch.setattr(plan, "SLAB_BYTES", 1)  # one K step per slab
    monkeypatch.setattr(plan, "MIN_SLAB_K", 1)
    for isa in ("amx", "avx512"):
        want = tilegemm.reference.matmul(a, b, "bf16", isa=isa)
        assert_bits(tilegemm.matmul(a, b, "bf16", isa=isa), want, f"{isa} in slabs")
    ai, bi = operands("s8u8", (5, 64 * 3 + 7), (64 * 3 + 7, 18), rng)
    assert_bits(tilegemm.matmul(ai, bi, "s8u8"), tilegemm.reference.matmul(ai, bi, "s8u8"), "int8 in slabs")


def test_slabs_are_deep_enough_and_no_larger_than_b():
    """A slab covers at least MIN_SLAB_K values of K (each slab passes over all of C), and where
    K is deeper than that it holds no more than SLAB_BYTES or that depth of B."""
    for n, k_step in ((1, 32), (2048, 32), (4096, 64), (96, 4)):
        steps = plan.slab_steps(1, n, k_step)
        assert steps * k_step >= plan.MIN_SLAB_K
        bytes_per_step = -(-n // 16) * 1024
        assert steps * bytes_per_step <= max(plan.SLAB_BYTES, -(-plan.MIN_SLAB_K // k_step) * bytes_per_step)
    assert plan.slab_steps(1, 2048, 32) * 32 == 1024  # n = 2048 BF16: 1 MiB alone would be 256 deep
    assert plan.slab_steps(1, 64, 32) * 32 == 8192  # narrow B: the bytes decide


# -- threads ---------------------------------------------------------------------------------


def test_small_calls_run_on_one_thread(monkeypatch):
    monkeypatch.setattr(plan, "_busy", lambda: False)
    monkeypatch.setattr(plan, "free_cores", lambda: 64)  # every core free
    assert plan.threads_for(plan.SERIAL_BELOW - 1, None) == 1
    assert plan.threads_for(plan.SERIAL_BELOW, None) is None
    assert plan.threads_for(10, 2) == 2  # the caller's choice wins
    monkeypatch.setattr(plan, "_busy", lambda: True)  # a busy machine: a second thread waits
    assert plan.threads_for(plan.SERIAL_BELOW, None) == 1
    assert plan.threads_for(plan.SERIAL_BELOW_BUSY, None) is None


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba is limited to one thread here")
def test_large_calls_leave_the_cores_other_processes_use(monkeypatch):
    """Beside other processes' running threads a large call takes only the cores they leave free
    (one at least); the caller's choice still wins."""
    monkeypatch.setattr(plan, "_busy", lambda: False)
    threads = numba.get_num_threads()
    monkeypatch.setattr(plan, "free_cores", lambda: threads - 1)
    assert plan.threads_for(plan.SERIAL_BELOW, None) == max(1, threads - 1)
    assert plan.threads_for(plan.SERIAL_BELOW, 2) == 2
    monkeypatch.setattr(plan, "free_cores", lambda: 1)
    assert plan.threads_for(1 << 40, None) == 1


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads Linux's /proc")
def test_a_spinning_process_takes_a_core(monkeypatch):
    """A process spinning on a core is counted among the others' running threads, and this
    process's own threads never are; the count is kept for ``FREE_CORES_TTL`` seconds."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert plan._others_running() >= 1
        monkeypatch.setattr(plan, "_free_seen", (-1.0, 0))
        assert plan.free_cores() <= max(1, plan._cores() - 1)
    finally:
        spin.kill()
        spin.wait()
    seen = plan._free_seen
    assert plan.free_cores() == seen[1]  # within the TTL: the same count, not read again
    monkeypatch.setattr(plan, "_free_seen", (-1.0, 0))
    assert 1 <= plan.free_cores() <= plan._cores()
    assert plan._own_running() >= 1  # this thread, reading


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba is limited to one thread here")
def test_dynamic_jobs_cover_c_once(monkeypatch):
    """On several threads a call is cut into about JOBS_PER_THREAD jobs per thread, which the
    threads take as they finish; every element of C is computed once, with the bits of one
    thread, for each float driver and the INT8 one."""
    rng = np.random.default_rng(5)
    for dtype in ("bf16", "fp16", "s8s8"):
        a, b = operands(dtype, (3, 203, 100), (100, 77), rng)
        one = tilegemm.matmul(a, b, dtype, threads=1)
        assert_bits(tilegemm.matmul(a, b, dtype, threads=2), one, dtype)
    assert blocked._split(2, 1, 1024, 1024, 8, 16) == (blocked.JOBS_PER_THREAD * 2, 1)
    assert blocked._split(1, 1, 1024, 1024, 8, 16) == (1, 1)
    # rows while each job keeps a block of MC rows, then columns; rows again where N is narrow
    assert blocked.MC == 96 and blocked.JOBS_PER_THREAD == 4
    assert blocked._split(2, 1, 256, 2048, 8, 16) == (2, 4)
    assert blocked._split(2, 1, 32, 4096, 8, 16) == (1, 8)
    assert blocked._split(2, 1, 256, 16, 8, 16) == (8, 1)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba is limited to one thread here")
def test_calls_run_on_the_planned_threads(monkeypatch):
    monkeypatch.setattr(plan, "_busy", lambda: False)
    monkeypatch.setattr(plan, "free_cores", lambda: 64)
    rng = np.random.default_rng(3)
    small = operands("bf16", (64, 64), (64, 64), rng)
    big = operands("bf16", (512, 512), (512, 256), rng)  # 2^26 multiply-adds
    with plan.recording() as r:
        tilegemm.matmul(*small)
        tilegemm.matmul(*big)
        tilegemm.matmul(*small, threads=2)
    assert r.threads == [1, numba.get_num_threads(), 2]


@pytest.mark.parametrize("m,n", [(1, 300), (3, 40), (40, 3), (200, 300)])
def test_thread_splits_give_identical_bits(m, n):
    """A matrix-vector product splits N between threads, a tall one M, one of two blocks of rows
    both: the bits never change."""
    rng = np.random.default_rng(4)
    for dtype in ("bf16", "u8s8"):
        a, b = operands(dtype, (2, m, 130), (130, n), rng)
        one = tilegemm.matmul(a, b, dtype, threads=1)
        assert_bits(one, np.stack([tilegemm.reference.matmul(x, b, dtype) for x in a]), dtype)
        for t in range(2, numba.config.NUMBA_NUM_THREADS + 1):
            assert_bits(tilegemm.matmul(a, b, dtype, threads=t), one, f"{dtype}, {t} threads")


def test_the_one_thread_blas_limit_leaves_numbas_threads_alone():
    """The speed targets time numpy on one BLAS thread; Numba's parallel kernels may run on an
    OpenMP pool, which must keep its threads there (else "2 threads vs 1" times one against one)."""
    from threadpoolctl import threadpool_info

    from tilegemm import perf

    tilegemm.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32), threads=2)  # Numba's pool
    before = {(p["user_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}
    with perf._one_thread_blas():
        inside = {(p["user_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}
    for (api, path), n in inside.items():
        assert n == (1 if api == "blas" else before[(api, path)]), (api, path, n)

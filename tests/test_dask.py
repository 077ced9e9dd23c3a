"""tilegemm.dask: a dask product has the bits of one tilegemm call, whatever the chunking."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits

da = pytest.importorskip("dask.array")

import tilegemm  # noqa: E402
import tilegemm.dask as tdask  # noqa: E402

CHUNKS = [
    # (x chunks, y chunks): K split off the instruction step, rows and columns in odd pieces,
    # one chunk, and chunks of one element along K
    ((7, 13), (13, 9)),
    ((70, 300), (300, 45)),
    ((33, 64), (64, 16)),
    ((16, 1), (1, 45)),
]


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(14)
    a = rng.standard_normal((70, 300))
    b = rng.standard_normal((300, 45))
    a[:, ::5] *= 2.0**30  # partial sums of very different sizes: any other K order shows
    return a, b


@pytest.mark.parametrize("xc,yc", CHUNKS, ids=[f"{x}-{y}" for x, y in CHUNKS])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "int8"])
def test_any_chunking_gives_the_single_call(operands, xc, yc, dtype):
    a, b = operands
    if dtype == "int8":
        rng = np.random.default_rng(8)
        a, b = rng.integers(-128, 128, a.shape, dtype=np.int8), rng.integers(-128, 128, b.shape, dtype=np.int8)
    want = tilegemm.matmul(a, b, dtype)
    r = tdask.matmul(da.from_array(a, chunks=xc), da.from_array(b, chunks=yc), dtype)
    assert r.chunks[0] == da.from_array(a, chunks=xc).chunks[0]
    assert_bits(r.compute(scheduler="threads"), want, f"{dtype} {xc} {yc}")


def test_chaining_unaligned_k_chunks_would_change_bits(operands):
    """Why tasks join their K chunks instead of chaining them: a chain continued from a K chunk
    that ends inside an instruction step takes other steps than the single call."""
    a, b = operands
    want = tilegemm.matmul(a, b)
    out = tilegemm.matmul(a[:, :50], b[:50])
    tilegemm.matmul(a[:, 50:], b[50:], out=out, accumulate=True)
    assert tilegemm.bitdiff(out, want).count > 0
    out = tilegemm.matmul(a[:, :64], b[:64])  # a chunk boundary on a whole step: the same chain
    tilegemm.matmul(a[:, 64:], b[64:], out=out, accumulate=True)
    assert_bits(out, want, "aligned chain")


def test_batches_packed_weights_and_the_onednn_profile(operands):
    a, b = operands
    x = np.stack([a, a[::-1]])
    xd = da.from_array(x, chunks=(1, 20, 50))
    packed = tilegemm.pack(b)
    r = tdask.matmul(xd, packed)
    assert r.chunks[-1] == (45,)
    assert_bits(r.compute(scheduler="threads"), tilegemm.matmul(x, b), "packed weight")
    # the weight enters the graph once, as one key that every task reads
    holders = [k for k, v in dict(r.__dask_graph__()).items() if "PackedB(" in repr(v)]
    assert len(holders) == 1 and str(holders[0]).startswith("PackedB")
    want = tilegemm.onednn.matmul(x, b, onednn_threads=1)
    for y in (da.from_array(b, chunks=(64, 16)), tilegemm.pack(b, "bf16", "onednn")):
        r = tdask.matmul(xd, y, isa="onednn", onednn_threads=1)
        assert r.dtype == want.dtype
        assert_bits(r.compute(scheduler="threads"), want, "onednn")


def test_bad_input_is_refused(operands):
    a, b = operands
    x = da.from_array(a, chunks=(10, 100))
    with pytest.raises(ValueError, match="inner dimensions"):
        tdask.matmul(x, np.ones((299, 3)))
    with pytest.raises(ValueError, match=r"y of shape \(K, N\)"):
        tdask.matmul(x, np.ones((2, 300, 3)))
    with pytest.raises(ValueError, match="tiling"):
        tdask.matmul(x, b, tiling="9x9")
    with pytest.raises(TypeError, match="unexpected keyword"):
        tdask.matmul(x, b, bogus=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tdask.matmul(x, b, isa="onednn", alpha=2)
    with pytest.raises(ValueError, match="known chunk sizes"):
        tdask.matmul(x[x[:, 0] > 0], b)


def test_two_worker_cluster(operands):
    """On a dask.distributed LocalCluster of two worker processes: the same bits, with a packed
    weight sent through the graph."""
    distributed = pytest.importorskip("dask.distributed")
    a, b = operands
    x = da.from_array(np.stack([a, -a]), chunks=(1, 18, 77))
    y = da.from_array(b, chunks=(100, 20))
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        got = tdask.matmul(x, y).compute()
        assert_bits(got, tilegemm.matmul(np.stack([a, -a]), b), "bf16 on two workers")
        packed = tilegemm.pack(b)
        assert_bits(tdask.matmul(x, packed).compute(), got, "packed weight in the graph")
        want = tilegemm.onednn.matmul(np.stack([a, -a]), b, onednn_threads=2)
        assert_bits(tdask.matmul(x, y, isa="onednn", onednn_threads=2).compute(), want, "onednn on two workers")
        assert len(client.scheduler_info()["workers"]) == 2

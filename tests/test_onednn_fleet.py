"""PyTorch's bf16 on the other x86 server classes, against outputs recorded on an AMD EPYC Zen 4:
the ``avx512_core_bf16`` host (oneDNN's brgemm matmul on VDPBF16PS), the ``avx512_core`` host
(oneDNN's gemm:jit:bf16), the ``avx2`` host (PyTorch's own kernels), the small products PyTorch
keeps from oneDNN on every host, the edge cases (overflow, underflow, denormals, NaN and zero
signs), named hosts, and the refusals.

The recordings (tests/data/torch-bf16-fleet.json) hold a SHA-256 of every case's output bits, so
each case is compared on all of its bits; the full arrays are public (``docs/onednn.md``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import silicon

import tilegemm
from tilegemm import onednn
from tilegemm.formats import bf16_dtype
from tilegemm.onednn.blocking import Problem, avx512_blocking
from tilegemm.reference import onednn as ref

BF = bf16_dtype()
ZEN4 = "recording-zen4"


def _macs(case) -> int:
    batch = {"bmm": 2, "attn_kt": 8, "linear3d": 2}.get(case["op"], 1)
    return batch * case["M"] * case["K"] * case["N"]


def torch_op(mm, linear, case, A, B, C, **kw):
    """The torch call of a fleet case (``record_fleet.py``), through a matmul / linear pair."""
    op = case["op"]
    if op in ("matmul", "bmm"):
        return mm(A, B, **kw)
    if op == "linear_bias":
        return linear(A, B, C, **kw)
    if op == "linear3d":
        return linear(A, B, None, **kw)
    if op == "matmul_wt":
        return mm(A, B.T, b_transposed=True, **kw)
    if op == "addmm_beta":
        return mm(A, B, c=C, beta=0.5, **kw)
    if op == "attn_kt":
        return mm(A, np.swapaxes(B, -1, -2), b_transposed=True, **kw)
    raise AssertionError(op)


def _ref_mm(a, b, **kw):
    """The reference takes (batch,) M x K: a 4-D product's batch dimensions are folded."""
    a, b = np.asarray(a), np.asarray(b)
    if b.ndim > 3:
        y = ref.matmul(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]), **kw)
        return y.reshape(b.shape[:-2] + y.shape[-2:])
    return ref.matmul(a, b, **kw)


def _ref_linear(x, w, bias, **kw):
    x = np.asarray(x)
    y = ref.matmul(x.reshape(-1, x.shape[-1]), np.asarray(w).T, c=bias, b_transposed=True, **kw)
    return y.reshape(x.shape[:-1] + (y.shape[-1],))


def _tiered(cases, key=lambda c: c):
    """The cases as parameters, those past 2^22 multiply-adds (but for one row of K = 8192, which
    reaches gemm:jit's K blocks of 768 and the gemv kernels) in the deep tier (``pytest -m deep``,
    run by CI): each output is as cheap to check as to compute, and the default tier keeps every
    op, thread count and kernel path."""
    out = []
    for c in cases:
        case = key(c)
        macs = _macs(case)
        default = macs <= 2**22 or (case["M"] == 1 and macs <= 2**23)
        out.append(c if default else pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=pytest.mark.deep))
    return out


def _check(case, got, cls="avx512_core_bf16"):
    want = silicon.fleet_digest(cls, case["key"])
    assert silicon.digest(got) == want, (
        f"{case['key']} ({case['op']} {case['M']}x{case['K']}x{case['N']}, {case['threads']} threads)"
    )


BF16_CASES = silicon.fleet_cases("avx512_core_bf16")


@pytest.mark.parametrize("case", _tiered(BF16_CASES), ids=[c["key"] for c in BF16_CASES])
def test_avx512_core_bf16_fast_path(case):
    """Every recorded case of the avx512_core_bf16 class, all output bits, on the fast path (the
    larger ones in the deep tier, :func:`_tiered`)."""
    A, B, C = (None if x is None else x.view(BF) for x in silicon.fleet_inputs(case))
    kw = dict(host=ZEN4, onednn_threads=case["threads"])
    _check(case, torch_op(onednn.matmul, onednn.linear, case, A, B, C, **kw))


CHEAP = [c for c in BF16_CASES if _macs(c) <= 2**22]


@pytest.mark.parametrize("case", CHEAP, ids=[c["key"] for c in CHEAP])
def test_avx512_core_bf16_reference(case):
    """The readable reference on every recorded case of up to 2^22 multiply-adds."""
    A, B, C = (None if x is None else x.view(BF) for x in silicon.fleet_inputs(case))
    kw = dict(host=ZEN4, onednn_threads=case["threads"])
    _check(case, torch_op(_ref_mm, _ref_linear, case, A, B, C, **kw))


def _case(key):
    return next(c for c in BF16_CASES if c["key"] == key)


def _with_plan(case, change):
    A, B, _ = silicon.fleet_inputs(case)
    p = onednn.plan(case["M"], case["K"], case["N"], onednn_threads=case["threads"], host=ZEN4)
    return onednn.compute(A.view(BF), B.view(BF), change(p))


def _blocks(p, size):
    """The plan with K cut into calls of ``size`` (one thread along K)."""
    calls = tuple(((k, min(k + size, p.K)),) for k in range(0, p.K, size))
    return dataclasses.replace(p, groups=(calls,), reduce=False)


@pytest.mark.parametrize(
    "key,change",
    [
        # one VDPBF16PS chain over the whole K
        ("c042", lambda p: dataclasses.replace(p, groups=((((0, p.K),),),), reduce=False)),
        # K > 1024 takes blocks of 1024, not 512
        ("c042", lambda p: _blocks(p, 512)),
        # a 1 x K src is tagged transposed: blocks of 512, not 1024
        ("c198", lambda p: _blocks(p, 1024)),
    ],
    ids=["one-chain", "k-blk-1024", "m1-k-blk-512"],
)
def test_the_recordings_pin_the_rules(key, change):
    case = _case(key)
    assert silicon.digest(_with_plan(case, change)) != silicon.fleet_digest("avx512_core_bf16", key)
    assert silicon.digest(_with_plan(case, lambda p: p)) == silicon.fleet_digest("avx512_core_bf16", key)


@pytest.mark.parametrize(
    "M,K,N,batch,nthr,k_blk,nthr_k",
    [
        (128, 1024, 256, 1, 2, 512, 1),  # K <= 1024: blocks of 512
        (128, 1025, 256, 1, 2, 1024, 1),  # K > 1024: 1024
        (1, 8192, 1024, 1, 2, 512, 1),  # 1 x K: 512, enough parallel work over N
        (1, 4096, 64, 1, 2, 512, 2),  # low parallel work, power-of-two K >= 2048: K split
        (1, 4096, 64, 2, 2, 512, 1),  # ... but not with a batch
        (1, 3000, 16, 1, 2, 512, 1),  # ... nor for a K that is not a power of two
        (1, 4096, 64, 1, 8, 512, 4),  # at most 4 threads along K
        (300, 777, 65, 1, 1, 512, 1),  # odd K: no rounding to the VNNI pair
    ],
)
def test_avx512_blocking(M, K, N, batch, nthr, k_blk, nthr_k):
    b = avx512_blocking(Problem(M, K, N, batch, nthr, False, False, 32768, 2**20, 8, 64))
    assert (b.K_blk, b.nthr_k, b.heuristic) == (k_blk, nthr_k, "avx512")


def test_odd_k_tail_is_its_own_call():
    p = onednn.plan(33, 777, 65, onednn_threads=1, host=ZEN4)
    assert p.groups == ((((0, 512),), ((512, 777),)),)
    assert p.host.chain == "VDPBF16PS"
    assert "avx512, nthr_k=1, K_blk=512: 0:512 + 512:777" in p.describe()


def test_named_hosts():
    assert onednn.Host.named("recording-amx") == onednn.RECORDING_HOST
    assert onednn.HOSTS[ZEN4].isa == "avx512_core_bf16"
    for name, host in onednn.HOSTS.items():
        assert onednn.plan(64, 4096, 256, host=name).host is host
    a = np.ones((4, 2048), np.float32)
    b = np.ones((2048, 3), np.float32)
    assert (onednn.matmul(a, b, host="genoa-96").astype(np.float32) == 2048).all()
    with pytest.raises(ValueError, match=r"unknown host 'genoa'.*recording-zen4.*genoa-96"):
        onednn.plan(4, 8, 4, host="genoa")
    with pytest.raises(ValueError, match="unknown host"):
        tilegemm.matmul(a, b, isa="onednn", host="epyc")
    with pytest.raises(TypeError, match="host must be"):
        onednn.plan(4, 8, 4, host=3)


@pytest.mark.parametrize("isa", ["sse41", "avx512_core_fp16", "avx"])
def test_unmodelled_isas_are_refused(isa):
    with pytest.raises(ValueError, match=f"isa '{isa}' is not modelled.*avx512_core_bf16.*avx512_core.*avx2"):
        onednn.Host(isa=isa)


def test_the_host_changes_the_bits_where_the_classes_differ():
    # c042 (128 x 2048 x 256): the Zen 4 class and the AMX class part in some outputs
    case = _case("c042")
    A, B, _ = silicon.fleet_inputs(case)
    zen4 = onednn.matmul(A.view(BF), B.view(BF), host=ZEN4, onednn_threads=1)
    amx = onednn.matmul(A.view(BF), B.view(BF), host="recording-amx", onednn_threads=1)
    assert 0 < tilegemm.bitdiff(zen4, amx).count < zen4.size // 100


ORDER = silicon.fleet()["classes"]["avx512_core_bf16"]["block_order"]["cases"]


@pytest.mark.parametrize("case", ORDER, ids=[c["key"] for c in ORDER])
def test_k_split_between_threads(case):
    """A 1 x K product with little parallel work over N: oneDNN splits K between threads, each
    thread adds its blocks into its own buffer, and thread 0 adds the others' buffers in order.
    Operands built so that the order of the block additions shows (recorded on a Zen 4)."""
    a, b = (x.view(BF) for x in silicon.block_order_operands(case["K"], case["N"], case["blk"]))
    p = onednn.plan(1, case["K"], case["N"], onednn_threads=case["threads"], host=ZEN4)
    assert p.reduce and len(p.groups) == p.blocking.nthr_k == case["threads"]
    want = silicon.fleet_digest("avx512_core_bf16", case["key"])
    assert silicon.digest(onednn.matmul(a, b, host=ZEN4, onednn_threads=case["threads"])) == want
    assert silicon.digest(ref.matmul(a, b, host=ZEN4, onednn_threads=case["threads"])) == want
    flat = dataclasses.replace(p, groups=(sum(p.groups, ()),), reduce=False)  # one thread's order
    assert silicon.digest(onednn.compute(a, b, flat)) != want


# -- the avx2 and avx512_core classes: PyTorch's own kernels, oneDNN's gemm:jit -----------------

AVX2 = "recording-zen4-avx2"
AVX512 = "recording-zen4-avx512"
# The classes oneDNN's brgemm does not serve, by the recording host's setting: PyTorch's own
# kernels (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2; threads change nothing there) and
# oneDNN's gemm:jit:bf16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE; threads decide which rows are gemv).
OTHER = {"avx2": AVX2, "avx512_core": AVX512}
OTHER_CASES = [(cls, c) for cls in OTHER for c in silicon.fleet_cases(cls)]
OTHER_CHEAP = [(cls, c) for cls, c in OTHER_CASES if _macs(c) <= 2**22]


@pytest.mark.parametrize(
    "cls,case", _tiered(OTHER_CASES, lambda c: c[1]), ids=[f"{cls}-{c['key']}" for cls, c in OTHER_CASES]
)
def test_other_classes_fast_path(cls, case):
    """Every recorded case of the avx2 and avx512_core classes, all output bits, at the case's
    threads (the larger ones in the deep tier, :func:`_tiered`)."""
    A, B, C = (None if x is None else x.view(BF) for x in silicon.fleet_inputs(case))
    kw = dict(host=OTHER[cls], onednn_threads=case["threads"])
    _check(case, torch_op(onednn.matmul, onednn.linear, case, A, B, C, **kw), cls)


@pytest.mark.parametrize("cls,case", OTHER_CHEAP, ids=[f"{cls}-{c['key']}" for cls, c in OTHER_CHEAP])
def test_other_classes_reference(cls, case):
    A, B, C = (None if x is None else x.view(BF) for x in silicon.fleet_inputs(case))
    kw = dict(host=OTHER[cls], onednn_threads=case["threads"])
    _check(case, torch_op(_ref_mm, _ref_linear, case, A, B, C, **kw), cls)


def test_avx2_orders_run_in_binary32_where_their_proof_holds(monkeypatch):
    """ATen's transa and notrans orders run as the host's own binary32 steps
    (``kernels.aten.transa_fast``, ``notrans_fast``) where ``chains.binary32_steps_hold`` proves
    them exact: the recorded avx2 cases of ordinary data take them, and give every recorded bit
    (the edge cases, refused, in :func:`test_edges`)."""
    from tilegemm.kernels import aten

    calls = {"transa_fast": 0, "notrans_fast": 0}

    def spy(name):
        real = getattr(aten, name)

        def counted(*args):
            calls[name] += 1
            real(*args)

        return counted

    for name in calls:
        monkeypatch.setattr(aten, name, spy(name))
    cases = {"transa_fast": 0, "notrans_fast": 0}
    for cls, case in OTHER_CHEAP:
        if cls != "avx2":
            continue
        before = dict(calls)
        A, B, C = (None if x is None else x.view(BF) for x in silicon.fleet_inputs(case))
        _check(case, torch_op(onednn.matmul, onednn.linear, case, A, B, C, host=AVX2, onednn_threads=1), cls)
        for name in calls:
            cases[name] += calls[name] > before[name]
    assert cases["transa_fast"] >= 20 and cases["notrans_fast"] >= 5, cases


AVX512_CASES = silicon.fleet_cases("avx512_core")


@pytest.mark.parametrize(
    "K,blocks",
    [
        (300, [(0, 300)]),
        (384, [(0, 384)]),
        (385, [(0, 193), (193, 385)]),
        (777, [(0, 389), (389, 777)]),
        (1535, [(0, 768), (768, 1535)]),
        (3000, [(0, 768), (768, 1536), (1536, 2304), (2304, 3000)]),
    ],
)
def test_gemm_k_blocks(K, blocks):
    # get_k_padd (gemm_driver.cpp 188-211) with bk = 768, bk_traditional = 384
    assert list(onednn.schedule.gemm_k_blocks(K)) == blocks
    assert onednn.plan(64, K, 64, host=AVX512).chains() == blocks


def test_gemm_threads_pick_the_gemv_rows():
    """Two threads share 7 x 64 outputs at 224: the row 3 that straddles the split is two gemv
    calls; one thread makes one gemm call. Only the straddling row's bits may change."""
    pieces = list(onednn.schedule.gemm_pieces(1, 7, 64, 2))
    assert pieces == [(0, 0, 3, 0, 64), (0, 3, 4, 0, 32), (0, 3, 4, 32, 64), (0, 4, 7, 0, 64)]
    assert list(onednn.schedule.gemm_pieces(1, 7, 64, 1)) == [(0, 0, 7, 0, 64)]
    assert "(2 of 4 calls one-row gemv)" in onednn.plan(7, 3000, 64, onednn_threads=2, host=AVX512).describe()
    case = next(c for c in AVX512_CASES if (c["op"], c["M"], c["N"], c["threads"]) == ("matmul", 7, 64, 2))
    A, B = (x.view(BF) for x in silicon.fleet_inputs(case)[:2])
    two = onednn.matmul(A, B, host=AVX512, onednn_threads=2).view(np.uint16)
    one = onednn.matmul(A, B, host=AVX512, onednn_threads=1).view(np.uint16)
    assert silicon.digest(two) == silicon.fleet_digest("avx512_core", case["key"])
    rows = set(np.nonzero(two != one)[0])
    assert rows <= {3}


EDGES = silicon.edge_cases()
EDGE_HOSTS = {"avx512_core_bf16": ZEN4, "avx512_core": AVX512, "avx2": AVX2}


@pytest.mark.parametrize("cls", sorted(EDGE_HOSTS))
@pytest.mark.parametrize("kind", silicon.EDGE_KINDS)
def test_edges(cls, kind):
    """Overflowing and underflowing products, denormals, infinities, NaNs of every payload and
    zeros of both signs (``silicon.edge_operand``), on every op and on K values that reach each
    kernel's tails, fast path and reference, against PyTorch on the recording machine."""
    misses = []
    for case in EDGES:
        if case["a"][1] != kind:
            continue
        A, B, C = (None if x is None else x.view(BF) for x in silicon.edge_inputs(case))
        want = silicon.fleet_digest(cls, case["key"])
        kw = dict(host=EDGE_HOSTS[cls], onednn_threads=1)
        with np.errstate(all="ignore"):
            for name, mm, linear in (("fast", onednn.matmul, onednn.linear), ("reference", _ref_mm, _ref_linear)):
                if silicon.digest(torch_op(mm, linear, case, A, B, C, **kw)) != want:
                    misses.append(f"{name} {case['key']} {case['op']} {case['M']}x{case['K']}x{case['N']}")
    assert not misses, misses


@pytest.mark.parametrize(
    "M,K,N,batch,b_transposed,kernel",
    [
        (16, 16, 16, 1, False, "notrans"),  # M * K * N = 4096: not above oneDNN's threshold
        (16, 16, 17, 1, False, "brgemm"),
        (16, 16, 16, 1, True, "transa"),
        (1, 64, 65, 1, True, "brgemm"),
        (8, 16, 16, 2, False, "notrans"),  # batch * M * K * N = 4096
        (8, 16, 17, 2, False, "brgemm"),
        (4, 4, 24, 2, False, "sequential"),  # K * M * N = 384 < 400: the small bmm loop
        (4, 4, 25, 2, True, "transa"),
        (4, 4, 24, 1, False, "notrans"),  # not a batched product
    ],
)
def test_pytorch_keeps_small_products_from_onednn(M, K, N, batch, b_transposed, kernel):
    """On a oneDNN host PyTorch calls oneDNN only above 16^3 multiply-adds (batch included); a
    smaller product runs PyTorch's own kernels, as on an AVX2 host, whose choice is the
    operands' layout and the small-``bmm`` rule. Probed with ``ONEDNN_VERBOSE`` on torch 2.13."""
    for host in (ZEN4, "recording-amx"):
        p = onednn.plan(M, K, N, batch=batch, b_transposed=b_transposed, host=host)
        assert p.kernel == kernel
    p = onednn.plan(M, K, N, batch=batch, b_transposed=b_transposed, host=AVX2)
    assert p.kernel == (kernel if kernel != "brgemm" else ("transa" if b_transposed else "notrans"))


def test_avx2_plans_ignore_threads_and_caches():
    plans = {
        onednn.plan(64, 4096, 256, onednn_threads=t, host=h).describe() for t in (1, 2, 64) for h in (AVX2, "milan-64")
    }
    assert plans == {"aten notrans (4 partial sums): 0:4096"}
    p = onednn.plan(64, 4096, 256, b_transposed=True, host="milan-64")
    assert (p.kernel, p.calls, p.reduce) == ("transa", 1, False)


def test_nan_of_the_weights_wins_on_vdpbf16ps():
    """Where an A NaN meets a B NaN in one VDPBF16PS product, silicon returns B's NaN: brgemm
    passes the weights as the first source. Both are quieted; their payloads tell them apart."""
    a = np.full((2, 64), 0x3F80, np.uint16)  # bf16 1.0
    b = np.full((64, 64), 0x3F80, np.uint16)
    a[:, 10] = 0x7F81  # signalling, payload 0x01
    b[10, :] = 0xFFA2  # signalling, payload 0x22
    a, b = a.view(BF), b.view(BF)
    for fn in (onednn.matmul, ref.matmul):
        y = fn(a, b, host=ZEN4, onednn_threads=1).view(np.uint16)
        assert (y == 0xFFE2).all(), hex(int(y[0, 0]))
    # PyTorch's own kernels round every NaN to 0x7FC0
    y = onednn.matmul(a, b, host=AVX2).view(np.uint16)
    assert (y == 0x7FC0).all()

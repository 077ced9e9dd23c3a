"""The "onednn" profile: oneDNN's float32 epilogue, its plans, the reference, the fast path, and the
recorded silicon results (the whole set runs through tilegemm.torch in test_torch.py)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import silicon
from conftest import assert_bits

import tilegemm
from tilegemm import onednn
from tilegemm.formats import bf16_dtype
from tilegemm.kernels import onednn as epi
from tilegemm.reference import onednn as ref

BF = bf16_dtype()


# -- the float32 operations outside the tiles, against exact rational arithmetic ---------------


def _ieee32(q: Fraction) -> np.float32:
    """Round an exact rational to binary32: nearest even, gradual underflow, overflow to inf."""
    if q == 0:
        return np.float32(0.0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -126)  # below 2^-126 the grid stays 2^-149
    unit = Fraction(2) ** (e - 23)
    n, rem = divmod(a, unit)
    n = int(n)
    if rem > unit / 2 or (rem == unit / 2 and n % 2 == 1):
        n += 1
    r = n * unit
    if r >= Fraction(2) ** 128:
        return np.float32(sign * np.inf)
    return np.float32(sign * float(r))


def _bits32(rng, n):
    """binary32 patterns aimed at the edges: denormals, the smallest normals, huge values."""
    kind = rng.integers(0, 4, n)
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    mant = rng.integers(0, 1 << 23, n).astype(np.uint32)
    exp = np.select(
        [kind == 0, kind == 1, kind == 2],
        [np.zeros(n), rng.integers(1, 4, n), rng.integers(250, 255, n)],
        rng.integers(100, 150, n),
    ).astype(np.uint32)
    return sign | (exp << 23) | mant


def test_vaddps_against_exact_rationals():
    rng = np.random.default_rng(141)
    x = _bits32(rng, 3000)
    y = _bits32(rng, 3000)
    # cancellations that end in the denormal range and on ties
    y[:600] = (x[:600] ^ np.uint32(1 << 31)) + rng.integers(-3, 4, 600).astype(np.uint32)
    got = epi.vaddps(x, y).view(np.float32)
    xf, yf = x.view(np.float32), y.view(np.float32)
    want = np.array([_ieee32(Fraction(float(a)) + Fraction(float(b))) for a, b in zip(xf, yf)], np.float32)
    assert_bits(got, want, "vaddps vs exact rationals")
    with np.errstate(over="ignore"):
        assert_bits(got, xf + yf, "vaddps vs numpy's IEEE addition")  # numpy keeps denormals here


def test_fast_vaddps_is_the_exact_one():
    """``tilegemm.onednn.vaddps`` (the host's addition where operands and result are normal,
    the bit-level rule elsewhere) against ``kernels.onednn.vaddps`` on every kind of lane: random
    bit patterns (NaNs of every payload, infinities, denormals), cancellations into the denormal
    range and to zero, tiny and huge sums, broadcasting, and ``out`` aliasing an operand."""
    rng = np.random.default_rng(2024)
    n = 1 << 18
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y[::3] = x[::3] ^ np.uint32(0x80000001)  # nearly opposite: results down to denormals
    y[1::7] = x[1::7] ^ np.uint32(0x80000000)  # exactly opposite: +0
    y[2::11] = (x[2::11] & np.uint32(0x807FFFFF)) | np.uint32(0x00800000)  # a smallest-exponent addend
    x[3::13] = 0x7F7FFFFF  # overflow to infinity
    y[3::13] = 0x7F7FFFFF
    x[4::17] = 0
    y[5::19] = 0x80000000
    want = epi.vaddps(x, y)
    for _ in range(2):  # the second call reuses freed memory: no lane may keep a stale value
        assert_bits(onednn.vaddps(x, y).view(np.float32), want.view(np.float32), "fast vaddps")
    a = x.copy()
    assert onednn.vaddps(a, y, out=a) is a
    assert_bits(a.view(np.float32), want.view(np.float32), "fast vaddps into x")
    b = y.copy()
    onednn.vaddps(x, b, out=b)
    assert_bits(b.view(np.float32), want.view(np.float32), "fast vaddps into y")
    m = x.reshape(512, 512)
    row = y[:512]
    assert_bits(onednn.vaddps(m, row).view(np.float32), epi.vaddps(m, row).view(np.float32), "broadcast")
    assert_bits(onednn.vaddps(np.uint32(0), m).view(np.float32), epi.vaddps(np.uint32(0), m).view(np.float32), "0 + C")
    col = y[:512].reshape(512, 1)
    assert_bits(onednn.vaddps(col, m).view(np.float32), epi.vaddps(col, m).view(np.float32), "column")
    expanded = np.broadcast_to(row, (512, 512))  # a bias expanded over the rows: read as one row
    assert_bits(onednn.vaddps(m, expanded).view(np.float32), epi.vaddps(m, row).view(np.float32), "expanded")
    lanes = x.reshape(-1, 2, 16).copy()  # short rows, many to a task; into the operand
    want = epi.vaddps(lanes, y[:32].reshape(2, 16))
    assert onednn.vaddps(lanes, y[:32].reshape(2, 16), out=lanes) is lanes
    assert_bits(lanes.view(np.float32), want.view(np.float32), "short rows into x")


def test_a_tree_of_additions_in_one_pass_is_the_additions_one_by_one():
    """``onednn.add_tree`` against ``kernels.onednn.vaddps`` applied addition by addition: ATen's
    64-accumulator tree and a lopsided one (a chain, operands both ways round), on lanes of every
    kind (NaNs of every payload, infinities, denormals, cancellations to zero and into the
    denormals), over a width that ends mid-strip."""
    from tilegemm.onednn import chains
    from tilegemm.onednn.float32 import add_tree

    rng = np.random.default_rng(77)
    leaves = rng.integers(0, 2**32, (64, 3, 345), dtype=np.uint64).astype(np.uint32)
    leaves[1::2, :, ::5] = leaves[::2, :, ::5] ^ np.uint32(0x80000000)  # exactly opposite pairs
    leaves[1::2, :, 1::5] = leaves[::2, :, 1::5] ^ np.uint32(0x80000001)  # nearly: denormal sums
    leaves[:, :, 2::5] &= np.uint32(0x807FFFFF)  # denormals and zeros
    leaves[:, :, 3::5] = (leaves[:, :, 3::5] & np.uint32(0x81FFFFFF)) | np.uint32(0x3E000000)  # ordinary
    chain = [(0, 1)] + [(64 + i, i + 2) if i % 2 else (i + 2, 64 + i) for i in range(62)]
    tree = chains._transa_tree()
    assert tree.shape == (63, 2) and sorted(tree.ravel().tolist()) == list(range(126))  # each value once
    for name, ops in (("ATen's tree", tree), ("a chain", np.array(chain))):
        vals = list(leaves)
        for x, y in ops:
            vals.append(epi.vaddps(vals[x], vals[y]))
        got = add_tree(leaves, ops)
        assert got.shape == (3, 345)
        assert_bits(got.view(np.float32), vals[-1].view(np.float32), name)
    # the tree is ATen's order: registers r[i] += r[i + step], then the lanes as _lanes8 adds them
    R = leaves.reshape(8, 8, 3, 345)
    for step in (4, 2, 1):
        R = epi.vaddps(R[:step], R[step : 2 * step])
    want = chains._lanes8([R[0, lane] for lane in range(8)])
    assert_bits(add_tree(leaves, tree).view(np.float32), want.view(np.float32), "the transa order")
    for bad in ([(0, 64)], [(0, -1)], np.zeros((0, 2))):
        with pytest.raises(ValueError, match="addition|ops"):
            add_tree(leaves, bad)
    with pytest.raises(ValueError, match="float32"):  # values, not bits: never cast to integers
        add_tree(leaves.view(np.float32), tree)


@pytest.mark.skipif(not __import__("fpenv").X86, reason="MXCSR's FTZ and DAZ are x86's")
def test_the_fast_additions_ignore_the_callers_ftz_and_daz():
    """The host's addition serves only lanes that FTZ and DAZ cannot touch: with both set on the
    calling thread (one thread, so the additions run there), ``vaddps`` and ``add_tree`` give
    the same bits as without, on operands and sums in the denormal range."""
    import numba
    from fpenv import DAZ, FTZ, get_mxcsr, mxcsr_flags

    from tilegemm.onednn.float32 import add_tree

    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, (64, 999), dtype=np.uint64).astype(np.uint32)
    x[:, ::3] &= np.uint32(0x80FFFFFF)  # exponents 0 and 1: denormals and the smallest normals
    x[1::2, 1::3] = x[::2, 1::3] ^ np.uint32(0x80000001)  # sums into the denormals
    tree = np.array([(2 * i, 2 * i + 1) for i in range(32)] + [(64 + i, 65 + i) for i in range(0, 62, 2)])
    want = epi.vaddps(x[::2], x[1::2]), add_tree(x, tree)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with mxcsr_flags(FTZ | DAZ):
            assert get_mxcsr() & (FTZ | DAZ) == FTZ | DAZ
            got = onednn.vaddps(x[::2], x[1::2]), add_tree(x, tree)
    finally:
        numba.set_num_threads(threads)
    for g, w, what in zip(got, want, ("vaddps", "add_tree")):
        assert_bits(g.view(np.float32), w.view(np.float32), f"{what} under FTZ|DAZ")


def test_the_float32_additions_vectorize():
    """The sums and the exactness check of the float32 additions (``kernels.onednn._add_row``,
    which ``vaddps`` and ``add_tree`` run on every row) compile to vector code for this host:
    written as one loop that both stored the sums and folded the check, they compiled to scalar
    adds (vaddss) on znver3."""
    import re

    from numba import njit

    @njit
    def row(x, y, r, w):
        epi._add_row(x, y, r, w)

    a = np.zeros(64, np.uint32)
    row(a, a, a.copy(), 64)
    ir = row.inspect_llvm(row.signatures[0])
    assert re.search(r"fadd (?:[a-z]+ )*<\d+ x float>", ir), "the sums are scalar"
    assert "llvm.vector.reduce.or" in ir, "the check is scalar"


def test_vfmadd_against_exact_rationals():
    rng = np.random.default_rng(1412)
    x = _bits32(rng, 2000)
    y = _bits32(rng, 2000)
    z = _bits32(rng, 2000)
    xf, yf, zf = (v.view(np.float32) for v in (x, y, z))
    got = epi.vfmadd(x, y, z).view(np.float32)
    finite = np.isfinite(xf) & np.isfinite(yf) & np.isfinite(zf)
    want = []
    for a, b, c, ok in zip(xf, yf, zf, finite):
        if not ok:
            want.append(np.float32(np.float64(a) * np.float64(b) + np.float64(c)))
            continue
        q = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        if q == 0:  # the sign of an exact zero: negative only if both addends are negative zeros
            neg = (math.copysign(1, a) * math.copysign(1, b) < 0) and (a * b == 0) and math.copysign(1, c) < 0
            want.append(np.float32(-0.0 if neg else 0.0))
        else:
            want.append(_ieee32(q))
    with np.errstate(all="ignore"):
        assert_bits(got, np.array(want, np.float32), "vfmadd vs exact rationals")


def test_special_values():
    f = np.float32
    add = lambda a, b: epi.vaddps(f(a).view(np.uint32), f(b).view(np.uint32)).view(np.float32)  # noqa: E731
    assert math.copysign(1, add(-0.0, -0.0)) < 0 and math.copysign(1, add(-0.0, 0.0)) > 0
    assert np.isnan(add(np.inf, -np.inf)) and add(np.inf, 1) == np.inf
    assert add(f(3.0e38), f(3.0e38)) == np.inf
    tiny = np.uint32(1).view(np.float32)  # 2^-149 stays: no flush to zero
    assert add(tiny, tiny).view(np.uint32) == 2
    assert add(f(2.0**-126), -f(2.0**-126 + 2.0**-149)).view(np.uint32) == 0x80000001


def test_vcvtneps2bf16():
    rng = np.random.default_rng(14)
    x = rng.integers(0, 1 << 32, 200000, dtype=np.uint64).astype(np.uint32)
    got = epi.vcvtneps2bf16(x)
    xf = x.view(np.float32)
    normal = np.isfinite(xf) & ((x & 0x7F800000) != 0)
    want = xf[normal].astype(BF).view(np.uint16)  # ml_dtypes rounds to nearest even
    assert_bits(got[normal].view(BF), want.view(BF), "normal inputs")
    den = (x & 0x7F800000) == 0
    assert (got[den] == ((x[den] >> 16) & 0x8000)).all()  # zeros and denormals: a zero of their sign
    nan = np.isnan(xf)
    assert (got[nan] & 0x7FC0 == 0x7FC0).all() and (got[nan] >> 15 == x[nan] >> 31).all()
    assert epi.vcvtneps2bf16(np.float32(3.4e38).view(np.uint32)) == 0x7F80  # rounds up to infinity
    assert epi.vcvtneps2bf16(np.uint32(0x3F808000)) == 0x3F80  # a tie goes to even
    assert epi.vcvtneps2bf16(np.uint32(0x3F818000)) == 0x3F82


# -- plans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "M,K,N,threads,blocks",
    [
        # K block sizes that reproduce the recorded bits, found on the silicon by a search over
        # uniform block sizes (the table): one block size each.
        (256, 4096, 512, 1, [(0, 1024), (1024, 2048), (2048, 3072), (3072, 4096)]),
        (128, 1536, 256, 2, [(0, 768), (768, 1536)]),
        (8, 4096, 4096, 2, [(0, 2048), (2048, 4096)]),
        (32, 11008, 4096, 1, [(k, min(k + 480, 11008)) for k in range(0, 11008, 480)]),
    ],
)
def test_plans_reproduce_the_silicon_block_sizes(M, K, N, threads, blocks):
    p = onednn.plan(M, K, N, onednn_threads=threads)
    assert p.chains() == blocks


def test_the_case_no_uniform_block_size_matched():
    # 256 x 4096 x 512 on two threads: K split between the threads, blocks of 1024 inside each,
    # so the sum is (b0 + b1) + (b2 + b3), which no left-to-right fold of uniform blocks gives.
    p = onednn.plan(256, 4096, 512, onednn_threads=2)
    assert p.reduce and p.blocking.nthr_k == 2
    assert [[c[0] for c in g] for g in p.groups] == [[(0, 1024), (1024, 2048)], [(2048, 3072), (3072, 4096)]]


def test_plan_shape_rules():
    for M, K, N, thr, bt, ps, batch in [
        (1, 8192, 1024, 1, False, False, 1),
        (7, 300, 64, 2, True, True, 1),
        (33, 777, 65, 2, False, False, 2),
        (200, 2560, 200, 2, True, True, 1),
        (32, 1024, 64, 4, True, False, 1),
        (64, 4096, 64, 3, False, False, 1),
    ]:
        p = onednn.plan(M, K, N, batch=batch, onednn_threads=thr, b_transposed=bt, post_sum=ps)
        ranges = [r for g in p.groups for call in g for r in call]
        assert ranges[0][0] == 0 and ranges[-1][1] == K
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # in K order, no gaps
        assert all(call[0][0] % 32 == 0 for g in p.groups for call in g)  # calls start on a tile step
        assert p.reduce == (len(p.groups) > 1)
        assert M == 1 or p.blocking.heuristic != "micro"
        assert str(p).startswith(f"oneDNN plan for {batch} x {M} x {K} x {N}")


def test_m1_uses_the_micro_heuristic():
    # A 1 x K source also matches the transposed tag, which rules the macro heuristic out.
    assert onednn.plan(1, 8192, 1024, onednn_threads=1).blocking.heuristic == "micro"
    assert onednn.plan(2, 8192, 1024, onednn_threads=1).blocking.heuristic != "micro"


def test_host_parameters():
    rec = tilegemm.instructions.PROFILES["onednn"].parameters
    assert dataclasses.asdict(onednn.RECORDING_HOST) == dict(rec)
    assert onednn.plan(256, 4096, 512).onednn_threads == rec["cores"]
    one_core = onednn.Host(cores=1)
    assert onednn.plan(256, 4096, 512, host=one_core).chains() == onednn.plan(256, 4096, 512, onednn_threads=1).chains()
    # the caches enter: a 32 KiB L1 blocks the same product differently
    assert onednn.plan(32, 11008, 4096, onednn_threads=1, host=onednn.Host(l1d=32 * 1024)).blocking.K_blk != 480
    for bad, msg in [
        (dict(l1d=0), "l1d"),
        (dict(cores=1.5), "cores"),
        (dict(isa="avx512_core_fp16"), "not modelled"),
        (dict(l2=1000), "sets"),
    ]:
        with pytest.raises(ValueError, match=msg):
            onednn.Host(**bad)
    with pytest.raises(ValueError, match="no room"):
        onednn.plan(64, 4096, 64, host=onednn.Host(l1d=8192))
    for bad in [dict(M=0), dict(K=-1), dict(onednn_threads=0)]:
        args = dict(M=4, K=64, N=8) | bad
        with pytest.raises(ValueError, match="positive integer"):
            onednn.plan(args.pop("M"), args.pop("K"), args.pop("N"), **args)


# -- a worked example: the blocks decide the bits ----------------------------------------------


def _worked_operands():
    """One row, K = 128, B all ones (64 columns: a product above PyTorch's 16^3 threshold, which
    oneDNN computes). The tile step sums are s1 = 2^24 + 2^16 (two even products of the first
    step), s2 = s3 = s4 = 1 (one product in each later step)."""
    a = np.zeros((1, 128), np.float32)
    a[0, 0], a[0, 2], a[0, 32], a[0, 64], a[0, 96] = 2.0**24, 2.0**16, 1, 1, 1
    return a, np.ones((128, 64), np.float32)


@pytest.mark.parametrize(
    "groups,reduce,expected",
    [
        # One chain: s1 + 1 is a tie at 2^24 and stays s1 each time (to even); s1 = 2^24 + 2^16
        # is itself a bf16 tie, and rounds to even: 2^24 (0x4B80).
        (((((0, 128),),),), False, 0x4B80),
        # Two calls: (s1 + 1 -> s1) + (1 + 1 = 2) = 2^24 + 2^16 + 2, above the bf16 tie: 0x4B81.
        (((((0, 64),), ((64, 128),)),), False, 0x4B81),
        # The same two blocks on two K threads, reduced: the same sum.
        (((((0, 64),),), (((64, 128),),)), True, 0x4B81),
        # Blocks of one tile step each: 0 + s is s, so this is the single chain again.
        ((tuple(((k, k + 32),) for k in range(0, 128, 32)),), False, 0x4B80),
    ],
)
def test_worked_example(groups, reduce, expected):
    a, b = _worked_operands()
    p = dataclasses.replace(onednn.plan(1, 128, 64, onednn_threads=1), groups=groups, reduce=reduce)
    assert int(ref.compute(a, b, p).view(np.uint16)[0, 0]) == expected
    assert int(onednn.compute(a, b, p).view(np.uint16)[0, 0]) == expected


# -- the reference and the fast path agree -----------------------------------------------------

SMALL_PLANS = [
    # (M, K, N, threads, b_transposed, host L1, batch): single chains, sequential blocks, K split
    # over 2, 3 and 4 threads, transposed weights, the micro heuristic, a batch
    (2, 1536, 32, 4, False, 48 * 1024, 1),
    (16, 1536, 32, 2, True, 16 * 1024, 1),
    (32, 256, 64, 4, True, 16 * 1024, 1),
    (32, 1024, 64, 4, False, 16 * 1024, 1),
    (32, 768, 64, 4, True, 48 * 1024, 1),
    (1, 700, 40, 2, False, 48 * 1024, 1),
    (33, 777, 65, 2, False, 48 * 1024, 1),
    (7, 300, 64, 1, False, 48 * 1024, 3),
]


@pytest.mark.parametrize("M,K,N,threads,bt,l1,batch", SMALL_PLANS)
def test_reference_and_fast_path_agree(M, K, N, threads, bt, l1, batch):
    rng = np.random.default_rng([M, K, N, threads])
    host = onednn.Host(l1d=l1)
    a = rng.standard_normal((batch, M, K) if batch > 1 else (M, K)).astype(np.float32)
    b = rng.standard_normal((batch, K, N) if batch > 1 else (K, N)).astype(np.float32)
    a[..., ::7] *= 2.0**20  # large and small partial sums, so that the order shows
    c = rng.standard_normal(N).astype(np.float32) * 64
    kw = dict(onednn_threads=threads, b_transposed=bt, host=host)
    for cc, beta in ((None, 1.0), (c, 1.0), (c, 0.5)):
        want = ref.matmul(a, b, c=cc, beta=beta, **kw)
        got = onednn.matmul(a, b, c=cc, beta=beta, **kw)
        assert_bits(got, want, f"{M}x{K}x{N} threads={threads} beta={beta}")


def test_tilegemm_matmul_and_reference_take_the_profile():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 1536)).astype(np.float32)
    b = rng.standard_normal((1536, 32)).astype(np.float32)
    want = onednn.matmul(a, b, onednn_threads=2)
    assert_bits(tilegemm.matmul(a, b, "bf16", isa="onednn", onednn_threads=2), want, "tilegemm.matmul")
    assert_bits(tilegemm.reference.matmul(a, b, "bf16", isa="onednn", onednn_threads=2), want, "reference")
    packed = tilegemm.pack(b, "bf16", isa="onednn")
    assert_bits(tilegemm.matmul(a, packed, onednn_threads=2), want, "packed for onednn")
    assert_bits(onednn.matmul(a, tilegemm.pack(b), onednn_threads=2), want, "packed for amx")
    for tiling, threads in (("1x1", 1), ("2x3", 2), ("auto", None)):
        assert_bits(onednn.matmul(a, b, onednn_threads=2, tiling=tiling, threads=threads), want, tiling)
    # accumulate=True is addmm: out holds the bf16 input of the sum post-op
    c = rng.standard_normal((16, 32)).astype(BF)
    out = c.copy()
    tilegemm.matmul(a, b, "bf16", isa="onednn", onednn_threads=2, out=out, accumulate=True)
    assert_bits(out, onednn.matmul(a, b, c=c, onednn_threads=2), "accumulate")
    assert_bits(out, ref.matmul(a, b, c=c, onednn_threads=2), "accumulate vs reference")


def test_linear_and_batches():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 96)).astype(np.float32)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    y = onednn.linear(x, w, bias)
    assert y.shape == (2, 5, 40) and y.dtype == BF
    assert_bits(y, ref.matmul(x.reshape(10, 96), w.T, c=bias, b_transposed=True).reshape(2, 5, 40), "linear")
    assert_bits(onednn.linear(x[0, 0], w, bias), y[0, :1].reshape(40), "1-D input")
    # a batched B: bmm over the broadcast batch
    b = rng.standard_normal((3, 96, 24)).astype(np.float32)
    z = onednn.matmul(x[:1], b)
    assert z.shape == (3, 5, 24)
    assert_bits(z, ref.matmul(np.broadcast_to(x[:1], (3, 5, 96)), b), "bmm")


def test_weights_prepared_once_give_the_same_bits():
    """``pack_weights(b, plan.kernel)`` in place of ``b``: the bits of ``b`` itself, on a brgemm
    host and a gemm:jit one, for every kind of piece the gemm:jit threads make (runs of rows and
    one-row gemv pieces), a transposed ``b``, a batched one, K tails and a NaN in ``b``."""
    rng = np.random.default_rng(12)
    for host, kernel in (("recording-amx", "brgemm"), ("recording-zen4-avx512", "gemm")):
        # (5 rows of 33 on 3 threads: runs of rows and one-row pieces)
        for M, K, N, bt, threads in ((5, 385, 33, True, 3), (16, 130, 24, False, 1), (9, 1537, 17, True, 2)):
            assert onednn.plan(M, K, N, b_transposed=bt, onednn_threads=threads, host=host).kernel == kernel
            a = rng.standard_normal((M, K)).astype(np.float32)
            w = rng.standard_normal((N, K)).astype(np.float32)
            b = w.T if bt else np.ascontiguousarray(w.T)
            kw = dict(b_transposed=bt, onednn_threads=threads, host=host)
            prepared = onednn.pack_weights(b, kernel)
            assert_bits(onednn.matmul(a, prepared, **kw), onednn.matmul(a, b, **kw), f"{host} {M}x{K}x{N}")
            w[N // 2, K // 3] = np.nan
            kw_nan = onednn.pack_weights(b, kernel)
            assert_bits(onednn.matmul(a, kw_nan, **kw), onednn.matmul(a, b, **kw), f"{host} NaN")
        b3 = rng.standard_normal((2, 96, 20)).astype(np.float32)
        a3 = rng.standard_normal((2, 6, 96)).astype(np.float32)
        assert onednn.plan(6, 96, 20, batch=2, host=host).kernel == kernel
        prepared = onednn.pack_weights(b3, kernel)
        assert_bits(onednn.matmul(a3, prepared, host=host), onednn.matmul(a3, b3, host=host), f"{host} batched")
    b = np.ones((130, 24), np.float32)
    with pytest.raises(ValueError, match="prepared for the gemm:jit kernel"):
        onednn.matmul(np.ones((16, 130), np.float32), onednn.pack_weights(b, "gemm"), host="recording-amx")
    with pytest.raises(ValueError, match="not 'transa'"):
        onednn.pack_weights(b, "transa")


def test_bad_input_is_refused():
    a = np.ones((4, 8), np.float32)
    b = np.ones((8, 3), np.float32)
    with pytest.raises(ValueError, match="inner dimensions"):
        onednn.matmul(a, np.ones((7, 3)))
    with pytest.raises(ValueError, match="matrix-vector"):
        onednn.matmul(a, np.ones(8))
    with pytest.raises(ValueError, match="broadcast to the result shape"):
        onednn.matmul(a, b, c=np.ones(4))
    with pytest.raises(ValueError, match="onednn_threads"):
        onednn.matmul(a, b, onednn_threads=0)
    with pytest.raises(ValueError, match="beta"):
        onednn.matmul(a, b, c=np.ones(3), beta=float("nan"))
    with pytest.raises(TypeError, match="host"):
        onednn.matmul(a, b, host=2)
    with pytest.raises(ValueError, match="unknown host 'spr'.*sapphire-rapids-56"):
        onednn.matmul(a, b, host="spr")
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        tilegemm.matmul(a, b, isa="onednn", alpha=2.0)
    with pytest.raises(ValueError, match="isa='onednn' does not take dtype 'fp16'"):
        tilegemm.matmul(a, b, "fp16", isa="onednn")
    out = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="bfloat16"):
        onednn.matmul(a, b, out=out)
    assert (out == 0).all()
    with pytest.raises(TypeError, match="dtype complex128"):
        onednn.matmul(a.astype(complex), b)
    p = onednn.plan(4, 16, 3)
    with pytest.raises(ValueError, match="K = 8"):
        onednn.compute(a, b, p)


# -- the recorded silicon results --------------------------------------------------------------

CHEAP = [c for c in silicon.cases() if (2 if c["op"] == "bmm" else 1) * c["M"] * c["K"] * c["N"] <= 2**23]


@pytest.mark.parametrize("case", CHEAP, ids=[c["key"] for c in CHEAP])
def test_silicon_reference(case):
    """The readable reference on every recorded case of up to 2^23 multiply-adds (the whole set
    runs through tilegemm.torch.emulate in test_torch.py, on the fast path)."""
    A, B, bias = silicon.inputs(case)
    A, B = A.view(BF), B.view(BF)
    thr = case["threads"]
    if case["op"] == "linear_bias":
        want = ref.matmul(A, B.T, c=bias.view(BF), b_transposed=True, onednn_threads=thr)
        got = onednn.linear(A, B, bias.view(BF), onednn_threads=thr)
    else:
        want = ref.matmul(A, B, onednn_threads=thr)
        got = onednn.matmul(A, B, onednn_threads=thr)
    recorded = silicon.recording()[1][case["key"]].view(BF)
    assert_bits(want, recorded, f"{case['key']} reference")
    assert_bits(got, recorded, f"{case['key']} fast path")


def test_silicon_generator_is_the_recording_generator():
    for kind in ("normal", "wide", "relu"):
        for salt in (0, 1003, 2**31 + 5):
            assert (silicon.operand((300, 37), salt, kind) == silicon.operand_numpy((300, 37), salt, kind)).all()


def _variant(case, change):
    """Outputs of a recorded case under a plan with one rule changed, and the recording."""
    A, B, _ = silicon.inputs(case)
    p = onednn.plan(case["M"], case["K"], case["N"], onednn_threads=case["threads"])
    got = onednn.compute(A.view(BF), B.view(BF), change(p))
    return got, silicon.recording()[1][case["key"]].view(BF)


def _case(key):
    return next(c for c in silicon.cases() if c["key"] == key)


@pytest.mark.parametrize(
    "key,change",
    [
        # one chain over the whole K instead of the blocks
        ("c015", lambda p: dataclasses.replace(p, groups=(((((0, p.K),),),)), reduce=False)),
        # the blocks added in reverse order
        ("c041", lambda p: dataclasses.replace(p, groups=tuple(g[::-1] for g in p.groups))),
        # the parallel-K groups folded left to right as one sequence, without the reduction
        ("c085", lambda p: dataclasses.replace(p, groups=(sum(p.groups, ()),), reduce=False)),
    ],
    ids=["one-chain", "reverse-order", "flat-fold"],
)
def test_the_recordings_pin_the_rules(key, change):
    """Each rule matters: the recorded bits reject the plan with that rule changed."""
    got, recorded = _variant(_case(key), change)
    assert tilegemm.bitdiff(got, recorded).count > 0
    same, _ = _variant(_case(key), lambda p: p)
    assert_bits(same, recorded, key)


def test_plans_are_remembered():
    # a model repeats its shapes: the blocking search runs once per problem
    p, q = onednn.plan(64, 4096, 256, onednn_threads=2), onednn.plan(64, 4096, 256, onednn_threads=2)
    assert p.blocking is q.blocking
    assert onednn.plan(64, 4096, 256, onednn_threads=1).blocking is not p.blocking


def test_tile_width_along_k():
    """``rd_block``: how many K elements one TDPBF16PS of a brgemm kernel takes (worked from
    ``brgemm_utils.cpp`` 648-666)."""
    assert onednn.rd_block(300, False, False) == 30  # ten instructions, none of 32
    assert onednn.rd_block(48, False, False) == 24
    assert onednn.rd_block(12, False, False) == 12
    assert onednn.rd_block(31, False, False) == 32  # an odd tail, zero-padded in A's buffer
    assert onednn.rd_block(300, True, False) == 32  # the kernel may read past K: full tiles
    assert onednn.rd_block(7, True, False) == 8
    assert onednn.rd_block(300, False, True) == 32  # A copied by the kernel
    assert onednn.rd_block(1024, False, False) == 32


def test_the_amx_7x300_case():
    """A second AMX recording (other data than tests/data's) parts from a single 32-wide chain
    over K = 300 in one output: (4, 47) is 0x429f on the silicon, while nine tiles of 32 and one of
    12 give float32 0x429f8002, which rounds to 0x42a0. oneDNN's kernel takes K in ten
    instructions of 30 (the small-dims heuristic leaves extendable_k off: 300 splits into ten even
    tiles), which gives the silicon's bits."""
    A = silicon.operand((7, 300), 555009, "normal").view(BF)
    B = silicon.operand((300, 64), 555010, "normal").view(BF)
    p = onednn.plan(7, 300, 64, onednn_threads=1, host="recording-amx")
    assert p.groups == ((tuple((k, k + 30) for k in range(0, 300, 30)),),)
    assert p.describe().endswith("0:300 (TDPBF16PS over 30 K elements)")
    for got in (onednn.matmul(A, B, onednn_threads=1), ref.matmul(A, B, onednn_threads=1)):
        assert got.view(np.uint16)[4, 47] == 0x429F
    # the plan it replaces: one range, chained in 32s
    old = onednn.compute(A, B, dataclasses.replace(p, groups=((((0, 300),),),)))
    assert old.view(np.uint16)[4, 47] == 0x42A0

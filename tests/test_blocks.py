"""The blocked kernels' per-block paths: each block takes the cheapest path its exponents allow, a
value that needs the exact path costs only its own block, and every path returns the reference's
bits (docs/semantics.md, "How the kernels stay exact"). Every test runs on each engine this host
has for the fast body (FMA; VDPBF16PS with AVX512_BF16)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits, operands

import tilegemm
from tilegemm import dispatch, plan
from tilegemm.kernels import blocked, targets

FLOAT_CASES = [("amx", "bf16"), ("amx", "fp16"), ("avx512", "bf16")]
#: The fast body's engines on this host: FMA everywhere, VDPBF16PS where the CPU has AVX512_BF16.
ENGINES_HERE = ("fma",) + targets.engines()


@pytest.fixture(autouse=True, params=ENGINES_HERE)
def engine(request):
    """Each test on each engine of this host (``plan.forced_engine``)."""
    with plan.forced_engine(request.param):
        yield request.param


def _blocked(isa, dtype):
    k = dispatch.lookup(isa, dtype, "2x2")
    if k.blocked is None:
        pytest.skip(f"{k.name}: this target runs the superblock loop (no row in the per-target table)")
    return k


def _run(a, b, dtype, isa, out=None, accumulate=False):
    with plan.recording() as r:
        got = tilegemm.matmul(a, b, dtype, isa=isa, out=out, accumulate=accumulate)
    return got, r.counts()


def _slow(counts):
    return counts["flag"] + counts["exact"] + counts["fast, flushed add"]


def test_path_names_are_the_kernels():
    assert plan.PATH_NAMES == blocked.PATHS


@pytest.mark.parametrize("isa,dtype", FLOAT_CASES)
def test_random_data_runs_fast_everywhere(isa, dtype):
    kern = _blocked(isa, dtype)
    a, b = operands(dtype, (70, 320), (320, 90), np.random.default_rng(1), isa)
    got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), f"{isa} {dtype}")
    assert counts["fast"] > 0 and _slow(counts) == 0, counts
    # A short last K step: TDPBF16PS/TDPFP16PS run its padding pairs (zeros change no fast
    # chain); VDPBF16PS runs exactly its pairs, on the flag body.
    a, b = a[:, :301], b[:301]
    got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), f"{isa} {dtype} K = 301")
    groups = -(-70 // kern.body.rows) * -(-90 // kern.body.cols)
    assert counts["flag"] == (groups if kern.family.name == "vdp" else 0), counts


@pytest.mark.parametrize("isa", ["amx", "avx512"])
def test_one_tiny_value_costs_only_its_block(isa):
    """A[5, 40] = 2^-120 puts that row group's products on a grid far below 2^-126: its chunk
    runs the flag path, and later chunks of that row group flush their final adds (TDPBF16PS) or
    stay on the flag path (VDPBF16PS, whose chain runs through C); every other block is fast."""
    kern = _blocked(isa, "bf16")
    rng = np.random.default_rng(2)
    a, b = operands("bf16", (64, 4 * 32 * 8), (4 * 32 * 8, 64), rng, isa)
    a[5, 40] = 2.0**-120
    got, counts = _run(a, b, "bf16", isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, "bf16", isa=isa), "tiny A value")
    body, kc = kern.body, plan.k_chunk(kern, 64)
    panels = -(-64 // body.cols)
    steps = 4 * 8 if kern.family.name == "vdp" else kc  # a row group's steps on the flag path
    assert 0 < counts["flag"] <= steps * panels, counts
    total = sum(v for k, v in counts.items() if k != "exact redo")
    assert counts["fast"] >= 0.6 * total, counts


@pytest.mark.parametrize("isa,dtype", FLOAT_CASES)
def test_huge_values_overflow_inside_the_fused_multiply_add(isa, dtype):
    """Products that overflow meet infinite sums: fma32(2^100, 2^100, -inf) is -inf, not NaN.
    llvm.fma is fused, so such blocks stay on the fast path."""
    _blocked(isa, dtype)
    rng = np.random.default_rng(3)
    a, b = operands(dtype, (40, 96), (96, 33), rng, isa)
    big = 2.0**100 if dtype == "bf16" else 60000.0
    a[:, 2] = -np.inf
    a[:, 4] = big
    b[4, :] = big
    b[7, 5] = np.inf
    got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), "overflow")
    assert _slow(counts) == 0, counts


@pytest.mark.parametrize("isa", ["amx", "avx512"])
def test_results_at_the_normal_boundary_are_redone_exactly(isa):
    """Column 0 of B makes each row's chain 2^-126, then adds a product of -1.5 * 2^-151: the
    exact value lies where IEEE gradual underflow rounds to 2^-126 but tininess after rounding
    flushes to zero. The flag body flags it and the step is redone by the scalar code; a chain
    that reaches 2^-126 - 2^-152 keeps 2^-126."""
    kern = _blocked(isa, "bf16")
    rng = np.random.default_rng(4)
    m, k = 24, 70
    a, b = operands("bf16", (m, k), (k, 20), rng, isa)
    b[:, 0] = 0.0
    a[:, :6] = 0.0
    p = 2.0**-63
    a[:, 0], b[0, 0] = p, p  # even chain of pair 0: 2^-126
    a[:, 2], b[2, 0] = -1.5 * 2.0**-75, 2.0**-76  # even chain of pair 1: 2^-126 - 1.5 * 2^-151
    a[1::2, 2] = -(2.0**-76)  # odd rows: 2^-126 - 2^-152, which rounds up and stays
    got, counts = _run(a, b, "bf16", isa)
    want = tilegemm.reference.matmul(a, b, "bf16", isa=isa)
    assert_bits(got, want, "2^-126 boundary")
    assert counts["exact redo"] > 0, counts
    if kern.family.name == "f32pairs":  # the hand-worked values (docs/semantics.md, section 10)
        col = want[:, 0]
        assert np.all(col[::2] == tilegemm.reference.matmul(a[::2, 6:], b[6:, :1], "bf16")[:, 0])
        assert np.all(col[1::2] == tilegemm.reference.matmul(a[1::2, 6:], b[6:, :1], "bf16")[:, 0] + 2.0**-126)


@pytest.mark.parametrize("isa", ["amx", "avx512"])
def test_a_bf16_denormal_in_b_sends_its_block_to_the_exact_path(isa):
    _blocked(isa, "bf16")
    rng = np.random.default_rng(5)
    a, b = operands("bf16", (30, 100), (100, 40), rng, isa)
    b[33, 17] = 2.0**-130  # a BF16 denormal: read as zero
    b[34, 17] = -(2.0**-133)
    got, counts = _run(a, b, "bf16", isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, "bf16", isa=isa), "denormal B")
    assert counts["exact"] > 0 and counts["fast"] > 0, counts


@pytest.mark.parametrize("isa,dtype", FLOAT_CASES)
def test_a_callers_tiny_c_makes_the_final_adds_flush(isa, dtype):
    _blocked(isa, dtype)
    rng = np.random.default_rng(6)
    a, b = operands(dtype, (20, 64), (64, 18), rng, isa)
    c = (rng.standard_normal((20, 18)) * 2.0**-110).astype(np.float32)
    c[0, 0] = 2.0**-126
    out = c.copy()
    got, counts = _run(a, b, dtype, isa, out=out, accumulate=True)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, c=c, isa=isa), "tiny C")
    assert counts["fast"] == 0, counts  # every block starts on C's fine grid


@pytest.mark.parametrize("isa,dtype", FLOAT_CASES)
def test_all_tiny_operands_on_the_vector_exact_path(isa, dtype):
    _blocked(isa, dtype)
    rng = np.random.default_rng(7)
    a, b = operands(dtype, (50, 97), (97, 35), rng, isa)
    scale = 2.0**-64 if dtype == "bf16" else 1.0
    a, b = a * scale, b * scale
    if dtype == "fp16":  # FP16 products are never finer than 2^-68: always fast
        a[3, :5] = 2.0**-24
    got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), "all tiny")
    if dtype == "fp16":
        assert _slow(counts) == 0, counts
    else:
        assert counts["flag"] > 0 and counts["fast"] == 0, counts


@pytest.mark.parametrize("path", plan.BLOCK_PATHS)
@pytest.mark.parametrize("isa,dtype", FLOAT_CASES)
def test_forced_paths_on_specials(isa, dtype, path):
    _blocked(isa, dtype)
    rng = np.random.default_rng(8)
    # No NaN input: a call with one runs the exact path (plan.make_plan), so the forced paths
    # meet only the NaNs that Inf * 0 and Inf - Inf make here, all of them the default NaN.
    pool = np.array([0.0, -0.0, np.inf, -np.inf, 2.0**-130, 2.0**-70, 2.0**-63, 2.0**100, -1.0, 3.0e38])
    a = rng.choice(pool, (21, 71))
    b = rng.choice(pool[1:4], (71, 19))  # signed zeros and infinities: -0 chains, inf - inf
    b[::3] = rng.choice(pool[5:], (24, 19))
    with plan.forced_path(path):
        got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), f"forced {path}")
    assert counts["fast"] == 0 and counts[path] > 0, counts
    b[5, 5] = 2.0**-130  # a BF16 denormal in B: its blocks run the exact path, forced or not
    with plan.forced_path(path):
        got, counts = _run(a, b, dtype, isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, dtype, isa=isa), f"forced {path}, denormal B")


def test_forced_path_is_checked_and_restored():
    with pytest.raises(ValueError, match="path 'slow' is not one of 'flag', 'exact'"):
        with plan.forced_path("slow"):
            pass
    with plan.forced_path("flag"):
        assert plan.FORCED_PATH == "flag"
    assert plan.FORCED_PATH is None


def _adversarial(m, k, n, rng):
    """BF16 operands that are hard on a fast body, in rows and columns of their own so that most
    blocks stay fast: signed zeros, exact cancellation within one chain (``a[k + 2] = a[k]``,
    ``b[k + 2] = -b[k]``), products that overflow, infinities (Inf * 0: the default NaN; Inf - Inf),
    values spread over 2^+-40, and, in a few row groups and columns, what the fast path must not
    take: a BF16 denormal in B, products finer than 2^-126, results near 2^-126."""
    a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-40, 40, (m, k))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-40, 40, (k, n))).astype(np.float32)
    a[:, 5::7] = -0.0
    b[3::11, :] = -0.0
    a[1, :] = -a[0, :]  # rows whose products cancel against row 0's
    a[2, 2::4] = a[2, 0::4][: a[2, 2::4].size]  # e chain: a[4j + 2] = a[4j] ...
    b[2::4, 0] = -b[0::4, 0][: b[2::4, 0].size]  # ... times b[4j + 2] = -b[4j]: cancels in pairs
    a[3, :] = 3.0e38  # overflow: +-Inf chains that meet each other (Inf - Inf)
    a[4, k // 2] = np.inf
    b[k // 2, 1] = 0.0  # Inf * 0
    b[:, 2] = 2.0**-70  # with row 6's 2^-70: products of 2^-140, the flag path
    a[6, :] = 2.0**-70
    a[7, : min(k, 9)] = 2.0**-63  # chains near 2^-126 in column 2
    if k > 3:
        b[k - 2, n - 1] = 2.0**-130  # a BF16 denormal in B: its blocks run the exact path
    return a, b


@pytest.mark.parametrize("k", [1, 2, 31, 33, 64, 97, 600])
@pytest.mark.parametrize("tiling", dispatch.TILINGS)
@pytest.mark.parametrize("isa", ["amx", "avx512"])
def test_adversarial_operands_on_every_tiling(isa, tiling, k, engine):
    """TDPBF16PS and VDPBF16PS on every tiling and K tail, on this engine, give the reference's
    bits on the operands of :func:`_adversarial`, and (on an engine beyond FMA) the FMA engine's
    bits, from zero and accumulated into a C holding -0."""
    kern = _blocked(isa, "bf16")
    rng = np.random.default_rng([k, len(tiling)])
    a, b = _adversarial(70, k, 45, rng)
    with plan.recording() as r:
        got = tilegemm.matmul(a, b, "bf16", tiling, isa=isa)
    assert_bits(got, tilegemm.reference.matmul(a, b, "bf16", isa=isa), f"{kern.name}, K = {k}")
    counts = r.counts()
    assert counts["fast"] > 0 or (kern.family.name == "vdp" and k < 32), counts  # VDPBF16PS: whole steps
    out = (rng.standard_normal((70, 45)) * 4).astype(np.float32)
    out[::3, ::2] = -0.0  # C's -0 meets chains from +0, or (VDPBF16PS) is the chain's start
    c = out.copy()
    tilegemm.matmul(a, b, "bf16", tiling, isa=isa, out=out, accumulate=True)
    want = tilegemm.reference.matmul(a, b, "bf16", c=c, isa=isa)
    assert_bits(out, want, f"{kern.name}, accumulate, K = {k}")
    if engine != "fma":
        with plan.forced_engine("fma"):
            fma = tilegemm.matmul(a, b, "bf16", tiling, isa=isa)
        assert_bits(got, fma, f"{kern.name} against the FMA engine, K = {k}")


def test_the_engine_is_chosen_named_and_forced():
    """The host's fastest engine runs by default and is named in the kernel's name; a forced
    engine is checked and restored; an engine the host lacks is refused with what it needs."""
    kern = dispatch.lookup("amx", "bf16", "2x2")
    if kern.blocked is None:
        pytest.skip(f"{kern.name}: this target runs the superblock loop (no row in the per-target table)")
    best = targets.engines()[0] if targets.engines() else "fma"
    with plan.forced_engine(None):
        assert kern.engine == best and (f"-f32pairs-{best}-" in kern.name) == (best != "fma"), kern.name
        assert dispatch.lookup("amx", "fp16", "2x2").engine == "fma"  # VDPBF16PS is BF16's only
        with plan.forced_engine("fma"):
            assert kern.engine == "fma" and kern.blocked_name == "gemm_pairs_bf16"
        assert kern.engine == best
    # a matrix-vector product runs on FMA (rewriting B for one row costs more than VDPBF16PS saves)
    a, b = operands("bf16", (2, 64), (64, 40), np.random.default_rng(10))
    with plan.forced_engine(None), plan.recording() as r:
        tilegemm.matmul(a[:1], b, "bf16")
        tilegemm.matmul(a, b, "bf16")
        name = kern.name
    fma_name = name.replace(f"-{best}-", "-")
    assert r.describe().startswith(f"{fma_name}, {name}" if best != "fma" else name), r.describe()
    with pytest.raises(ValueError, match="engine 'avx' is not one of 'fma', 'vdpbf16ps'"):
        with plan.forced_engine("avx"):
            pass
    if "vdpbf16ps" not in targets.engines():
        with pytest.raises(ValueError, match=r"engine 'vdpbf16ps' needs .*\+avx512bf16"):
            with plan.forced_engine("vdpbf16ps"):
                pass


@pytest.mark.parametrize("signed", [False, True])
def test_int8_a_packing_passes(signed):
    """The INT8 drivers' A packing: rows ``m0:m1`` of one matrix from column ``a_k0 + k0``, as bytes
    xor 0x80 (VPDPBUSD) or widened to int16 (VPMADDWD, sign- or zero-extended), zero past ``kn``
    and past the last row; the other INT8 driver runs the words on hosts without VNNI, so both
    are checked here against NumPy."""
    rng = np.random.default_rng(9)
    A = rng.integers(0, 256, (2, 30, 300)).astype(np.uint8)
    ai, a_k0, m0, m1, nrows, k0, kn, width, lda = 1, 7, 5, 21, 24, 64, 150, 192, 200
    buf = np.full(nrows * lda, 99, np.uint8)
    blocked.pack_a_bytes(A, ai, a_k0, m0, m1, nrows, k0, kn, width, lda, buf, 0x80 if signed else 0)
    words = np.full(nrows * lda, 99, np.int16)
    blocked.pack_a_words(A, ai, a_k0, m0, m1, nrows, k0, kn, width, lda, words, signed)
    src = A[ai, m0:m1, a_k0 + k0 : a_k0 + k0 + kn]
    want_b = np.zeros((nrows, width), np.uint8)
    want_b[: m1 - m0, :kn] = src ^ (0x80 if signed else 0)
    want_w = np.zeros((nrows, width), np.int16)
    want_w[: m1 - m0, :kn] = src.view(np.int8) if signed else src
    assert np.array_equal(buf.reshape(nrows, lda)[:, :width], want_b)
    assert np.array_equal(words.reshape(nrows, lda)[:, :width], want_w)
    assert np.all(buf.reshape(nrows, lda)[:, width:] == 99)  # nothing past the row's width

"""The kernel tester: every dtype x tiling x thread count x float path against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES
from conftest import ALL_DTYPES, FLOAT_DTYPES, SEED_TILINGS, assert_bits, instr, operands, reference_stack
from numba.core import types

import tilegemm
from tilegemm import convert, dispatch, plan
from tilegemm.kernels import gemm


@pytest.mark.parametrize("tiling", SEED_TILINGS)
def test_avx512_differs_from_amx_where_the_sdm_says(tiling, path):
    # a = [1, 2^24, 1, -2^24], b = 1: VDPBF16PS (odd first) 2^24, +1 ties to 2^24, -2^24, +1 -> 1;
    # TDPBF16PS: e = 1 + 1 = 2, o = 2^24 - 2^24 = 0 -> 2. Also the -0 rule: a caller's C = -0 with
    # products of -0 stays -0 through VDPBF16PS unless an odd K pads a +0 pair in.
    a = np.array([[1.0, 2.0**24, 1.0, -(2.0**24)]])
    b = np.ones((4, 1))
    assert tilegemm.matmul(a, b, tiling=tiling, isa="avx512")[0, 0] == 1.0
    assert tilegemm.matmul(a, b, tiling=tiling)[0, 0] == 2.0
    for k, sign in [(2, True), (3, False), (34, True), (35, False)]:
        out = np.full((1, 1), -0.0, np.float32)
        tilegemm.matmul(np.full((1, k), -0.0), np.ones((k, 1)), tiling=tiling, isa="avx512", out=out, accumulate=True)
        assert out[0, 0] == 0 and np.signbit(out[0, 0]) == sign, k


@pytest.mark.parametrize("path_", ["fast", "exact"])
def test_avx512_batched_accumulate_and_specials(path_, monkeypatch):
    if path_ == "exact":
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args: False)
        monkeypatch.setattr(plan, "FORCED_PATH", "exact")
    rng = np.random.default_rng(12)
    a, b = operands("bf16", (2, 33, 47), (47, 18), rng)
    c = rng.standard_normal((2, 33, 18)).astype(np.float32)
    want = np.stack([tilegemm.reference.matmul(a[i], b, "bf16", c=c[i], isa="avx512") for i in range(2)])
    out = c.copy()
    tilegemm.matmul(a, b, out=out, accumulate=True, isa="avx512")
    assert_bits(out, want, "avx512 accumulate")
    pool = np.array([0.0, -0.0, np.inf, np.nan, 2.0**-130, 2.0**-70, 2.0**100, -1.0, 3.0e38])
    a = rng.choice(pool, (20, 37))
    b = rng.choice(pool, (37, 19))
    assert_bits(tilegemm.matmul(a, b, isa="avx512"), tilegemm.reference.matmul(a, b, isa="avx512"), "avx512 specials")


def test_avx512_takes_bf16_only():
    with pytest.raises(ValueError, match="isa='avx512' does not take dtype 'fp16'; it takes bf16"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "fp16", isa="avx512")
    with pytest.raises(ValueError, match="unknown isa 'sse'"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), isa="sse")


def test_random_normal_data_takes_the_fast_path():
    a, b = operands("bf16", (33, 65), (65, 17), np.random.default_rng(0))
    with plan.recording() as r:
        tilegemm.matmul(a, b)
    counts = r.counts()
    assert counts["fast"] > 0 and sum(counts.values()) == counts["fast"], counts
    with plan.recording() as r:
        tilegemm.matmul(a * 2.0**-60, b * 2.0**-60)  # products near 2^-126: the proof fails
    counts = r.counts()
    assert counts["fast"] == 0 and counts["flag"] > 0, counts


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("tiling", SEED_TILINGS)
def test_batched_broadcast_and_1d(dtype, tiling):
    rng = np.random.default_rng(5)
    a, b = operands(dtype, (3, 1, 17, 40), (2, 40, 33), rng)
    assert_bits(tilegemm.matmul(a, b, dtype, tiling), reference_stack(a, b, dtype), "batched")
    v, w = operands(dtype, (40,), (40,), rng)
    mat = b[0]
    assert tilegemm.matmul(v, mat, dtype, tiling).shape == np.matmul(v, mat).shape
    assert_bits(tilegemm.matmul(v, mat, dtype, tiling), reference_stack(v[None], mat, dtype)[0], "vec @ mat")
    assert_bits(
        tilegemm.matmul(a[0, 0], w, dtype, tiling), reference_stack(a[0, 0], w[:, None], dtype)[:, 0], "mat @ vec"
    )
    assert tilegemm.matmul(v, w, dtype, tiling).shape == ()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_strided_transposed_readonly_inputs_untouched(dtype):
    rng = np.random.default_rng(9)
    a, b = operands(dtype, (70, 90), (90, 50), rng)
    at = np.asfortranarray(a)
    bs = np.zeros((180, 100), b.dtype)
    bs[::2, ::2] = b
    bv = bs[::2, ::2]
    at.flags.writeable = False
    copies = at.copy(), bs.copy()
    want = tilegemm.reference.matmul(a, b, dtype)
    assert_bits(tilegemm.matmul(at, bv, dtype), want, "strided")
    assert_bits(tilegemm.matmul(a.T.copy().T, b.T.copy().T, dtype), want, "transposed views")
    assert np.array_equal(at, copies[0]) and np.array_equal(bs, copies[1])


def test_the_inputs_layout_and_writeability_compile_nothing_of_their_own(monkeypatch):
    """Numba compiles a function once per argument type, and an array's layout and writeability
    and an integer's signedness are part of its type. The A packer takes every A one way, and the
    superblock loop hands its job index on as int64 (a prange index, as the loop once was, is
    uint64 in the parallel body Numba builds): each would otherwise compile twice."""
    monkeypatch.setattr(dispatch.Kernel, "blocked_name", property(lambda self: None))
    rng = np.random.default_rng(5)
    a, b = (x.astype(np.float32) for x in operands("fp16", (40, 48), (48, 36), rng))
    want = tilegemm.reference.matmul(a, b, "fp16")
    readonly = a.copy()
    readonly.flags.writeable = False
    for name, x in (("C order", a), ("Fortran order", np.asfortranarray(a)), ("read-only", readonly)):
        assert_bits(tilegemm.matmul(x, b, "fp16"), want, name)
    assert convert.pack_a_float.signatures
    for sig in convert.pack_a_float.signatures:
        assert sig[2].layout == "C" and not sig[2].mutable, sig
    # The superblock is compiled with the loop that calls it, which may have come from the cache:
    # its specializations are those of this process and those the cache holds for this source.
    index = gemm._superblock._cache._cache_file._load_index()
    superblocks = set(gemm._superblock.signatures) | {key[0] for key in index}
    assert superblocks, "no superblock was compiled or cached"
    for sig in superblocks:
        assert types.uint64 not in sig, sig


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("tiling", SEED_TILINGS)
def test_accumulate_chain_and_prepacked(dtype, tiling, path):
    rng = np.random.default_rng(11)
    a1, b1 = operands(dtype, (33, 47), (47, 18), rng)
    a2, b2 = operands(dtype, (33, 20), (20, 18), rng)
    want = tilegemm.reference.matmul(a1, b1, dtype)
    want = tilegemm.reference.matmul(a2, b2, dtype, c=want)
    out = np.empty((33, 18), instr(dtype).acc)
    tilegemm.matmul(a1, tilegemm.pack(b1, dtype), tiling=tiling, out=out)
    r = tilegemm.matmul(a2, tilegemm.pack(b2, dtype), tiling=tiling, out=out, accumulate=True)
    assert r is out
    assert_bits(out, want, "accumulate chain")


@pytest.mark.parametrize("name,dtype,a,b,c,expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("tiling", SEED_TILINGS)
def test_hand_worked_cases(name, dtype, a, b, c, expected, tiling, path):
    fmt = instr(dtype)
    a = np.array(a)
    b = np.array(b)
    want = np.array(expected, fmt.acc)
    if c is None:
        got = tilegemm.matmul(a, b, dtype, tiling)
    else:
        got = np.array(c, fmt.acc)
        tilegemm.matmul(a, b, dtype, tiling, out=got, accumulate=True)
    assert_bits(got, want, name)
    # The same case embedded in a larger GEMM, at a tile edge, with neighbours around it.
    big_a = np.zeros((20, a.shape[1]), a.dtype)
    big_b = np.zeros((b.shape[0], 35), b.dtype)
    big_a[17] = a[0]
    big_b[:, 33] = b[:, 0]
    got = tilegemm.matmul(big_a, big_b, dtype, tiling)
    assert_bits(
        got[17:18, 33:34],
        np.array(expected, fmt.acc) if c is None else tilegemm.reference.matmul(a, b, dtype),
        name + " (embedded)",
    )


def test_k_zero_and_empty():
    a = np.ones((3, 0))
    b = np.ones((0, 4))
    assert_bits(tilegemm.matmul(a, b), np.zeros((3, 4), np.float32), "K = 0")
    out = np.full((3, 4), np.float32(2.0**-130))  # a denormal: K = 0 runs no instruction
    tilegemm.matmul(a, b, out=out, accumulate=True)
    assert np.all(out == np.float32(2.0**-130))
    assert tilegemm.matmul(np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)
    assert tilegemm.matmul(np.ones((2, 5), np.int8), np.ones((5, 0), np.int8), "int8").shape == (2, 0)


def test_int32_wraps_over_long_k():
    k = 131_200  # 131,200 * 16,384 > 2^31
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 1), -128, np.int8)
    total = k * 16384
    want = np.array([[(total + 2**31) % 2**32 - 2**31]], np.int32)
    assert_bits(tilegemm.matmul(a, b, "int8"), want, "wrap")
    assert_bits(tilegemm.reference.matmul(a, b, "int8"), want, "reference wrap")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_values_random_mix(dtype, path):
    """Random mixes of +-0, denormals, inf, NaN, huge and tiny values against the reference."""
    rng = np.random.default_rng(3)
    pool = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            1.0,
            -1.0,
            2.0**-130,
            -(2.0**-133),
            2.0**-70,
            -(2.0**-64),
            2.0**100,
            -(2.0**120),
            3.0e38,
            6.0e4,
            2.0**-24,
            2.0**-20,
        ]
    )
    fmt = instr(dtype)

    def draw(shape, scale=1.0):  # complex dtypes: both parts from the pool
        x = rng.choice(pool, shape) * scale
        if fmt.lanes == 2:
            x = x.astype(complex)
            x.imag = rng.choice(pool, shape) * scale
        return x

    for m, n, k in [(17, 18, 33), (5, 33, 64), (32, 32, 7)]:
        a = draw((m, k), rng.choice([1.0, 1.5, 0.75], (m, k)))
        b = draw((k, n))
        c = draw((m, n)).astype(fmt.acc)
        # The pool's huge values become the 8-bit floats' NaN and infinity codes, which are the
        # specials this test is about (the default, fp8_overflow="error", would refuse them).
        want = tilegemm.reference.matmul(a, b, dtype, c=c, fp8_overflow="nan")
        for tiling in SEED_TILINGS + ("2x3", "6x1"):
            out = c.copy()
            tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, fp8_overflow="nan")
            assert_bits(out, want, f"{dtype} {tiling} specials {m},{n},{k}")


def test_auto_and_infeasible_tilings():
    rng = np.random.default_rng(13)
    for m, n in [(8, 200), (200, 8), (100, 100)]:
        a, b = operands("bf16", (m, 40), (40, n), rng)
        assert_bits(tilegemm.matmul(a, b, tiling="auto"), tilegemm.matmul(a, b, tiling="2x2"), f"auto {m}x{n}")
    assert tilegemm.plan.auto_tiling(8, 2048) == "1x6"
    assert tilegemm.plan.auto_tiling(2048, 8) == "6x1"
    assert tilegemm.plan.auto_tiling(2048, 2048) in ("2x3", "3x2")
    with pytest.raises(
        ValueError,
        match=r"tiling '3x3' is infeasible: 9 accumulator tiles \+ 1 A tile \+ 1 B "
        r"tile = 11 > 8 tile registers",
    ):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), tiling="3x3")
    with pytest.raises(ValueError, match=r"tiling '2x4' is infeasible: 8 accumulator tiles"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), tiling="2x4")
    assert len(tilegemm.TILINGS) == 14
    assert all(int(t[0]) * int(t[2]) + 2 <= 8 for t in tilegemm.TILINGS)


def test_bench_sweep_covers_complex_and_fp8(monkeypatch):
    """The sweep's rows for the new dtypes: exact, measured against their numpy yardstick."""
    from tilegemm import benchmark

    monkeypatch.setattr(benchmark, "NOISY_SPREAD", float("inf"))  # this test is not about the noise

    names = {(c.group, c.name) for c in benchmark.contenders(("2x2",), ("cfp16", "hf8"))}
    # TDPHF8PS has a native program (it runs where the CPU has AMX-FP8); complex FP16 pairs do not.
    assert names == {
        ("CFP16", "tilegemm 2x2"),
        ("CFP16", "numpy complex64"),
        ("HF8", "tilegemm 2x2"),
        ("HF8", "tilegemm ace mxfp8_e4m3"),  # ACE's outer products on the same E4M3 values
        ("HF8", "native 2x2"),
        ("HF8", "numpy float32"),
    }
    rows = benchmark.sweep((32,), ("CFP16", "HF8"), threads=1, budget=5.0, tilings=("2x2",))
    by = {(r.group, r.contender): r for r in rows}
    assert by[("CFP16", "tilegemm 2x2")].differs == 0 and by[("HF8", "tilegemm 2x2")].differs == 0
    assert by[("CFP16", "numpy complex64")].efficiency == 1.0 and by[("CFP16", "tilegemm 2x2")].efficiency > 0
    assert by[("HF8", "numpy float32")].max_ulp is not None
    assert by[("HF8", "tilegemm ace mxfp8_e4m3")].efficiency > 0


def test_bench_marks_a_group_noisy_when_its_baseline_is_unsteady(monkeypatch):
    """The yardstick is timed twice; when the second timing is 1.5x the first, or the machine's
    FMA peak says the yardstick crawled, the group's rows say ``noisy`` and carry no ratio."""
    from tilegemm import benchmark, perf

    calls = {"numpy": 0}

    def timed(run, reps, warmup=5):
        cells = [c.cell_contents for c in run.__closure__ or ()]
        yard = any(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in cells)
        if run.__qualname__.startswith("_numpy_as") and yard:  # numpy float32, the yardstick
            calls["numpy"] += 1
            return 1e-3 * (1.5 if calls["numpy"] % 2 == 0 else 1.0)  # every second timing slower
        return 1e-3

    monkeypatch.setattr(benchmark, "median_time", timed)
    monkeypatch.setattr(perf, "fma_peak_gflops", lambda: None)
    rows = benchmark.sweep((32,), ("BF16",), threads=1, budget=5.0, tilings=("2x2",))
    live = [r for r in rows if not r.skipped]
    assert live and all(r.noisy and r.efficiency is None for r in live), [(r.contender, r.noisy) for r in live]
    assert "differ by 50% (over 20%)" in live[0].noisy
    table = benchmark.format_table(rows)
    row = next(ln for ln in table.splitlines() if "tilegemm 2x2" in ln)
    assert row.split()[5] == "noisy" and "noisy: the yardstick's timings differ by 50%" in row

    # Steady timings: ratios; a yardstick below half the FMA peak at n >= 256: noisy again.
    assert benchmark.baseline_noise([100.0, 110.0], None) is None
    assert benchmark.baseline_noise([100.0, 125.0], None).startswith("the yardstick's timings differ by 25%")
    assert benchmark.baseline_noise([2.1, 2.1], 58.7) == (
        "the yardstick ran at 2.1 GFLOP/s, below half of one core's FMA peak (58.7)"
    )
    monkeypatch.setattr(benchmark, "median_time", lambda run, reps, warmup=5: 1e-3)
    steady = benchmark.sweep((32,), ("BF16",), threads=1, budget=5.0, tilings=("2x2",))
    assert all(r.noisy is None and r.efficiency == 1.0 for r in steady if not r.skipped)


def test_bench_writes_outside_the_working_tree_by_default(monkeypatch, tmp_path):
    from tilegemm import benchmark

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert benchmark.default_out() == str(tmp_path / "cache" / "tilegemm" / "bench-results")
    rows = [benchmark.Measurement("BF16", "numpy float32", 32, 1, gflops=1.0, efficiency=1.0, differs=0.0)]
    paths = benchmark.write_outputs(rows, benchmark.machine_info(1), benchmark.default_out())
    assert paths and all(p.startswith(str(tmp_path / "cache")) for p in paths)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cache"]

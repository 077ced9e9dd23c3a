"""explain, tilegemm.testing and the CLI verb: the right cause on constructed cases of each kind,
reproducers that reproduce, messages that name the element and the cause, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits

import tilegemm
from tilegemm import benchmark, instructions, reference
from tilegemm.__main__ import main
from tilegemm.testing import assert_matches, saturation_risk


def _check_reproducer(e):
    """The reproducer parts the two kernels by itself, with the values it claims."""
    r = e.reproducer
    assert r is not None
    dtypes = (r.dtype, r.dtype) if isinstance(r.dtype, str) else r.dtype
    for isa, dtype, want in zip(r.isa, dtypes, r.results):
        acc = instructions.resolve(isa, dtype)[2].acc
        if r.c is None:
            got = tilegemm.matmul(r.a, r.b, dtype, isa=isa)
        else:
            got = tilegemm.matmul(r.a, r.b, dtype, isa=isa, out=np.array([[r.c]], acc), accumulate=True)
        assert tilegemm.bitdiff(got, np.array([[want]], acc)).identical, (isa, got, want)
    assert r.results[0] != r.results[1]
    code = r.code()
    scope: dict = {}
    exec(code, scope)  # the printed code runs
    return r


def test_one_saturating_pair():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 9, (3, 300)).astype(np.uint8)  # small activations: nothing saturates ...
    b = rng.integers(-128, 128, (300, 2)).astype(np.int8)
    a[1, 100:102], b[100:102, 1] = 255, 127  # ... except this pair of output [1, 1]
    b[100:102, 0] = [1, -1]
    e = tilegemm.explain(a, b, "u8s8", isa=("amx", "avx2"))
    assert e.diff.count == 1 and e.index == (1, 1)
    v = e.verdict
    assert (v.cause, v.k, v.isa) == ("int16 saturation", 100, "avx2")
    assert "255 * 127 + 255 * 127 = 64770" in v.detail
    r = _check_reproducer(e)
    assert r.k_index == (100, 101) and r.results == (64770, 32767) and r.c is None
    text = str(e)
    assert "int16 saturation" in text and "<int16 saturation>" in e.replay() and "amx" in e.replay()


def test_one_saturating_pair_with_signed_activations():
    a = np.zeros((1, 70), np.int8)
    b = np.zeros((70, 1), np.int8)
    a[0, 40:42], b[40:42, 0] = 127, 127  # shifted to 255, 255: the pair clips
    e = tilegemm.explain(a, b, "int8", isa=("avx2", "avx512_vnni"))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("int16 saturation", 40, "avx2")
    assert e.values == (32767 - 128 * 254, 2 * 127 * 127)
    _check_reproducer(e)


def test_int32_saturation_against_wrapping():
    a = np.full((1, 12), 255, np.uint8)
    b = np.full((12, 1), 127, np.int8)
    c = np.int32([[2**31 - 300000]])
    e = tilegemm.explain(a, b, "u8s8", isa=("avx512_vnni", "avx512_vnni_sat"), c=c)
    # quads add 129540 each: 2^31 - 300000 + 3 * 129540 leaves int32 in the third quad (k = 8)
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("int32 saturation", 8, "avx512_vnni_sat")
    assert e.values[1] == 2**31 - 1
    r = _check_reproducer(e)
    assert r.k_index == (8, 9, 10, 11) and r.c == 2**31 - 300000 + 2 * 129540


def test_one_denormal():
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (2, 64)).astype(np.float64)  # small integers: every sum exact
    b = rng.integers(-4, 5, (64, 2)).astype(np.float64)
    a[0, 37], b[37, 0] = 2.0**-133, 2.0**120  # a BF16 denormal whose product is 2^-13
    e = tilegemm.explain(a, b, "bf16", isa=("amx", "fp32_fma"))
    assert e.diff.count == 1 and e.index == (0, 0)
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("denormal flush (DAZ)", 37, "amx")
    r = _check_reproducer(e)
    assert 37 in r.k_index


def test_one_tiny_result():
    e = tilegemm.explain(np.array([[2.0**-70, 1.0]]), np.array([[2.0**-70], [0.0]]), "bf16", isa=("amx", "fp32_fma"))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("denormal flush (FTZ)", 0, "amx")
    assert e.values == (0.0, 2.0**-140)
    _check_reproducer(e)


def test_order_only_difference():
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (1, 96)).astype(np.float64)
    b = rng.integers(-3, 4, (96, 1)).astype(np.float64)
    a[0, 40:44], b[40:44, 0] = [1.0, 1.0, 1.0, 1.0], [2.0**24, 1.0, -(2.0**24), 1.0]
    e = tilegemm.explain(a, b, "bf16", isa=("amx", "fp32_fma"))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("rounding order", 32, None)
    r = _check_reproducer(e)
    assert set(r.k_index) <= set(range(32, 64)) and len(r.k_index) <= 4


def test_fp16_overflow():
    e = tilegemm.explain(np.ones((1, 80)), np.full((80, 1), 1024.0), "fp16", isa=("fp32_fma", "avx512_fp16"))
    # 1024 * 63 = 64512 is exact in binary16; the 64th element makes 65536: infinity
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("fp16 accumulator overflow", 63, "avx512_fp16")
    assert e.values == (81920.0, np.inf)
    _check_reproducer(e)


def test_fp16_rounding_and_the_distribution():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 300)), rng.standard_normal((300, 5))
    e = tilegemm.explain(a, b, "fp16", isa=("fp32_fma", "avx512_fp16"))
    assert e.verdict.cause == "fp16 accumulator rounding" and e.verdict.isa == "avx512_fp16"
    assert e.diff.count == 30
    assert "mean |error| against a binary64 product" in str(e)


def test_bf16_amx_against_one_chain_at_k_1024():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((16, 1024)), rng.standard_normal((1024, 16))
    e = tilegemm.explain(a, b, isa=("amx", "fp32_fma"), reproduce=False)
    assert e.dtype == "bf16" and e.diff.share > 0.5 and e.verdict.cause == "rounding order"
    err = e.distribution["mean |error| against a binary64 product (C = 0)"]
    amx, one = (float(part.split()[1]) for part in err.split(", "))
    assert one > amx  # one binary32 chain over K errs more than AMX's short chains


# -- a dtype per side: TF32 against BF16 and against one FP32 FMA chain ---------------------------


def test_tf32_against_bf16_parts_at_the_first_element_they_read_differently():
    # 2 reads as 2 in both; 1 + 2^-9 keeps its bit in TF32 (10 fraction bits) and rounds to 1 in
    # BF16 (7): the sums are 3 + 2^-9 (0x40402000) and 3 (0x40400000).
    a, b = np.float32([[2.0, 1 + 2.0**-9]]), np.float32([[1.0], [1.0]])
    e = tilegemm.explain(a, b, ("tf32", "bf16"), isa=("amx", "amx"))
    assert e.dtype == ("tf32", "bf16")
    assert_bits(np.float32(e.values), np.array([0x40402000, 0x40400000], np.uint32).view(np.float32))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("input conversion", 1, None)
    assert "1.001953125" in e.verdict.detail and "in tf32" in e.verdict.detail
    r = _check_reproducer(e)
    assert r.k_index == (1,) and r.dtype == ("tf32", "bf16")
    assert "tilegemm.matmul(a, b, 'tf32', isa='amx')" in r.code()
    assert "dtype=('tf32', 'bf16')" in str(e)


def _ones_after_a_big_one():
    """K = 32: 2^24 at k = 0, ones at k = 16 .. 31. One chain loses each 1 to a tie (2^24 + 1
    rounds to 2^24), TMMULTF32PS's second instruction sums the ones apart (16) and adds 2^24 + 16
    exactly, TDPBF16PS's even chain loses its 8 ones and its odd chain keeps 8 (2^24 + 8)."""
    a = np.zeros((1, 32), np.float32)
    b = np.zeros((32, 1), np.float32)
    a[0, 0], b[0, 0] = 2.0**24, 1.0
    a[0, 16:], b[16:, 0] = 1.0, 1.0
    return a, b


@pytest.mark.parametrize(
    "isa,want,k",
    [
        (("amx", "fp32_fma"), 0x4B800000, 16),  # both hold 2^24 after K 16: they part in 16 .. 31
        (("amx", "amx"), 0x4B800004, 0),  # TDPBF16PS's one instruction covers K 0 .. 31
    ],
)
def test_tf32_rounding_order_against_one_chain_and_bf16_pairs(isa, want, k):
    a, b = _ones_after_a_big_one()  # every value is a BF16 and a TF32: both read the same
    e = tilegemm.explain(a, b, ("tf32", "bf16"), isa=isa)
    assert_bits(np.float32(e.values), np.array([0x4B800008, want], np.uint32).view(np.float32))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("rounding order", k, None)
    assert "one FP32 chain of 16 FMAs per instruction" in e.verdict.detail
    r = _check_reproducer(e)
    assert set(r.k_index) <= set(range(k, 32))


def test_tf32_flushes_a_tiny_product_one_fp32_chain_keeps():
    a, b = np.float32([[2.0**-70, 1.0]]), np.float32([[2.0**-70], [0.0]])
    e = tilegemm.explain(a, b, ("tf32", "bf16"), isa=("amx", "fp32_fma"))
    assert (e.verdict.cause, e.verdict.k, e.verdict.isa) == ("denormal flush (FTZ)", 0, "amx")
    assert_bits(np.float32(e.values), np.array([0, 0x200], np.uint32).view(np.float32))  # +0, 2^-140
    _check_reproducer(e)


def test_tf32_reference_trace_ends_at_the_kernels_bits():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((1, 40)).astype(np.float32), rng.standard_normal((40, 1)).astype(np.float32)
    for c in (None, np.float32([[2.0**-130]])):
        t = reference.trace.Trace()
        want = reference.matmul(a, b, "tf32", c=c)
        reference.matmul(a, b, "tf32", c=c, trace=t)
        assert_bits(np.float32([[t.result]]), want)
        assert [s.k for s in t.states] == [0, 16, 32, 40]
        assert len([op for op in t.ops if op.what == "fma32"]) == 40
    first_add = next(op for op in t.ops if op.what.startswith("add32"))
    assert "DAZ" in first_add.events  # the denormal C read as zero by the first instruction's add


def test_identical_profiles_and_chosen_index():
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (3, 100)).astype(np.uint8)
    b = rng.integers(-128, 128, (100, 3)).astype(np.int8)
    e = tilegemm.explain(a, b, "u8s8", isa=("avx_vnni", "avx512_vnni"))
    assert e.diff.count == 0 and e.verdict is None and "same instructions" in str(e)
    e = tilegemm.explain(a, b, "u8s8", isa=("amx", "avx2"), index=(2, 1))
    assert e.index == (2, 1)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"isa": "avx2"}, r"isa must be a pair of profiles"),
        ({"isa": ("amx", "sse")}, r"unknown isa 'sse'"),
        ({"isa": ("amx", "avx2"), "dtype": "bf16"}, r"isa='avx2' does not take dtype 'bf16'"),
        ({"isa": ("amx", "avx2"), "index": (9, 0)}, r"index \(9, 0\) is outside the 2 x 2 result"),
        ({"isa": ("avx2", "fp32_fma")}, r"take no dtype in common"),
        ({"isa": ("amx", "avx2"), "c": np.ones((3, 3))}, r"c has shape \(3, 3\)"),
    ],
)
def test_explain_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tilegemm.explain(np.ones((2, 4), np.uint8), np.ones((4, 2), np.int8), **kwargs)


def test_explain_refuses_a_c_its_profiles_cannot_hold():
    with pytest.raises(ValueError, match=r"c\[0, 0\] = .* is not exactly a float16 value"):
        tilegemm.explain(np.ones((1, 2)), np.ones((2, 1)), "fp16", isa=("fp32_fma", "avx512_fp16"), c=[[1 + 2**-20]])


@pytest.mark.parametrize(
    "dtype,isa,c,err,match",
    [
        ("u8s8", "avx2", np.arange(4), ValueError, r"c has shape \(4,\), but the result has shape \(2, 2\)"),
        ("u8s8", "avx2", np.ones((1, 2)), ValueError, r"c has shape \(1, 2\)"),
        ("u8s8", "avx2", np.full((2, 2), 3.7), ValueError, r"c\[0, 0\] = 3.7 is not exactly a int32 value"),
        ("u8s8", "amx", np.full((2, 2), 2**40), ValueError, r"= 1099511627776 is not exactly a int32 value"),
        ("bf16", "amx", np.full((2, 2), 1 + 1j), ValueError, r"= \(1\+1j\) is not exactly a float32 value"),
        ("fp16", "avx512_fp16", np.full((2, 2), 1 + 2**-20, np.float32), ValueError, r"not exactly a float16 value"),
        ("bf16", "amx", np.full((2, 2), "x"), TypeError, r"c has dtype <U1, which holds no numbers"),
    ],
)
def test_a_start_c_is_never_cast_or_reshaped(dtype, isa, c, err, match):
    """reference.matmul's ``c`` and assert_matches' ``c`` take a C of the result's shape whose
    values the accumulator holds exactly, as matmul's ``out`` and explain's ``c`` do; they used
    to reshape a C of the right size and truncate, wrap or drop what the cast lost."""
    a, b = np.ones((2, 4), np.uint8), np.ones((4, 2), np.int8)
    if dtype in ("bf16", "fp16"):
        a, b = a.astype(np.float32), b.astype(np.float32)
    acc = instructions.resolve(isa, dtype)[2].acc
    with pytest.raises(err, match=match):
        reference.matmul(a, b, dtype, isa=isa, c=c)
    if c.shape == (2, 2):  # a wrong shape is matmul's to refuse, with its own message
        with pytest.raises(err, match=match):
            assert_matches(np.zeros((2, 2), acc), a, b, dtype, isa=isa, c=c)
    ok = np.full((2, 2), 3)  # int64 values that the accumulator holds: taken as they are
    assert_bits(
        reference.matmul(a, b, dtype, isa=isa, c=ok), reference.matmul(a, b, dtype, isa=isa, c=ok.astype(acc)), ""
    )
    assert_matches(reference.matmul(a, b, dtype, isa=isa, c=ok), a, b, dtype, isa=isa, c=ok)


# -- tilegemm.testing ---------------------------------------------------------------------------


def test_assert_matches_names_the_element_and_the_cause():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (5, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 4)).astype(np.int8)
    got = tilegemm.matmul(a, b, "u8s8", isa="avx2")
    assert_matches(got, a, b, "u8s8", isa="avx2")
    with pytest.raises(AssertionError) as info:
        assert_matches(got, a, b, "u8s8", isa="avx512_vnni")
    msg = str(info.value)
    first = tilegemm.bitdiff(got, tilegemm.matmul(a, b, "u8s8", isa="avx512_vnni")).first
    assert f"first at {list(first)}: got {got[first]}" in msg
    assert "isa='avx2' (every element)" in msg and "int16 saturation at K index" in msg


def test_assert_matches_on_floats_batches_and_strangers():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((2, 6, 100)), rng.standard_normal((100, 3))
    one_chain = tilegemm.matmul(a, b, "bf16", isa="fp32_fma")
    with pytest.raises(AssertionError, match=r"(?s)isa='fp32_fma' \(every element\).*rounding order"):
        assert_matches(one_chain, a, b, "bf16")
    stranger = tilegemm.matmul(a, b, "bf16").copy()
    stranger[1, 2, 0] = 123.0
    with pytest.raises(AssertionError, match=r"(?s)first at \[1, 2, 0\].*no profile gives these bits"):
        assert_matches(stranger, a, b, "bf16")
    with pytest.raises(AssertionError, match="result has dtype float64, but isa='amx' dtype='bf16' returns float32"):
        assert_matches(stranger.astype(np.float64), a, b, "bf16")
    with pytest.raises(AssertionError, match=r"result has shape \(6, 3\)"):
        assert_matches(stranger[0], a, b, "bf16")
    c = rng.standard_normal((2, 6, 3)).astype(np.float32)
    out = c.copy()
    tilegemm.matmul(a, b, "bf16", out=out, accumulate=True)
    assert_matches(out, a, b, "bf16", c=c)


def _brute_risk(a, b):
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    K = a.shape[1]
    if K % 2:
        a, b = np.pad(a, ((0, 0), (0, 1))), np.pad(b, ((0, 1), (0, 0)))
    s = a[:, 0::2, None] * b[None, 0::2, :] + a[:, 1::2, None] * b[None, 1::2, :]
    return ((s > 32767) | (s < -32768)).sum(axis=1)


@pytest.mark.parametrize("dtype", ["u8s8", "s8s8"])
def test_saturation_risk_against_brute_force(dtype):
    rng = np.random.default_rng(9)
    lo = 0 if dtype == "u8s8" else -128
    a = (rng.random((40, 131)) ** 3 * 255 + lo).astype(np.uint8 if lo == 0 else np.int8)  # mostly small
    b = rng.integers(-128, 128, (131, 30)).astype(np.int8)
    r = saturation_risk(a, b, dtype)
    shifted = a.astype(np.int64) + (128 if lo else 0)
    want = _brute_risk(shifted, b)
    assert np.array_equal(r.pairs, want) and 0 < r.count < r.pairs.size
    exact = tilegemm.matmul(a, b, dtype, isa="avx512_vnni")
    avx2 = tilegemm.matmul(a, b, dtype, isa="avx2")
    assert not (avx2 != exact)[~r.mask].any()  # outside the mask the paths agree
    m, n = np.argwhere(r.mask)[0]
    assert r.first_k[m, n] % 2 == 0 and r.first_k[~r.mask].tolist() == [-1] * int((~r.mask).sum())
    assert "outputs" in str(r)


def test_saturation_risk_errors():
    with pytest.raises(ValueError, match="isa='avx2' does not take dtype 'bf16'"):
        saturation_risk(np.ones((2, 2)), np.ones((2, 2)), "bf16")
    with pytest.raises(ValueError, match=r"operand a has values in \[-3, -3\], outside the uint8 range"):
        saturation_risk(np.full((2, 2), -3), np.ones((2, 2), np.int8))
    with pytest.raises(ValueError, match="2-D operands with matching K"):
        saturation_risk(np.ones((2, 3), np.uint8), np.ones((2, 2), np.int8))


# -- the CLI and the benchmark rows -----------------------------------------------------------


def test_cli_explain(tmp_path, capsys):
    a = np.zeros((2, 8), np.uint8)
    b = np.zeros((8, 2), np.int8)
    a[1, 2:4], b[2:4, 0] = 200, 100
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    assert main(["explain", "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy"), "--dtype", "u8s8"]) == 0
    out = capsys.readouterr().out
    assert "output C[1, 0]: amx 40000, avx2 32767" in out and "int16 saturation at K index 2 in avx2" in out
    assert main(["explain", "--isa", "amx", "fp32_fma", "--shape", "2", "40", "2"]) == 0
    assert "dtype='bf16'" in capsys.readouterr().out
    assert main(["explain", "--isa", "amx", "amx", "--dtype", "tf32", "bf16", "--shape", "2", "40", "2"]) == 0
    assert "dtype=('tf32', 'bf16')" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--isa", "amx", "sse"], "invalid choice: 'sse'"),
        (["--isa", "amx", "avx2", "--dtype", "bf16"], "isa='avx2' does not take dtype 'bf16'"),
        (["--a", "nowhere.npy", "--b", "nowhere.npy"], "--a 'nowhere.npy': cannot read a .npy array"),
        (["--a", "x.npy"], "give both --a and --b"),
        (["--shape", "0", "4", "4"], "--shape takes positive sizes"),
        (["--shape", "2", "8", "2", "--index", "5", "0"], r"index \(5, 0\) is outside"),
        (["--dtype", "bf16", "bf16", "bf16"], "--dtype takes one dtype, or one per --isa profile, got bf16 bf16 bf16"),
    ],
)
def test_cli_explain_errors(argv, match, capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("usage:") is False
    assert err.strip().splitlines()[-1].count("error:") == 1
    import re

    assert re.search(match, err)


def test_bench_lists_each_profile_once():
    names = {(c.group, c.name) for c in benchmark.contenders()}
    for p in instructions.PROFILES.values():
        for group in ("BF16", "INT8", "FP16"):
            row = (group, f"tilegemm {p.name}")
            if p.name == instructions.DEFAULT_ISA or p.library is not None or group.lower() not in p.names():
                assert row not in names
            else:
                assert (row in names) == (p.same_as is None), row
    rows = []
    benchmark.add_profile_rows(lambda what, ratio, goal, met, s, *ran: rows.append((what, goal)), n=48, repeats=1)
    profiles = instructions.PROFILES.values()
    listed = {(p.name, d) for p in profiles if p.same_as is None and p.library is None for d in p.dtypes}
    listed = {x for x in listed if x[0] != instructions.DEFAULT_ISA}
    # ACE's rows carry block scales: tilegemm.ace_bench adds them (tests/test_ace_bench.py).
    scaled = {p.name for p in profiles if any(i.scale_block for i in p.dtypes.values())}
    assert scaled == {"ace"}
    listed = {x for x in listed if x[0] not in scaled}
    assert len(rows) == len(listed)
    assert ("isa=avx2 u8s8 prepacked n=48, 1 thread vs numpy float32", ">= 1.0") in rows
    assert ("isa=fp32_fma bf16 prepacked n=48, 1 thread vs numpy float32", ">= 0.7") in rows


def test_bench_table_aligns_long_profile_names():
    rows = [
        benchmark.Measurement("INT8", name, 64, 1, 1.0, 0.1, 3, 1.0, 0.5, 0.0)
        for name in ("numpy float32", "tilegemm avx512_vnni_sat")
    ]
    lines = benchmark.format_table(rows).splitlines()
    assert len({ln.index(" 64 ") for ln in lines[2:]}) == 1


def test_nan_payloads_are_differences_and_the_reproducer_keeps_them():
    """TDPBF16PS adds its chains ``add32(e, o)``: the even chain's Inf * 0 (the default NaN) wins.
    VDPBF16PS runs the odd NaN into C first, and a NaN C wins over Inf * 0: A's odd NaN."""
    import ml_dtypes

    a = np.uint16([[0x7F80, 0x7FC2]]).view(ml_dtypes.bfloat16)
    b = np.uint16([[0x0000], [0x3F80]]).view(ml_dtypes.bfloat16)
    e = tilegemm.explain(a, b, isa=("amx", "avx512"))
    assert e.diff.count == 1 and e.diff.nan_payloads == 1
    text = str(e)
    assert "0xffc00000" in text and "0x7fc20000" in text and "differ in payload or sign: 1" in text
    scope: dict = {}
    code = e.reproducer.code()
    assert "np.uint16" in code  # the NaN spelled as bits, payload included
    lines = code.splitlines()
    exec("\n".join(lines[:3]), scope)
    got = [tilegemm.matmul(scope["a"], scope["b"], "bf16", isa=i).view(np.uint32)[0, 0] for i in ("amx", "avx512")]
    assert [hex(g) for g in got] == ["0xffc00000", "0x7fc20000"]

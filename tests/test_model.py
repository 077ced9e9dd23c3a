"""The traffic model against the ACE excerpt's own figures."""

from __future__ import annotations

import math

import pytest

from tilegemm import benchmark, model

N = 32768


@pytest.mark.parametrize(
    "name,expected",
    [
        # The excerpt: "approximately 0.10", "about 0.06", "0.052", "0.046" bytes per MAC.
        ("AVX512-VNNI", 0.1042),
        ("SME-512", 0.0625),
        ("AMX six accumulators", 0.0521),
        ("AMX 2x2", 0.0625),
        ("ACE", 0.0469),
    ],
)
def test_reproduces_the_excerpt(name, expected):
    t = model.traffic(N, N, N, tile=model.strategies()[name], dtype="int8")
    assert round(t.bytes_per_mac, 4) == expected


def test_excerpt_counts():
    # AVX512-VNNI 16 x 24: "40 x 32k elements" per invocation, "about 2.7M" invocations (32768 / 24
    # is not whole: 1366 column blocks, the last one partial).
    t = model.traffic(N, N, N, tile=(16, 24))
    assert t.invocations == 2048 * 1366
    assert t.elements_loaded == N * (N * 1366 + N * 2048)
    # AMX six accumulators: "0.7 million" invocations, "1.7 billion tiles" of 1 KiB.
    t6 = model.traffic(N, N, N, tile=(32, 48))
    assert round(t6.invocations / 1e6, 1) == 0.7
    assert round(t6.bytes_loaded / 2**30 / 1024, 1) == 1.7
    assert t6.macs == N**3


def test_lower_bound_and_bf16():
    lb = model.lower_bound(N, N, N, 32 * 48) / N**3
    assert lb == pytest.approx(2 / math.sqrt(1536))
    # No tiling can beat the bound; the square accumulator of the same size comes closest.
    assert model.traffic(N, N, N, (32, 48)).bytes_per_mac >= lb
    assert model.traffic(N, N, N, (32, 32), "bf16").bytes_per_mac == 2 * model.traffic(N, N, N, (32, 32)).bytes_per_mac


def test_edges_and_errors():
    t = model.traffic(17, 5, 3, tile=(16, 16))
    # Blocks: rows 16 + 1, one column block of 5: A loads 17*3, B loads 2 blocks * 3*5.
    assert t.elements_loaded == 17 * 3 + 2 * 3 * 5 and t.invocations == 2
    assert model.tiling_block("2x3") == (32, 48)
    with pytest.raises(ValueError, match="tile of at least 1 x 1"):
        model.traffic(4, 4, 4, tile=(0, 4))
    with pytest.raises(ValueError, match="unknown dtype 'int4'"):
        model.traffic(4, 4, 4, dtype="int4")


def test_report_runs_every_tiling(capsys):
    rows = benchmark.model_report(64, 64, 64, "int8", measure=48)
    out = capsys.readouterr().out
    assert "AMX six accumulators" in out and "lower bound" in out
    assert [r["tiling"] for r in rows] == list(__import__("tilegemm").TILINGS)
    assert all(r["gflops"] > 0 for r in rows)


def test_report_measures_unsigned_dtypes(capsys):
    # Operands come from Format.sample, which respects each operand's signedness.
    rows = benchmark.model_report(32, 32, 32, "u8u8", measure=32)
    assert len(rows) == len(__import__("tilegemm").TILINGS)


def test_bytes_per_element_of_the_new_formats():
    # One byte per 8-bit float, four per complex FP16 pair (two FP16 parts).
    assert [model.element_bytes(d) for d in ("bf8", "bf8hf8", "hf8bf8", "hf8", "cfp16")] == [1, 1, 1, 1, 4]
    t8 = model.traffic(N, N, N, (32, 48), "hf8")
    assert t8.bytes_per_mac == model.traffic(N, N, N, (32, 48), "int8").bytes_per_mac
    assert model.traffic(N, N, N, (32, 48), "cfp16").bytes_per_mac == 4 * t8.bytes_per_mac


def test_report_counts_both_complex_instructions(capsys):
    # cfp16 runs each seed port once per instruction (TCMMRLFP16PS, then TCMMIMFP16PS): the loads
    # per multiply are the port's, and every tiling measures.
    rows = benchmark.model_report(32, 32, 32, "cfp16", measure=32)
    out = capsys.readouterr().out
    assert "(4 byte(s) per element)" in out
    assert "1x1                             2.000    2.000" in out
    assert len(rows) == len(__import__("tilegemm").TILINGS) and all(r["gflops"] > 0 for r in rows)

"""The benchmark's native rows: beside the emulation's, measured where this CPU runs them, and
saying why not where it does not. No timing is checked here, only what the rows hold."""

from __future__ import annotations

import argparse

from tilegemm import benchmark as tb
from tilegemm import native


def test_native_rows_beside_the_emulation():
    cs = tb.contenders(("1x1", "2x2"), ("bf16", "int8"))
    names = [(c.group, c.name) for c in cs]
    for g in ("BF16", "INT8"):
        assert names.index((g, "tilegemm 2x2")) < names.index((g, "native 1x1")) < names.index((g, "native 2x2"))
    assert ("BF16", "native avx512") in names and ("INT8", "native avx512") not in names
    assert ("INT8", "native avx512_vnni") in names and ("INT8", "native avx2") in names
    for c in cs:
        if c.native is not None:
            why = tb.unavailable(c)
            assert (why is None) == native.usable(c.native)
            if why and native.lacks(c.native):
                assert why == f"native {c.native.mnemonic} cannot run here: lacks {', '.join(native.lacks(c.native))}"
    only = tb.contenders(("1x1", "2x2"), ("bf16",), native_only=True)
    assert [c.name for c in only] == ["native 1x1", "native 2x2", "native avx512", "native fp32_fma"]


def test_sweep_measures_or_skips_native_rows():
    rows = tb.sweep((48,), ("BF16",), threads=1, budget=5.0, tilings=("2x2",))
    by = {r.contender: r for r in rows}
    for name in ("native 2x2", "native avx512"):
        c = next(c for c in tb.contenders(("2x2",), ("bf16",)) if c.name == name)
        r = by[name]
        if tb.unavailable(c):
            assert r.skipped == tb.unavailable(c) and r.gflops is None
        else:
            assert r.gflops > 0 and not r.skipped
    if by["native 2x2"].gflops:
        assert by["native 2x2"].differs == 0.0  # the AMX bits, natively
    if by["native avx512"].gflops:
        assert by["native avx512"].differs == by["tilegemm avx512"].differs  # VDPBF16PS's own bits


def test_tflops_table():
    rows = [
        tb.Measurement("BF16", "native 1x1", 256, 1, gflops=1500.0),
        tb.Measurement("BF16", "native 1x1", 8192, 1, gflops=12000.0),
        tb.Measurement("BF16", "native 2x2", 256, 1, skipped="x"),
    ]
    lines = tb.tflops_table(rows).splitlines()
    assert lines[0].split() == ["dtype", "kernel", "256", "8192"]
    assert lines[2].split() == ["BF16", "native", "1x1", "1.50", "12.00"]
    assert lines[3].split() == ["BF16", "native", "2x2", "-", "-"]


def test_bench_native_measures_or_says_what_is_missing(tmp_path):
    args = argparse.Namespace(
        dtypes=["bf16", "int8", "fp16"], sizes=[32], sizes_given=True, threads=1, budget=5.0, tilings=["1x1", "2x2"]
    )
    args.out = str(tmp_path)
    lines: list[str] = []
    rc = tb.native_main(args, out=lines.append)
    runnable = [g for g in ("BF16", "INT8", "FP16") if native.usable(tb._instruction(g))]
    if runnable:
        assert rc == 0 and any(ln.startswith("# native AMX, TFLOP/s") for ln in lines)
        assert {ln.split()[0] for ln in lines if ln.split()[1:2] == ["native"]} == set(runnable)
        return
    assert rc == 1
    assert lines[0].startswith("native BF16 (TDPBF16PS): not measured: this CPU (") and "lacks amx_tile" in lines[0]
    assert lines[-1] == "bench --native: no native AMX kernel can run on this CPU; nothing measured"

"""python -m tilegemm: every option honoured or refused with a one-line usage error (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tilegemm import dispatch, instructions
from tilegemm.__main__ import _parser, main
from tilegemm.kernels import targets

BAD = [
    ("ir --cpu pentium", "invalid choice: 'pentium'"),
    ("ir --tiling 3x3", "invalid choice: '3x3'"),
    ("ir --dtype fp8", "invalid choice: 'fp8'"),
    ("ir --isa sse", "invalid choice: 'sse'"),
    ("ir --isa avx512 --amx", "has no tile form"),
    ("ir --isa avx512 --dtype fp16", "isa='avx512' does not take dtype 'fp16'"),
    ("bench --tilings 9x9", "invalid choice: '9x9'"),
    ("bench --threads 0", "--threads must be at least 1"),
    ("bench --threads 100000", "at most"),
    ("bench --budget -1", "--budget: must be greater than 0, got -1"),
    ("bench --budget nan", "--budget: must be greater than 0"),
    ("bench --sizes 0", "a size must be at least 1"),
    ("bench --sizes 9000", "at most 8192"),
    ("bench --dtypes fp8", "invalid choice: 'fp8'"),
    ("model --measure -3", "--measure: must be 0 (skip) or a size, got -3"),
    ("model --m 0", "--m must be at least 1"),
    ("demo --sizes x", "a size must be an integer, got 'x'"),
    ("fleet", "give --demo"),
    ("fleet --demo --hosts nowhere recording-zen4", "unknown host 'nowhere'"),
    ("fleet --demo --hosts milan-64", "at least two different hosts"),
    ("compile --only amx", "--only takes ISA:DTYPE (e.g. amx:bf16), got 'amx'"),
    ("compile --only amx:fp64", "dtype 'fp64'"),
    ("compile --processes 0", "--processes: must be at least 1, got 0"),
    ("frobnicate", "invalid choice: 'frobnicate'"),
    ("", "the following arguments are required: VERB"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_values_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv.split())
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("python -m tilegemm"), err


def test_no_traceback_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "tilegemm", "ir", "--tiling", "3x3"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_every_verb_and_option_has_help():
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = {c.dest for c in sub._choices_actions}
    assert listed == set(sub.choices) >= {"demo", "bench", "model", "ir", "info"}
    assert all(c.help for c in sub._choices_actions)
    for verb, p in sub.choices.items():
        for action in p._actions:
            if action.dest != "help":
                assert action.help, (verb, action.dest)
    top = parser.format_help()
    assert "``" not in top and ":func:" not in top and all(v in top for v in sub.choices)


def test_ir_honours_cpu_asm_and_out(tmp_path, capsys):
    assert main(["ir", "--cpu", "skylake-avx512", "--asm", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "compiled for skylake-avx512" in out and "%zmm" in out and "vfmadd" in out
    kernel_s = (tmp_path / "d" / "kernel.s").read_text()
    assert "%zmm" in kernel_s and "vfmadd" in kernel_s
    assert main(["ir", "--cpu", "haswell", "--out", str(tmp_path / "h")]) == 0
    text = (tmp_path / "h" / "kernel.s").read_text()
    assert "%ymm" in text and "%zmm" not in text


def test_ir_amx_follows_the_tiling(tmp_path, capsys):
    assert main(["ir", "--dtype", "s8u8", "--tiling", "2x3", "--amx", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2x3 loop" in out and out.count("tdpbsud\t") == 6
    assert {p.name for p in tmp_path.iterdir()} == {"kernel.ll", "kernel.s", "amx.ll", "amx.s"}


def test_info_lists_the_records(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for mnemonic in instructions.INSTRUCTIONS:
        assert mnemonic in out
    for isa in instructions.ISAS:
        assert f"\n  {isa} " in out
    assert "target class" in out
    lacks = targets.native_missing("f16acc")
    here = "runs here" if not lacks else f"not here: this CPU lacks {','.join(f[1:] for f in lacks)}"
    assert f"f16acc -> f16acc_native with avx512bw,avx512fp16,avx512vl: {here}" in out
    name = dispatch.lookup("avx512_fp16", "fp16", "2x2").name
    assert name in out and ("-f16acc_native-" in name) == (not lacks)
    mx32 = dispatch.lookup("ace", "mxint8", "2x2").name
    assert f"{mx32} " in out and "gemm_ace_mx32_fast (where its proof fails: family ace_mx)" in out
    mx32c = dispatch.lookup("ace", "mxfp8_e5m2", "2x2").name
    assert f"{mx32c} " in out and "gemm_ace_mx32c_fast (where its proof fails: family ace_mx)" in out
    fp8c = dispatch.lookup("amx", "bf8", "2x2").name
    assert f"{fp8c} " in out and "gemm_fp8c_fast (where its proof fails: family fp8quads)" in out
    # Each kernel once, though several profiles run it (VPDPBUSD: avx512_vnni and ace's int8).
    kernels = out.split("\nkernels on this host")[1].split("\n\n")[0].splitlines()[1:]
    # which engine TDPBF16PS's body runs on, and why not the other where the CPU lacks it
    runs = "vdpbf16ps" if "vdpbf16ps" in targets.engines() else "fma"
    if targets.plan() is not None:
        line = kernels.pop(0)
        assert line.startswith("  engines of the BF16 bodies (TDPBF16PS, VDPBF16PS): fma, ") and line.endswith(
            f"; {runs} runs"
        ), line
        assert ("no vdpbf16ps (needs " in line) == (runs == "fma"), line
        bf16 = dispatch.lookup("amx", "bf16", "2x2").name
        assert f"\n  {bf16} " in out and ("-f32pairs-vdpbf16ps-" in bf16) == (runs == "vdpbf16ps"), bf16
    names = [row.split()[0] for row in kernels]
    assert dispatch.lookup("avx512_vnni", "u8s8", "2x2").name in names
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_ir_help_says_what_each_flag_adds(capsys):
    with pytest.raises(SystemExit):
        main(["ir", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "A vectorization report of a kernel's hot loop; its assembly with --asm, LLVM IR and assembly files with --out"
        in out
    )


def test_bench_body_times_the_binary64_bodies():
    """``bench --body`` also times the bodies that sum 8-bit-float products exactly in binary64
    (AMX-FP8 and ACE MX), each against the binary64 FMA peak it is given."""
    from tilegemm import perf

    rates = perf._binary64_bodies(steps=1, peak=10.0, reps=1)
    assert [r.family for r in rates] == ["fp8", "ace_mx"]
    assert all(r.rate > 0 and r.peak == 10.0 and "double" in r.body for r in rates)
    assert "of the peak 10.0" in rates[0].line()
    mx32c = perf._mx32c_body(peak=20.0, reps=1)  # and ACE MX FP8 in binary32, against its own peak
    assert mx32c.family == "ace_mx32c" and mx32c.rate > 0 and "float" in mx32c.body and mx32c.peak == 20.0
    fp8c = perf._fp8c_bodies(steps=2, peak=20.0, reps=1)  # AMX-FP8 in binary32: exact steps, and all redone
    assert [r.family for r in fp8c] == ["fp8c", "fp8c redo"]
    assert all(r.rate > 0 and "float" in r.body and r.peak == 20.0 for r in fp8c)


def test_fleet_demo_prints_the_layer_table(capsys):
    pytest.importorskip("torch")
    assert main(["fleet", "--demo", "--hosts", "recording-zen4", "milan-64"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if "recording-zen4 / milan-64" in line}
    assert out.count("\nlayer ") == 1
    # every product layer of both blocks and the model's output are rows
    assert {"0.attn.qkv", "0.fc1", "1.fc2", "(output)"} <= set(rows), out
    # the Zen 4 (VDPBF16PS brgemm) and the Milan (ATen AVX2) answers do part on this model
    assert rows["(output)"].split()[4] != "0", rows["(output)"]

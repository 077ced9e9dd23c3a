"""ACE in the bench: the sweep's rows beside AMX for the same values, and the target rows (timed
only as ratios, on a small size here: the check is that every ACE dtype is run and compared)."""

from __future__ import annotations

import numpy as np
from conftest import assert_bits

import tilegemm
from tilegemm import benchmark, instructions
from tilegemm.ace_bench import ACE_GOALS, ace_operands, add_ace_rows


def test_sweep_lists_ace_beside_amx():
    names = {(c.group, c.name) for c in benchmark.contenders(("2x2",), ("int8", "bf16", "bf8", "fp16"))}
    assert {("INT8", "tilegemm ace"), ("BF16", "tilegemm ace"), ("BF8", "tilegemm ace mxfp8_e5m2")} <= names
    assert not any(g == "FP16" and "ace" in n for g, n in names)  # ACE has no FP16 form


def test_target_rows_cover_every_ace_dtype():
    rows = []
    add_ace_rows(lambda what, r, goal, met, s: rows.append((what, r, goal, met)), lambda f, s, n: (1.0, [1.0]), 64, 1)
    dtypes = list(instructions.PROFILES["ace"].dtypes)
    assert [w.split()[1] for w, *_ in rows] == dtypes
    goals = {w.split()[1]: g for w, _, g, _ in rows}
    assert goals["s8s8"] == f">= {ACE_GOALS['i']}" and goals["mxfp8_e4m3"] == f">= {ACE_GOALS['f']}"


def test_target_operands_are_scaled_and_exact():
    """The timed call computes the bits of the reference, with B's scales in the PackedB."""
    for dtype in ("mxfp8_e5m2_e4m3", "mxint8", "u8s8", "bf16"):
        a, b, scales = ace_operands(dtype, 40)
        packed = tilegemm.pack(b, dtype, "ace", scales=None if scales is None else scales[1])
        got = tilegemm.matmul(a, packed, threads=1, scales=None if scales is None else (scales[0], None))
        want = tilegemm.reference.matmul(a, b, dtype, isa="ace", scales=scales)
        assert_bits(got, want, dtype)
        if scales is not None:
            assert scales[0].shape == (40, 2) and len(np.unique(scales[0])) > 1

"""The ACE references record output [0, 0]'s operations (tilegemm.reference.trace), so
tilegemm.explain compares ACE with the other profiles."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tilegemm
from tilegemm import instructions
from tilegemm.reference.trace import Trace

ACE = instructions.PROFILES["ace"]


@pytest.mark.parametrize("dtype", ["s8s8", "u8u8", "bf16", "mxfp8_e5m2_e4m3", "mxint8"])
def test_trace_follows_the_steps(dtype):
    instr = ACE.dtypes[dtype]
    rng = np.random.default_rng(3)
    a, b = instr.sample(2, 37, 3, rng)
    scales = None
    if instr.scale_block:
        scales = (np.uint8([[0x7E, 0x81], [0x7F, 0x7F]]), np.uint8([[0x80] * 3, [0x7D] * 3]))
    t = Trace()
    want = tilegemm.reference.matmul(a, b, dtype, isa="ace", scales=scales, trace=t)
    steps = -(-37 // instr.group)
    # Integers: one op a step; MX: the scaled sum, then the add; BF16 (sde): a0*b0, a1*b1 + p0, C + s.
    per_step = 2 if instr.scale_block else 3 if instr.is_float else 1
    assert len(t.ops) == steps * per_step
    assert [s.k for s in t.states] == [0] + [min(37, instr.group * (i + 1)) for i in range(steps)]
    assert t.result == want[0, 0]
    assert t.ops[0].k == ((0,) if per_step == 3 else tuple(range(instr.group)))


def test_mx_trace_names_the_one_rounding_and_the_flush():
    # G-1's first steps: 2^16, then 2^-8 added to it ties to even and is lost: a rounding in the add.
    a = np.zeros((1, 8), ml_dtypes.float8_e4m3fn)
    b = np.zeros((8, 1), ml_dtypes.float8_e4m3fn)
    a[0, 0] = b[0, 0] = 256
    a[0, 4] = b[4, 0] = 2.0**-4
    t = Trace()
    tilegemm.reference.matmul(a, b, "mxfp8_e4m3", isa="ace", trace=t)
    scaled, add, scaled2, add2 = t.ops
    assert scaled.exact == 2**16 and scaled.events == () and add.result == 2**16
    assert scaled2.exact == Fraction(1, 256) and add2.exact == 2**16 + Fraction(1, 256)
    assert add2.events == ("rounding",) and add2.result == 2**16
    # MX-18 with sa = 0x00: (1 - 2^-25) * 2^-127 ... is tiny and flushed.
    t = Trace()
    got = tilegemm.reference.matmul(
        np.uint8([[0x3C, 0x81]]),
        np.uint8([[0x38], [0x01]]),
        "mxfp8_e5m2_e4m3",
        isa="ace",
        scales=(np.uint8([[0x00]]), None),
        trace=t,
    )
    assert got[0, 0] == 0 and t.ops[0].events == ("FTZ",)
    # A NaN scale decides the step: no exact value.
    t = Trace()
    tilegemm.reference.matmul(
        np.uint8([[0x38]]), np.uint8([[0x38]]), "mxfp8_e4m3", isa="ace", scales=(np.uint8([[0xFF]]), None), trace=t
    )
    assert t.ops[0].exact is None and np.isnan(t.result)


def test_top2bf16_trace_in_each_reading():
    a = np.array([[2.0**-63, 2.0**-65]]).astype(ml_dtypes.bfloat16)
    b = np.array([[2.0**-62], [2.0**-65]]).astype(ml_dtypes.bfloat16)
    ops = {}
    for reading in ("sde", "spec", "rs", "gcc_chain"):
        t = Trace()
        r = tilegemm.reference.matmul(a, b, "bf16", isa="ace", trace=t, ace_top2bf16=reading)
        assert t.result == r[0, 0]
        ops[reading] = t.ops
    assert len(ops["sde"]) == 3 and len(ops["gcc_chain"]) == 2 and len(ops["spec"]) == 4
    assert ops["spec"][1].events == ("FTZ",)  # 2^-130 flushed: 0x01000000 instead of 0x01040000
    assert ops["sde"][1].events == ()  # fused: a1*b1 + p0 exact


def test_explain_compares_ace_with_amx_and_avx2():
    e = tilegemm.explain(
        *instructions.PROFILES["amx"].instruction("bf16").sample(4, 256, 4, np.random.default_rng(0)),
        "bf16",
        isa=("amx", "ace"),
    )
    assert "TOP2BF16PS" in str(e)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (4, 512)).astype(np.int8)
    b = rng.integers(-128, 128, (512, 4)).astype(np.int8)
    a[0], b[:, 0] = 127, -128
    e = tilegemm.explain(a, b, "s8s8", isa=("avx2", "ace"))
    assert "int16 saturation" in str(e)

"""Hand-worked GEMMs from the SDM pseudocode (docs/semantics.md), each with the value worked out by hand.

Each case: (name, dtype, a, b, c, expected). ``c`` is the accumulate start (None: +0). The
expected values were derived on paper from the instruction definitions, never by running code;
the comment beside each says how.
"""

import numpy as np


def p2(e):
    return 2.0**e


INF = np.inf
CASES = [
    # e = fma(2^24,1,0) = 2^24, e = fma(-2^24,1,2^24) = 0; o = 1, o = 1 + 1 = 2; dst = 0 + (0 + 2) = 2.
    # A sequential K loop gives ((2^24 + 1) - 2^24) + 1 = (2^24 - 2^24) + 1 = 1 (2^24 + 1 ties to 2^24).
    (
        "even/odd split differs from a sequential loop",
        "bf16",
        [[p2(24), 1.0, -p2(24), 1.0]],
        [[1.0], [1.0], [1.0], [1.0]],
        None,
        [[2.0]],
    ),
    # K = 2: e = fma(-2^-70, 2^-70, +0) = -2^-140 -> tiny -> -0; o likewise -0; e + o = -0;
    # dst = add32(-0, -0) = -0. Without FTZ the result would be -2^-139.
    (
        "FTZ flushes tiny partial sums, keeping the sign",
        "bf16",
        [[-p2(-70), -p2(-70)]],
        [[p2(-70)], [p2(-70)]],
        [[-0.0]],
        [[-0.0]],
    ),
    # Tininess boundary 1 (docs/semantics.md, section 1): e = 2^-63 * 2^-63 = 2^-126, then fma32(-2^-76, 2^-76, 2^-126):
    # exact 2^-126 - 2^-152 rounds up to 2^-126 at 24 bits, so not tiny. o = 0. dst = 2^-126.
    (
        "tininess after rounding: rounds up to 2^-126",
        "bf16",
        [[p2(-63), 0.0, -p2(-76)]],
        [[p2(-63)], [0.0], [p2(-76)]],
        None,
        [[p2(-126)]],
    ),
    # Tininess boundary 2: e = 2^-126; e = fma(2^-75, 2^-74, e) = 2^-126 + 2^-149 (normal);
    # e = fma(-1.5*2^-75, 2^-74, e): exact 2^-126 - 2^-150 is tiny -> +0. o = 0. dst = +0.
    (
        "tininess after rounding: tiny, flushed",
        "bf16",
        [[p2(-63), 0.0, p2(-75), 0.0, -1.5 * p2(-75)]],
        [[p2(-63)], [0.0], [p2(-74)], [0.0], [p2(-74)]],
        None,
        [[0.0]],
    ),
    # DAZ on inputs: 2^-130 is a BF16 denormal, read as +0, so the product is 0, not 2^-30.
    ("BF16 denormal input read as zero", "bf16", [[p2(-130)]], [[p2(100)]], None, [[0.0]]),
    # FP16 keeps denormal inputs: 2^-24 * 2^-24 = 2^-48, a normal binary32.
    ("FP16 denormal inputs kept", "fp16", [[p2(-24)]], [[p2(-24)]], None, [[p2(-48)]]),
    # FP16 denormal times a large value: 2^-24 * 2^15 = 2^-9 (a DAZ model would give 0).
    ("FP16 denormal times normal", "fp16", [[3 * p2(-24)]], [[p2(15)]], None, [[3 * p2(-9)]]),
    # e = -inf * 1 = -inf; e = fma(2^100, 2^100, -inf) = -inf (fused: 2^200 + -inf is -inf).
    # Unfused, 2^200 overflows to +inf first and +inf + -inf = NaN.
    (
        "fused overflow next to an infinite sum",
        "bf16",
        [[-INF, 0.0, p2(100)]],
        [[1.0], [0.0], [p2(100)]],
        None,
        [[-INF]],
    ),
    # 2^100 * 2^100 = 2^200 > FLT_MAX: +inf.
    ("product overflows to inf", "bf16", [[p2(100)]], [[p2(100)]], None, [[INF]]),
    # e = 1, o = -1, e + o = +0 (exact cancellation gives +0 under RNE); dst = -0 + +0 = +0.
    ("exact cancellation gives +0", "bf16", [[1.0, -1.0]], [[1.0], [1.0]], [[-0.0]], [[0.0]]),
    # K = 3: e = fma(-2^-70, 2^-70, +0) -> -0, then fma(-0, 1, -0) = -0. o = fma(-2^-70, 2^-70, +0)
    # -> -0, then the padded pair fma(+0, +0, -0) = +0. dst = add32(-0, add32(-0, +0)) = -0 + +0 = +0.
    # Without executing the padded pair, o stays -0 and the result is -0.
    (
        "odd K: the padded pair turns -0 into +0",
        "bf16",
        [[-p2(-70), -p2(-70), -0.0]],
        [[p2(-70)], [p2(-70)], [1.0]],
        [[-0.0]],
        [[0.0]],
    ),
    # A denormal C is read as zero by the first add: 0 * 1 gives e = o = +0, dst = daz(2^-130) + 0.
    ("denormal out with accumulate is read as zero", "bf16", [[0.0]], [[1.0]], [[np.float32(-p2(-130))]], [[0.0]]),
    # NaN in, NaN out (a float32 NaN rounds to BF16's quiet NaN 0x7FC0, A's NaN wins);
    # inf * 0 = the default NaN 0xFFC00000 (docs/semantics.md, "NaN bits").
    ("NaN propagates", "bf16", [[np.nan, 1.0]], [[1.0], [1.0]], None, [[np.nan]]),
    ("inf times zero is NaN", "fp16", [[INF]], [[0.0]], None, np.uint32([[0xFFC00000]]).view(np.float32)),
    # INT8: 4 * (-128)(-128) = 65536 added to 2^31 - 2^15 wraps: 2^31 + 2^15 - 2^32 = -2^31 + 2^15.
    (
        "INT32 wraps, never saturates",
        "s8s8",
        [[-128, -128, -128, -128]],
        [[-128], [-128], [-128], [-128]],
        [[2**31 - 2**15]],
        [[-(2**31) + 2**15]],
    ),
    # Signedness: byte 0xFF is -1 as int8 and 255 as uint8. s8u8: (-1)(255) = -255.
    ("TDPBSUD: A signed, B unsigned", "s8u8", [[-1]], [[255]], None, [[-255]]),
    ("TDPBUSD: A unsigned, B signed", "u8s8", [[255]], [[-1]], None, [[-255]]),
    ("TDPBUUD: both unsigned", "u8u8", [[255, 255]], [[255], [255]], None, [[130050]]),
]

"""Worked examples of the ACE outer products, each with its bits worked out by hand from the
instruction definitions (``docs/ace.md``). Operands are the dword of zA for row 0 and of zB for
column 0 (all other dwords 0 unless said), C[0][0] going in and coming out; the comment beside
each case says how the result follows. Nothing here was produced by running tilegemm.
"""

from __future__ import annotations

import numpy as np

# -- TOP4B*D: (id, mnemonic, zA dword, zB dword, C in, out) ------------------------------------------
INT = [
    # A byte 0x80: -128 signed, 128 unsigned; B byte 2. -256 = 0xFFFFFF00; 256 = 0x100.
    ("T4-1", "TOP4BSSD", 0x00000080, 0x00000002, 0, 0xFFFFFF00),
    ("T4-1", "TOP4BSUD", 0x00000080, 0x00000002, 0, 0xFFFFFF00),
    ("T4-1", "TOP4BUSD", 0x00000080, 0x00000002, 0, 0x00000100),
    ("T4-1", "TOP4BUUD", 0x00000080, 0x00000002, 0, 0x00000100),
    # 1 * 1 added to 0x7FFFFFFF wraps to 0x80000000.
    ("T4-2", "TOP4BSSD", 0x00000001, 0x00000001, 0x7FFFFFFF, 0x80000000),
]

# -- TOP4MX*PS: (id, mnemonic, zA dword, zB dword, sa, sb, C in, out) --------------------------------
# sa, sb: the E8M0 scales of row 0 and column 0 (0x7F = 1.0).
MX = [
    # HF8 [1, 2] . [3, 0.5] = 4.
    ("MX-1", "TOP4MXHF8PS", 0x00004038, 0x00003044, 0x7F, 0x7F, 0, 0x40800000),
    # HF8 [448, 2^-9, -448] . [448, 2^-9, 448] = 2^-18 exactly (the 448^2 terms cancel).
    ("MX-2", "TOP4MXHF8PS", 0x00FE017E, 0x007E017E, 0x7F, 0x7F, 0, 0x36800000),
    # A BF8 [57344, 2^-16, -57344] x B HF8 [448, 2^-9, 448]: 2^-25.
    ("MX-11", "TOP4MXBHF8PS", 0x00FB017B, 0x007E017E, 0x7F, 0x7F, 0, 0x33000000),
    # The same bytes as A HF8 [352, 2^-9, -352] x B BF8 [98304 (0x7E by its formula), 2^-16, 98304]:
    # 2^-25 again; 0x7E is not a NaN here.
    ("MX-12", "TOP4MXHBF8PS", 0x00FB017B, 0x007E017E, 0x7F, 0x7F, 0, 0x33000000),
    # HF8 0x7F read by its formula: 1.875 * 2^8 = 480; times 1.
    ("MX-8", "TOP4MXHF8PS", 0x0000007F, 0x00000038, 0x7F, 0x7F, 0, 0x43F00000),
    # BF8 0x7C by its formula: 2^16 (not +Inf); times BF8 0x3C = 1.
    ("MX-9", "TOP4MXBF8PS", 0x0000007C, 0x0000003C, 0x7F, 0x7F, 0, 0x47800000),
    # 1 * 1 * 2^127 * 2^-127 = 1: the scales meet exactly (no intermediate overflow or flush).
    ("MX-13", "TOP4MXHF8PS", 0x00000038, 0x00000038, 0xFE, 0x00, 0, 0x3F800000),
    # 1 * -1 * 2^254 overflows: -Inf.
    ("MX-14", "TOP4MXHF8PS", 0x00000038, 0x000000B8, 0xFE, 0xFE, 0, 0xFF800000),
    # A BF8 [1, -2^-16] x B HF8 [1, 2^-9] = 1 - 2^-25, times 2^-126: rounds (24 bits) up to 2^-126,
    # which is normal (tininess after rounding).
    ("MX-18", "TOP4MXBHF8PS", 0x0000813C, 0x00000138, 0x01, 0x7F, 0, 0x00800000),
    # ... and times 2^-127 it rounds to 2^-127, tiny: flushed to +0.
    ("MX-18", "TOP4MXBHF8PS", 0x0000813C, 0x00000138, 0x00, 0x7F, 0, 0x00000000),
    # A NaN scale writes 0x7FC00000 whatever C holds.
    ("MX-7", "TOP4MXHF8PS", 0x00000038, 0x00000038, 0xFF, 0x7F, 0x3F800000, 0x7FC00000),
    # All products 0: s = +0; C = -2^-149 reads as -0 (DAZ); -0 + +0 = +0.
    ("MX-10", "TOP4MXHF8PS", 0, 0, 0x7F, 0x7F, 0x80000001, 0x00000000),
    ("MX-10", "TOP4MXBF8PS", 0, 0, 0x7F, 0x7F, 0x80000001, 0x00000000),
    ("MX-10", "TOP4MXHBF8PS", 0, 0, 0x7F, 0x7F, 0x80000001, 0x00000000),
    ("MX-10", "TOP4MXBHF8PS", 0, 0, 0x7F, 0x7F, 0x80000001, 0x00000000),
    ("MX-10", "TOP4MXBSSPS", 0, 0, 0x7F, 0x7F, 0x80000001, 0x00000000),
    # A signalling NaN C comes out quieted.
    ("MX-16", "TOP4MXHF8PS", 0x00000038, 0x00000038, 0x7F, 0x7F, 0x7F800001, 0x7FC00001),
    # MXINT8 [127, -128] . [1, 1] = -1, times 2^-12: -2^-12.
    ("MX-3", "TOP4MXBSSPS", 0x0000807F, 0x00000101, 0x7F, 0x7F, 0, 0xB9800000),
    # 4 * (-128)(-128) = 2^16, times 2^-12: 16.
    ("MX-19", "TOP4MXBSSPS", 0x80808080, 0x80808080, 0x7F, 0x7F, 0, 0x41800000),
    # ... times 2^254: +Inf.
    ("MX-20", "TOP4MXBSSPS", 0x80808080, 0x80808080, 0xFE, 0xFE, 0, 0x7F800000),
]

# -- TOP2BF16PS: (id, zA dword, zB dword, C in, out) for each reading of ace_top2bf16 ------------------
# Element 0 in bits 15:0. Outputs by reading: sde (the default), spec, rs, gcc_chain.
TOP2 = [
    # [1, 2] . [3, 4]: p0 = 3, s = 8 + 3 = 11 in every reading.
    (
        "B2-1",
        0x40003F80,
        0x40804040,
        0,
        {"sde": 0x41300000, "spec": 0x41300000, "rs": 0x41300000, "gcc_chain": 0x41300000},
    ),
    # a = [2^-63, 2^-65], b = [2^-62, 2^-65]: p0 = 2^-125, a1*b1 = 2^-130. sde: fused, s = 2^-125 +
    # 2^-130 = 0x01040000. spec: 2^-130 flushed, s = 2^-125. rs: 2^-130 kept as a denormal, the sum
    # is normal. gcc_chain: C = 2^-125, then + 2^-130 exactly.
    (
        "B2-2",
        0x1F002000,
        0x1F002080,
        0,
        {"sde": 0x01040000, "spec": 0x01000000, "rs": 0x01040000, "gcc_chain": 0x01040000},
    ),
    # a0 = BF16 0x0001 = 2^-133 (a denormal), b0 = 2^100: 2^-33 without DAZ; spec and rs read a0 as 0.
    ("B2-3", 0x00000001, 0x00007180, 0, {"sde": 0x2F000000, "spec": 0, "rs": 0, "gcc_chain": 0x2F000000}),
    # All products +0; C = -2^-149. sde: -2^-149 + 0 rounds to -2^-149, flushed: -0. spec, rs: DAZ reads
    # C as -0, -0 + +0 = +0. gcc_chain keeps the denormal: -2^-149.
    ("B2-4", 0, 0, 0x80000001, {"sde": 0x80000000, "spec": 0, "rs": 0, "gcc_chain": 0x80000001}),
    # a = [NaN 0x7FC2, NaN 0x7FC1], b = [1, 1]. sde: p0 = 0x7FC20000, s takes a1's NaN (a before c):
    # 0x7FC10000, C + s takes it. spec, rs: a NaN result is the default NaN. gcc_chain: C = a0's NaN,
    # then a1's (a NaN multiplicand comes before C).
    (
        "B2-5",
        0x7FC17FC2,
        0x3F803F80,
        0,
        {"sde": 0x7FC10000, "spec": 0xFFC00000, "rs": 0xFFC00000, "gcc_chain": 0x7FC10000},
    ),
    # a = [2^-24, 2^-24], b = [1, 1], C = 1. sde: s = 2^-23, 1 + 2^-23. gcc_chain: 1 + 2^-24 is a tie
    # (to even: 1), twice.
    (
        "B2-6",
        0x33803380,
        0x3F803F80,
        0x3F800000,
        {"sde": 0x3F800001, "spec": 0x3F800001, "rs": 0x3F800001, "gcc_chain": 0x3F800000},
    ),
]

# -- switches of the MX outer products: (switch, value, example id, mnemonic, out) -------------------
MX_SWITCHES = [
    # A NaN scale writes the negative default NaN instead.
    ("ace_e8m0_nan_result", "0xFFC00000", "MX-7", "TOP4MXHF8PS", 0xFFC00000),
    # AMX-FP8's rules: HF8 0x7F is NaN; BF8 0x7C is +Inf; as B of HBF8, BF8 0x7E is a NaN.
    ("ace_fp8_specials", "ieee_like", "MX-8", "TOP4MXHF8PS", 0xFFC00000),
    ("ace_fp8_specials", "ieee_like", "MX-9", "TOP4MXBF8PS", 0x7F800000),
    ("ace_fp8_specials", "ieee_like", "MX-12", "TOP4MXHBF8PS", 0xFFC00000),
    # A NaN C gives the default NaN instead of itself quieted.
    ("ace_dst_nan", "indefinite", "MX-16", "TOP4MXHF8PS", 0xFFC00000),
]


def dword_zmm(dword: int, fill: int = 0) -> np.ndarray:
    """A zmm (64 bytes) with ``dword`` as dword 0 and ``fill`` in dwords 1..15."""
    return np.array([dword] + [fill] * 15, "<u4").view(np.uint8)


def f32(bits) -> np.float32:
    return np.uint32(bits).view(np.float32)


def gemm_operands(a_dword: int, b_dword: int, group: int = 4):
    """A (1 x group) and B (group x 1) codes of a one-step GEMM: the dword's elements along K."""
    width = "<u1" if group == 4 else "<u2"
    a = np.array([a_dword], "<u4").view(width).reshape(1, group)
    b = np.array([b_dword], "<u4").view(width).reshape(group, 1)
    return a, b


# -- GEMM mapping ------------------------------------------------------------------------------------
def g1():
    """mxfp8_e4m3, 1 x 33 x 1: A[0,k] = B[k,0] = 0x78 (2^8) at k = 0 and 0x18 (2^-4) at k = 4, 8, 32;
    sa = [1, 2]. Steps: 2^16; + 2^-8 is a tie at 24 bits (kept 2^16), twice; block 1 (scale 2):
    + 2^-8 * 2 = 2^-7, one ulp: 0x47800001. One rounding per 32-block would give 0x47800002."""
    a = np.zeros((1, 33), np.uint8)
    b = np.zeros((33, 1), np.uint8)
    a[0, 0] = b[0, 0] = 0x78
    for k in (4, 8, 32):
        a[0, k] = b[k, 0] = 0x18
    return a, b, (np.uint8([[0x7F, 0x80]]), None), 0x47800001


def g2():
    """bf16, 1 x 1 x 1: A = -1, B = +0, C = -0. p0 = -0; the padding pair gives s = 0*0 + (-0) = +0;
    C = -0 + +0 = +0."""
    return np.uint16([[0xBF80]]), np.uint16([[0x0000]]), 0x80000000, 0x00000000


def g3():
    """mxfp8_e4m3, 1 x 64 x 1, all data 1.0 (0x38); sa = [NaN, 1]: block 0 writes 0x7FC00000, and
    block 1's steps see a NaN C and keep it."""
    a = np.full((1, 64), 0x38, np.uint8)
    b = np.full((64, 1), 0x38, np.uint8)
    return a, b, (np.uint8([[0xFF, 0x7F]]), None), 0x7FC00000


def g4():
    """mxint8, 2 x 65 x 1: row 1 gets 64 * 64 * 2^-12 = 1 (block 0, scale 1), then 64 * -64 * 2^-12 *
    0.5 = -0.5 (block 1, scale 0x7E), then 1 * 1 * 2^-12 * 4 = 2^-10 (block 2, scale 0x81): 0.5 + 2^-10
    = 0x3F004000. Row 0 is all zero: +0."""
    a = np.zeros((2, 65), np.int8)
    b = np.zeros((65, 1), np.int8)
    a[1, 0] = b[0, 0] = 64
    a[1, 32], b[32, 0] = 64, -64
    a[1, 64] = b[64, 0] = 1
    sa = np.full((2, 3), 0x7F, np.uint8)
    sa[1] = [0x7F, 0x7E, 0x81]
    return a, b, (sa, None), (0x00000000, 0x3F004000)

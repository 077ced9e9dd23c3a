"""Worked examples of AMX-COMPLEX and AMX-FP8, each with its bits worked out by hand from the
instruction definitions (Intel SDM for TCMM*FP16PS; the Intel ISE for TDP*F8PS). Operands are
given as the dwords a tile row holds; the comment beside each case says how the result follows.
Nothing here was produced by running tilegemm.
"""

from __future__ import annotations

import numpy as np

# -- AMX-COMPLEX: (id, A dword (im:re), B dword, dst in, RL out, IM out) ------------------------
# One complex element per dword (M = N = K = 1); the same dst starts both instructions.
COMPLEX = [
    # (1 + 2i)(3 + 4i) = (3 - 8) + (4 + 6)i = -5 + 10i.
    ("CX-1", 0x40003C00, 0x44004200, 0x00000000, 0xC0A00000, 0x41200000),
    # a = b = 2^-12 (1 + i). RL: t0 = 2^-24, t1 = -2^-24, t0 + t1 = 0, dst 1 + 0 = 1.
    # IM: t0 = t1 = 2^-24, sum 2^-23, 1 + 2^-23 = 0x3F800001 (exact). Adding the products into
    # dst one at a time would give 1 + 2^-24 -> 1 (tie to even) then 1 - 2^-24 = 0x3F7FFFFF (RL).
    ("CX-2", 0x0C000C00, 0x0C000C00, 0x3F800000, 0x3F800000, 0x3F800001),
    # im(a) = QNaN 0x7E00. RL: t1 = fma(cvt16(0xFE00) = 0xFFC00000, 1, 0) -> 0xFFC00000 (the
    # input's sign flipped). IM: t0 = fma(0x7FC00000, 1, 0) -> 0x7FC00000.
    ("CX-3", 0x7E000000, 0x3C003C00, 0x00000000, 0xFFC00000, 0x7FC00000),
    # re(a) = 0x7E01 -> 0x7FC02000, im(a) = 0x7E02 -> 0x7FC04000. RL: t0 is re's NaN and the sum
    # takes its first operand's NaN. IM: t0 = im(a) * re(b) is im's NaN.
    ("CX-4", 0x7E027E01, 0x3C003C00, 0x00000000, 0x7FC02000, 0x7FC04000),
    # re(a) = 2^-24 (an FP16 denormal, kept): RL 2^-24 = 0x33800000; IM: 0*1 + 2^-24*0 = +0.
    ("CX-5", 0x00000001, 0x00003C00, 0x00000000, 0x33800000, 0x00000000),
    # dst = 0x80000001 is denormal: read as -0; (-0) + (+0 + +0) = +0.
    ("CX-6", 0x00000000, 0x00000000, 0x80000001, 0x00000000, 0x00000000),
]

# -- AMX-FP8: (id, dtype, A dwords per row of K4, B dwords per K4 row, dst in, out) ------------
# M = N = 1; each dword is 4 codes, byte 0 lowest. BF8 = E5M2, HF8 = E4M3.
FP8 = [
    # HF8 0x38 = 1, 0x40 = 2; 0x44 = 3, 0x30 = 0.5: 1*3 + 2*0.5 = 4.
    ("F8-1", "hf8", [0x00004038], [0x00003044], 0x00000000, 0x40800000),
    # BF8 [2^15, 2^-16, -2^15, 0] . [2^15, 2^-16, 2^15, 0] = 2^30 + 2^-32 - 2^30 = 2^-32 exactly
    # (a binary32 chain would lose the 2^-32 next to 2^30 and give 0).
    ("F8-2", "bf8", [0x00F80178], [0x00780178], 0x00000000, 0x2F800000),
    # The same products spread over two dwords of one instruction (K4 = 2): still one exact sum.
    ("F8-3", "bf8", [0x00000178, 0x000000F8], [0x00000178, 0x00000078], 0x00000000, 0x2F800000),
    # HF8 0x7F is NaN: the result is the default NaN.
    ("F8-4", "hf8", [0x0000007F], [0x00000038], 0x00000000, 0xFFC00000),
    # BF8 0x7C = +Inf times +0: NaN.
    ("F8-5", "bf8", [0x0000007C], [0x00000000], 0x00000000, 0xFFC00000),
    # All products zero: s = +0; dst 0x80000001 is read as -0 (DAZ); -0 + +0 = +0.
    ("F8-6", "bf8", [0x00000000], [0x00000000], 0x80000001, 0x00000000),
    ("F8-6", "bf8hf8", [0x00000000], [0x00000000], 0x80000001, 0x00000000),
    ("F8-6", "hf8bf8", [0x00000000], [0x00000000], 0x80000001, 0x00000000),
    ("F8-6", "hf8", [0x00000000], [0x00000000], 0x80000001, 0x00000000),
    # Products +Inf, -Inf, +Inf, 0: +Inf and -Inf in one instruction give NaN.
    ("F8-7", "bf8", [0x007C7C7C], [0x003CBC3C], 0x00000000, 0xFFC00000),
    # 4 + a NaN dst: the default NaN (dst's payload 0x7FC12345 is not propagated).
    ("F8-8", "hf8", [0x00004038], [0x00003044], 0x7FC12345, 0xFFC00000),
    # A BF8 [57344, 2^-16, -57344, 0] x B HF8 [448, 2^-9, 448, 0]: 2^-25 exactly.
    ("M-1", "bf8hf8", [0x00FB017B], [0x007E017E], 0x00000000, 0x33000000),
    # A HF8 [448, 2^-9, -448, 0] x B BF8 [57344, 2^-16, 57344, 0]: 2^-25.
    ("M-2", "hf8bf8", [0x00FE017E], [0x007B017B], 0x00000000, 0x33000000),
    # M-1's bytes with the roles swapped: A as HF8 reads 0x7B etc., B as BF8 reads 0x7E = NaN.
    ("M-1 swapped", "hf8bf8", [0x00FB017B], [0x007E017E], 0x00000000, 0xFFC00000),
    # A BF8 [+Inf, 1] x B HF8 [-1, 1]: -Inf + 1 = -Inf.
    ("M-3", "bf8hf8", [0x00003C7C], [0x000038B8], 0x00000000, 0xFF800000),
    # A HF8 0 x B BF8 -Inf: Inf * 0 = NaN.
    ("M-4", "hf8bf8", [0x00000000], [0x000000FC], 0x3F800000, 0xFFC00000),
    # A BF8 -Inf x B HF8 1 = -Inf, added to dst +Inf: NaN.
    ("M-5", "bf8hf8", [0x000000FC], [0x00000038], 0x7F800000, 0xFFC00000),
    # HF8 1*1 + (-1)*1 = 0 exactly: s = +0, and -0 + +0 = +0.
    ("M-6", "hf8", [0x0000B838], [0x00003838], 0x80000000, 0x00000000),
]

# -- switches: (switch, value, example id, dtype or lane, output under the alternative) ----------
SWITCHES = [
    # RL negates the product instead of the FP16 input: the NaN keeps im(a)'s sign.
    ("tcmm_rl_negate", "product_negate", "CX-3", "RL", 0x7FC00000),
    # IM's lanes swapped: t0 = re(a) * im(b) holds re's NaN, which the sum returns.
    ("tcmm_im_lane_order", "sde", "CX-4", "IM", 0x7FC02000),
    # No DAZ on dst: 0x80000001 + +0 is -2^-149, flushed to -0.
    ("fp8_dst_daz", False, "F8-6", "bf8", 0x80000000),
    # sde_revive: +Inf, then -Inf cancels, then +Inf revives; not cancelled at the dword's end.
    ("fp8_inf_cancel", "sde_revive", "F8-7", "bf8", 0x7F800000),
]


def codes(dwords) -> np.ndarray:
    """Little-endian bytes of dwords: one A row (1 x 4*K4) or, for B, K4 rows of quads."""
    return np.frombuffer(np.array(dwords, "<u4").tobytes(), np.uint8)


def f32(bits) -> np.float32:
    return np.uint32(bits).view(np.float32)


def fp8_operands(a_dwords, b_dwords):
    """A (1 x 4*K4) and B (4*K4 x 1) as a GEMM sees them: A's bytes in K order, B's quads down K."""
    return codes(a_dwords).reshape(1, -1), codes(b_dwords).reshape(-1, 1)


# -- GEMM mapping ---------------------------------------------------------------------------------
def g1():
    """Complex, M = N = 1, K = 17: A[0][0] = B[0][0] = 1; A[0][16] = 2^-12 (1 + i), B[16][0] =
    2^-12 (1 - i). Step 1 (K 0..15) leaves RL C = 1. Step 2 adds 2^-24 + 2^-24 = 2^-23 exactly:
    RL 0x3F800001; IM 2^-24 - 2^-24 = 0. All 17 products in one pair of lanes would give 1."""
    a = np.zeros((1, 17), np.uint32)
    b = np.zeros((17, 1), np.uint32)
    a[0, 0] = b[0, 0] = 0x00003C00
    a[0, 16] = 0x0C000C00
    b[16, 0] = 0x8C000C00
    return a, b, (0x3F800001, 0x00000000)


def g2():
    """TDPHF8PS, M = N = 1, K = 65: A[0][0] = B[0][0] = 2^8, A[0][1] = B[1][0] = A[0][64] =
    B[64][0] = 2^-4. Step 1: 2^16 + 2^-8 is a tie at 24 bits, rounds to 2^16. Step 2: C + 2^-8, a
    tie again: 2^16 = 0x47800000. One exact sum over all of K would give 0x47800001."""
    a = np.zeros((1, 65), np.uint8)
    b = np.zeros((65, 1), np.uint8)
    a[0, 0] = b[0, 0] = 0x78
    a[0, 1] = b[1, 0] = a[0, 64] = b[64, 0] = 0x18
    return a, b, 0x47800000

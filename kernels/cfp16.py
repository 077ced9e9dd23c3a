"""The AMX-COMPLEX tile multiply (TCMMRLFP16PS and TCMMIMFP16PS together): a fast and an exact body.

Operands (``tilegemm.packing``, layout ``"f32"`` of a complex format): an A panel row holds the 16
complex elements of a K step as exact binary32 (re, im) pairs, 32 values; a kernel B block is
``[k][re/im][n]`` binary32, 16 x 2 x 16 (the FP16 parts widened exactly, denormals kept). C is
the complex64 result viewed as interleaved float32 (re, im): ``ldc`` and offsets count floats,
two per output. ``codes`` = (tcmm_rl_negate, tcmm_im_lane_order) as indices.

Per output the SDM keeps two binary32 lanes for each instruction (docs/amx-complex.md):
RL: t0 += re(a) re(b), t1 += (-im(a)) im(b); IM: t0 += im(a) re(b), t1 += re(a) im(b); then
C += (t0 + t1), the real part through RL and the imaginary part through IM.

- exact (``cfp16_exact``): every operation through ``exact.fma32`` / ``exact.add32``, the switches
  applied (they decide which NaN a result carries, nothing else).
- fast (``complex_tile_rows``): the same lanes as vector FMAs, used after the per-call proof of
  ``tilegemm.plan.fast_path_ok`` (the proof of the FP16 kernels): a product of two FP16 values is
  exact in binary32 and at least 2^-48, so no lane can become tiny and no product can overflow;
  the proof only has to look at a caller's C (no value below 2^-103). Under it FTZ and DAZ never
  act, fused and unfused multiply-adds agree, a lane never holds -0, and the zero elements that
  pad K to a whole step change no bit. We chose the proof over always-exact vector code (flushing
  every lane with a compare and blend, about half the speed) because it fails only for a C
  holding values near the denormal range, which then takes the exact body.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit

from .exact import add32, fma32
from .families import variant_id
from .rounding import bits_f32, f32_bits
from .vector import _F32, _I32, _TILE, _body_intrinsic, _const, _fma_fn, _ptr, _splat, ir_loop

__all__ = ["CFP16_EXACT", "CFP16_FAST", "complex_tile_rows", "cfp16_exact"]

# Variants of the tile multiply (``variant`` in the kernel contract, ``tiles.tile_multiply``).
CFP16_EXACT, CFP16_FAST = variant_id("cfp16_exact"), variant_id("cfp16_fast")
_K = 16  # complex elements along K in one full tile multiply
_UNROLL = 4  # complex elements per trip of the fast body's K loop


def complex_tile_rows(mr: int, width: int = 8):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc)``: one full TCMMRLFP16PS and
    TCMMIMFP16PS for ``mr`` rows x 16 complex columns, under the fast-path proof. ``width``:
    floats per vector (16: zmm, 8: ymm), a divisor of 16."""
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width
    half = width // 2
    # (re, im) of columns 0..width-1 interleaved: low half of the columns, then the high half.
    lo_mask = ir.Constant(ir.VectorType(_I32, width), [i // 2 + (width if i % 2 else 0) for i in range(width)])
    hi_mask = ir.Constant(ir.VectorType(_I32, width), [half + i // 2 + (width if i % 2 else 0) for i in range(width)])

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        fma = _fma_fn(builder, vt)
        arow = [rows(r) for r in range(mr)]
        n_acc = 2 * 2 * parts  # per row: instruction i (0 RL, 1 IM) x lane t (t0, t1) x vector v

        def trip(t, flat):  # _UNROLL complex elements of K for every row
            # acc[r][i][t][v]
            acc = [
                [[flat[r * n_acc + (2 * i + j) * parts :][:parts] for j in range(2)] for i in range(2)]
                for r in range(mr)
            ]
            for u in range(_UNROLL):
                k = builder.add(builder.mul(t, _const(_UNROLL)), _const(u))
                bk = builder.add(b_off, builder.mul(k, _const(2 * _TILE)))
                bre, bim = (
                    [
                        builder.load(_ptr(builder, bp, builder.add(bk, _const(_TILE * j + width * v)), vt), align=4)
                        for v in range(parts)
                    ]
                    for j in range(2)
                )
                for r in range(mr):
                    ak = builder.add(arow[r], builder.mul(k, _const(2)))
                    are = _splat(builder, builder.load(_ptr(builder, ap, ak)), vt)
                    aim = _splat(builder, builder.load(_ptr(builder, ap, builder.add(ak, _const(1)))), vt)
                    naim = builder.fneg(aim)
                    for i, lanes in enumerate((((are, bre), (naim, bim)), ((aim, bre), (are, bim)))):
                        for j, (a, b) in enumerate(lanes):
                            acc[r][i][j] = [builder.call(fma, [a, b[v], acc[r][i][j][v]]) for v in range(parts)]
            return [x for r in range(mr) for i in range(2) for j in range(2) for x in acc[r][i][j]]

        flat = ir_loop(builder, _K // _UNROLL, trip, [ir.Constant(vt, [0.0] * width)] * (mr * n_acc))
        acc = [
            [[flat[r * n_acc + (2 * i + j) * parts :][:parts] for j in range(2)] for i in range(2)] for r in range(mr)
        ]
        for r in range(mr):
            c0 = crow(r)
            for v in range(parts):
                re = builder.fadd(acc[r][0][0][v], acc[r][0][1][v])  # add32(t0, t1) of RL
                im = builder.fadd(acc[r][1][0][v], acc[r][1][1][v])  # ... and of IM
                for h, mask in enumerate((lo_mask, hi_mask)):
                    cptr = _ptr(builder, cp, builder.add(c0, _const(2 * width * v + width * h)), vt)
                    s = builder.shuffle_vector(re, im, mask)
                    builder.store(builder.fadd(builder.load(cptr, align=4), s), cptr, align=4)

    return _body_intrinsic(emit)


@njit(cache=True)
def _cfp16_output(A, a, B, b, npairs, product_negate, sde_lanes):
    """The lane sums ``add32(t0, t1)`` of TCMMRLFP16PS and TCMMIMFP16PS for one output: A's row
    from ``A[a]`` as (re, im) pairs, B's column from ``B[b]`` ([k][re/im][n] blocks). Compiled once,
    apart from the loops that call it."""
    rl0 = rl1 = im0 = im1 = np.float32(0.0)
    for k in range(npairs):
        are, aim = A[a + 2 * k], A[a + 2 * k + 1]
        bre, bim = B[b + 2 * _TILE * k], B[b + 2 * _TILE * k + _TILE]
        rl0 = fma32(are, bre, rl0)
        # The SDM flips the input's sign (on the bits: a NaN's too, which ``-aim`` compiled as a
        # subtraction would not); a negated product leaves a NaN's sign alone.
        flipped = bits_f32(f32_bits(np.float32(aim)) ^ np.uint32(0x80000000))
        rl1 = fma32(aim if (product_negate and aim != aim) else flipped, bim, rl1)
        if sde_lanes:
            im0 = fma32(are, bim, im0)
            im1 = fma32(aim, bre, im1)
        else:
            im0 = fma32(aim, bre, im0)
            im1 = fma32(are, bim, im1)
    return add32(rl0, rl1), add32(im0, im1)


@njit(cache=True)
def cfp16_exact(A, a_off, lda, mr, npairs, B, b_off, C, c_off, ldc, nc, scratch, codes):
    """TCMMRLFP16PS and TCMMIMFP16PS over ``npairs`` complex elements, one rounded binary32
    operation at a time, for ``mr`` x ``nc`` outputs (C already read with DAZ)."""
    product_negate = codes[0] != 0
    sde_lanes = codes[1] != 0
    for mm in range(mr):
        for n in range(nc):
            re, im = _cfp16_output(A, a_off + mm * lda, B, b_off + n, npairs, product_negate, sde_lanes)
            c = c_off + mm * ldc + 2 * n
            C[c] = add32(C[c], re)
            C[c + 1] = add32(C[c + 1], im)

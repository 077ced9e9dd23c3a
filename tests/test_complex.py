"""AMX-COMPLEX (TCMMRLFP16PS, TCMMIMFP16PS; dtype "cfp16"): the reference against hand-worked
examples and an independent oracle, then matmul, the tile API and the switches against it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_bits
from fpenv import DAZ, FTZ, X86, mxcsr_flags
from oracle import exact_op
from worked_examples import COMPLEX, SWITCHES, f32, g1

import tilegemm
from tilegemm import reference
from tilegemm.reference import complex as cref

LANES = {"RL": 0, "IM": 1}


def c64(re_bits, im_bits):
    """A complex64 from the bit patterns of its parts."""
    out = np.zeros((1, 1), np.complex64)
    out.view(np.float32)[0, :] = [f32(re_bits), f32(im_bits)]
    return out


def parts(x):
    """A complex64 array as float32 (..., 2): real and imaginary parts, bit for bit."""
    return x.view(np.float32).reshape(x.shape + (2,))


# -- the reference: worked examples ------------------------------------------------------------


@pytest.mark.parametrize("case", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_worked_examples_reference(case):
    name, a, b, dst, rl, im = case
    got = reference.matmul(np.uint32([[a]]), np.uint32([[b]]), "cfp16", c=c64(dst, dst))
    assert_bits(parts(got), parts(c64(rl, im)), name)
    # The reference spells NaN results out: RL's sign flip, which NaN each lane carries.
    assert got.view(np.uint32).tolist() == [[rl, im]]


@pytest.mark.parametrize("switch,value,example,lane,out", [s for s in SWITCHES if s[0].startswith("tcmm")])
def test_switch_examples_reference(switch, value, example, lane, out):
    _, a, b, dst, rl, im = next(c for c in COMPLEX if c[0] == example)
    got = reference.matmul(np.uint32([[a]]), np.uint32([[b]]), "cfp16", c=c64(dst, dst), **{switch: value})
    want = [rl, im]
    want[LANES[lane]] = out
    assert got.view(np.uint32).tolist() == [want]  # NaN bits only: the readings agree elsewhere


def test_parts_are_instructions_of_their_own():
    rl, im = (tilegemm.instructions.INSTRUCTIONS[m] for m in ("TCMMRLFP16PS", "TCMMIMFP16PS"))
    a, b = np.uint32([[0x40003C00]]), np.uint32([[0x44004200]])  # (1 + 2i)(3 + 4i) = -5 + 10i
    assert rl.reference_fn(rl, a, b, np.zeros((1, 1), np.float32))[0, 0] == -5
    assert im.reference_fn(im, a, b, np.zeros((1, 1), np.float32))[0, 0] == 10
    assert tilegemm.instructions.resolve("amx", "cfp16")[2].parts == ("TCMMRLFP16PS", "TCMMIMFP16PS")


def test_gemm_k_steps_reference():
    a, b, (rl, im) = g1()
    assert_bits(parts(reference.matmul(a, b, "cfp16")), parts(c64(rl, im)), "G-1")
    # All 17 products in one pair of lanes (one instruction, if it could take K = 17) give 1:
    one = cref.tcmm(np.zeros((1, 1), np.float32), a, b, cref.REAL)
    assert one[0, 0] == 1.0


def test_cvt16_keeps_denormals_and_quiets_nans():
    assert cref.cvt16(np.uint16([0x0001, 0x8001, 0x7C00]))[:2].tolist() == [2.0**-24, -(2.0**-24)]
    assert cref.cvt16(np.uint16([0x7C01])).view(np.uint32)[0] == 0x7FC02000  # sNaN: quiet bit set
    assert cref.cvt16(np.uint16([0xFE00])).view(np.uint32)[0] == 0xFFC00000


# -- the reference against an independent oracle -------------------------------------------------


def _oracle(a, b, c):
    """The SDM loop with every FMA and add rounded by the exact rational oracle (no NaN inputs)."""
    av, bv = a.astype(np.complex128), b.astype(np.complex128)
    m, k = a.shape
    n = b.shape[1]
    out = parts(np.array(c, np.complex64)).astype(np.float64)
    for k0 in range(0, k, 16):
        for i in range(m):
            for j in range(n):
                t = [[0.0, 0.0], [0.0, 0.0]]  # [RL, IM][lane]
                for q in range(k0, min(k, k0 + 16)):
                    x, y = av[i, q], bv[q, j]
                    t[0][0] = exact_op(x.real, y.real, t[0][0], read_ab=False)
                    t[0][1] = exact_op(-x.imag, y.imag, t[0][1], read_ab=False)
                    t[1][0] = exact_op(x.imag, y.real, t[1][0], read_ab=False)
                    t[1][1] = exact_op(x.real, y.imag, t[1][1], read_ab=False)
                for lane in range(2):
                    s = exact_op(t[lane][0], 1.0, t[lane][1])
                    out[i, j, lane] = exact_op(out[i, j, lane], 1.0, s)
    return out.astype(np.float32)


def test_against_rationals():
    """FP16 parts over the whole range (denormals, cancellations, ties), starting from C values
    that include denormals, zeros of both signs and values near 2^-126."""
    rng = np.random.default_rng(17)
    pool = np.float16([0.0, -0.0, 1.0, -1.0, 2.0**-24, -(2.0**-14), 65504.0, 2.0**-12, 3.0, 0.1, -7.5, 2.0**11])
    for m, n, k in [(2, 3, 5), (3, 2, 17), (2, 2, 33)]:
        re = rng.choice(pool, (m, k)) * np.float16(rng.choice([1, -1, 0.5], (m, k)))
        im = rng.standard_normal((m, k)).astype(np.float16)
        bre = rng.standard_normal((k, n)).astype(np.float16) * np.float16(16)
        bim = rng.choice(pool, (k, n))
        a = re.astype(np.complex64) + 1j * im.astype(np.complex64)
        b = bre.astype(np.complex64) + 1j * bim.astype(np.complex64)
        c = (rng.choice([0.0, -0.0, 2.0**-130, 1.0, 2.0**-126], (m, n)) * (1 - 1j)).astype(np.complex64)
        got = reference.matmul(a, b, "cfp16", c=c)
        assert_bits(parts(got), _oracle(a, b, c), f"{m}x{n}x{k}")


# -- matmul ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_worked_examples_matmul(case, path):
    name, a, b, dst, rl, im = case
    want = c64(rl, im)
    for tiling in tilegemm.TILINGS:
        got = c64(dst, dst)
        tilegemm.matmul(np.uint32([[a]]), np.uint32([[b]]), "cfp16", tiling, out=got, accumulate=True)
        assert_bits(got, want, f"{name} {tiling}")
    big_a = np.zeros((20, 3), np.uint32)
    big_b = np.zeros((3, 35), np.uint32)
    big_a[17, 1], big_b[1, 33] = a, b
    c = np.zeros((20, 35), np.complex64)
    c[17, 33] = c64(dst, dst)[0, 0]
    tilegemm.matmul(big_a, big_b, "cfp16", "2x2", out=c, accumulate=True)
    assert_bits(c[17:18, 33:34], want, name + " (embedded)")
    assert not np.delete(np.delete(c, 17, 0), 33, 1).any()  # outputs off its row and column: untouched


def test_gemm_k_steps_matmul():
    a, b, (rl, im) = g1()
    for tiling in tilegemm.TILINGS:
        assert_bits(tilegemm.matmul(a, b, "cfp16", tiling), c64(rl, im), f"G-1 {tiling}")


@pytest.mark.parametrize("k", [1, 15, 16, 17])
def test_k_tails_with_specials(k, path):
    rng = np.random.default_rng(k)
    pool = np.float16([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, 65504.0, -1.0, 3.0, 0.1])

    def draw(shape):
        re = rng.standard_normal(shape).astype(np.float16)
        im = rng.standard_normal(shape).astype(np.float16)
        pick = rng.random(shape) < 0.05
        re[pick] = rng.choice(pool, int(pick.sum()))
        return re, im

    a = draw((19, k))
    b = draw((k, 18))
    c = (rng.standard_normal((19, 18)) + 1j * rng.standard_normal((19, 18))).astype(np.complex64)
    want = reference.matmul(a, b, "cfp16", c=c)
    for tiling in ("1x1", "2x2", "2x3"):
        out = c.copy()
        tilegemm.matmul(a, b, "cfp16", tiling, out=out, accumulate=True)
        assert_bits(out, want, f"K={k} {tiling}")


def test_inputs_complex_pairs_and_codes():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 20)) + 1j * rng.standard_normal((7, 20)) * 1e-3
    y = rng.standard_normal((20, 5)) * 300 + 1j * rng.standard_normal((20, 5))
    # Each part rounded once, as numpy.float16 does (from float64 here: no float32 step).
    pair = (x.real.astype(np.float16), x.imag.astype(np.float16))
    codes = pair[0].view(np.uint16).astype(np.uint32) | (pair[1].view(np.uint16).astype(np.uint32) << 16)
    want = reference.matmul(codes, y, "cfp16")
    assert_bits(tilegemm.matmul(x, y, "cfp16"), want, "complex128")
    assert_bits(tilegemm.matmul(pair, y, "cfp16"), want, "(re, im) float16 pair")
    assert_bits(tilegemm.matmul((x.real, x.imag), y, "cfp16"), want, "(re, im) float64 pair")
    assert_bits(tilegemm.matmul(codes, y, "cfp16"), want, "uint32 codes")
    assert tilegemm.matmul(x, y, "cfp16").dtype == np.complex64
    p = tilegemm.pack(y, "cfp16")
    assert_bits(tilegemm.matmul(x, p), want, "prepacked")
    assert p.unpack().dtype.names == ("re", "im")
    assert np.array_equal(p.unpack()["re"], y.real.astype(np.float16))
    # complex64 input: each float32 part rounded by the compiled FP16 rounding.
    x32 = x.astype(np.complex64)
    assert_bits(tilegemm.matmul(x32, y, "cfp16"), tilegemm.matmul(x32.astype(np.complex128), y, "cfp16"), "complex64")


def test_accumulate_continues_both_parts():
    rng = np.random.default_rng(8)
    a1 = rng.standard_normal((9, 40)) + 1j * rng.standard_normal((9, 40))
    b1 = rng.standard_normal((40, 11)) + 1j * rng.standard_normal((40, 11))
    a2, b2 = a1[:, :13] * 1j, b1[:13] * 2
    want = reference.matmul(a2, b2, "cfp16", c=reference.matmul(a1, b1, "cfp16"))
    out = tilegemm.matmul(a1, b1, "cfp16")
    tilegemm.matmul(a2, b2, "cfp16", out=out, accumulate=True)
    assert_bits(out, want, "chain")


def test_tiny_c_takes_the_exact_path(monkeypatch):
    seen = []
    real = tilegemm.plan.fast_path_ok
    monkeypatch.setattr(tilegemm.plan, "fast_path_ok", lambda *a: seen.append(real(*a)) or seen[-1])
    rng = np.random.default_rng(6)
    a = rng.standard_normal((17, 33)) + 1j * rng.standard_normal((17, 33))
    b = np.zeros((33, 18), complex)
    b[0] = 2.0**-24  # products of 2^-24 with A
    c = np.full((17, 18), 2.0**-110 * (1 - 1j), np.complex64)
    out = c.copy()
    tilegemm.matmul(a, b, "cfp16", out=out, accumulate=True)
    assert seen[-1] is False
    assert_bits(out, reference.matmul(a, b, "cfp16", c=c), "tiny C")
    tilegemm.matmul(a, b, "cfp16")  # without C, FP16 products cannot be tiny: the fast path
    assert seen[-1] is True


def test_input_errors():
    with pytest.raises(
        TypeError, match=r"operand a has dtype float64; dtype 'cfp16' takes complex arrays, a \(real, imag\)"
    ):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2), complex), "cfp16")
    with pytest.raises(
        ValueError, match=r"operand b: the real part has shape \(2, 2\) and the imaginary part \(2, 3\)"
    ):
        tilegemm.matmul(np.ones((2, 2), complex), (np.ones((2, 2)), np.ones((2, 3))), "cfp16")
    with pytest.raises(ValueError, match=r"operand a: a complex operand given as a tuple is \(real, imag\); got 3"):
        tilegemm.matmul((np.ones(2), np.ones(2), np.ones(2)), np.ones((2, 2), complex), "cfp16")
    with pytest.raises(TypeError, match=r"operand a: the imaginary part of a \(real, imag\) pair is complex"):
        tilegemm.matmul((np.ones((2, 2)), np.ones((2, 2), complex)), np.ones((2, 2), complex), "cfp16")
    with pytest.raises(ValueError, match=r"out has dtype float32, but dtype 'cfp16' returns complex64"):
        tilegemm.matmul(np.ones((2, 2), complex), np.ones((2, 2), complex), "cfp16", out=np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"tcmm_im_lane_order='hw' is not one of 'sdm', 'sde'"):
        tilegemm.matmul(np.ones((2, 2), complex), np.ones((2, 2), complex), "cfp16", tcmm_im_lane_order="hw")


# -- the tile API -------------------------------------------------------------------------------------


def _tile_multiply(lane, a, b, dst, **switches):
    from tilegemm.amx import intrinsics as amx

    unit = amx.reset()
    amx._tile_loadconfig(tilegemm.amx.TileConfig(rows=(1, 1, 1) + (0,) * 5, colsb=(4, 4, 4) + (0,) * 5))
    mem = np.uint32([dst, a, b]).view(np.uint8)
    for t in range(3):
        amx._tile_loadd(t, mem, 4 * t, 4)
    (amx._tile_cmmrlfp16ps if lane == "RL" else amx._tile_cmmimfp16ps)(0, 1, 2, **switches)
    assert unit.counters.macs == 1
    return unit.tile(0, np.float32)


@pytest.mark.parametrize("case", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_worked_examples_tile_api(case):
    name, a, b, dst, rl, im = case
    assert_bits(_tile_multiply("RL", a, b, dst), np.float32([[f32(rl)]]), name + " RL")
    assert_bits(_tile_multiply("IM", a, b, dst), np.float32([[f32(im)]]), name + " IM")


def test_tile_api_matches_matmul_on_full_tiles():
    from tilegemm.amx import TileConfig, TileUnit

    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 16)) + 1j * rng.standard_normal((16, 16))
    b = rng.standard_normal((16, 16)) + 1j * rng.standard_normal((16, 16))
    ca = tilegemm.formats.CFP16.to_codes(a, "a", "cfp16")
    cb = tilegemm.formats.CFP16.to_codes(b, "b", "cfp16")  # B plain row-major: no VNNI
    want = parts(tilegemm.matmul(a, b, "cfp16"))
    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=(16,) * 8, colsb=(64,) * 8))
    mem = np.concatenate([ca.view(np.uint8).ravel(), cb.view(np.uint8).ravel()])
    u.tileloadd(1, mem, 0, 64)
    u.tileloadd(2, mem, 1024, 64)
    u.tilezero(3)
    u.tilezero(4)
    u.tcmmrlfp16ps(3, 1, 2)
    u.tcmmimfp16ps(4, 1, 2)
    assert_bits(u.tile(3, np.float32), want[..., 0], "RL tile")
    assert_bits(u.tile(4, np.float32), want[..., 1], "IM tile")
    assert u.counters.macs == 2 * 16 * 16 * 16


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
def test_caller_ftz_daz_does_not_change_bits(path):
    rng = np.random.default_rng(13)
    a = (rng.standard_normal((19, 40)) + 1j * rng.standard_normal((19, 40))) * 2.0**-12
    b = rng.standard_normal((40, 18)) + 1j * rng.standard_normal((40, 18))
    a[0, :3] = [2.0**-24, 2.0**-24 * 1j, -(2.0**-20)]  # FP16 denormals
    c = (rng.standard_normal((19, 18)) * 2.0**-20).astype(np.complex64)
    c.view(np.float32)[0, :2] = [f32(0x80000001), f32(0x00000003)]
    runs = [(a, b, c)] + [(np.uint32([[x[1]]]), np.uint32([[x[2]]]), c64(x[3], x[3])) for x in COMPLEX]

    def go():
        outs = []
        for x, y, cc in runs:
            out = cc.copy()
            tilegemm.matmul(x, y, "cfp16", out=out, accumulate=True, threads=1)
            outs.append(out)
        return outs

    want = go()
    with mxcsr_flags(FTZ | DAZ):
        got = go()
    for g, w, (x, y, cc) in zip(got, want, runs):
        assert_bits(g, w, "under FTZ|DAZ")
        assert_bits(w, reference.matmul(x, y, "cfp16", c=cc), "reference")


@pytest.mark.parametrize("switch,value,example,lane,out", [s for s in SWITCHES if s[0].startswith("tcmm")])
def test_switches_reach_matmul_and_the_tile_api(switch, value, example, lane, out, path):
    """Kernels and tiles take the switches; results keep NaN-ness (payloads are the reference's)."""
    _, a, b, dst, rl, im = next(c for c in COMPLEX if c[0] == example)
    want = reference.matmul(np.uint32([[a]]), np.uint32([[b]]), "cfp16", c=c64(dst, dst), **{switch: value})
    for tiling in ("1x1", "2x2"):
        got = c64(dst, dst)
        tilegemm.matmul(
            np.uint32([[a]]), np.uint32([[b]]), "cfp16", tiling, out=got, accumulate=True, **{switch: value}
        )
        assert_bits(got, want, f"{switch}={value} {tiling}")
    assert_bits(_tile_multiply(lane, a, b, dst, **{switch: value}), parts(want)[..., LANES[lane]], "tile API")

"""NaN bits are bits: every float dtype and profile gives the NaN x86 gives, on every path.

The rule (``docs/semantics.md``, "NaN bits"): in each ``fma32(a, b, c)`` step the first NaN
multiplicand wins, quieted; else a NaN addend, even against Inf * 0; else an invalid operation
gives 0xFFC00000. ``add32(x, y)``: the first NaN operand. The expected values below are the
silicon tables measured on AMD Zen 4 (VDPBF16PS, VFMADD231PS), not the code's own output.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilegemm
from tilegemm import instructions, reference
from tilegemm.reference.binary32 import add32_x86, fma32_read, fma32_x86

ml_dtypes = pytest.importorskip("ml_dtypes")


def _f32(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


def _bf16(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint16).view(ml_dtypes.bfloat16)


# VDPBF16PS on AMD EPYC Zen 4: dst, a = [a0 (even), a1 (odd)], b = [b0, b1] -> result (BF16 bits).
VDPBF16PS_SILICON = [
    (0x00000000, 0x7FC1, 0x0000, 0x7FC5, 0x0000, 0x7FC10000),
    (0x00000000, 0x7FC1, 0x7FC2, 0x3F80, 0x3F80, 0x7FC10000),
    (0x7FC12345, 0x0000, 0x7FC2, 0x3F80, 0x3F80, 0x7FC20000),
    (0x7FC12345, 0x3F80, 0x0000, 0x7FC5, 0x0000, 0x7FC50000),
    (0x3F800000, 0x7F80, 0x0000, 0x0000, 0x0000, 0xFFC00000),
    (0x7FC12345, 0x0000, 0xFF80, 0x3F80, 0x0000, 0x7FC12345),
    (0x00000000, 0x7F81, 0x0000, 0x3F80, 0x0000, 0x7FC10000),
    (0x80000000, 0x8000, 0x8000, 0x3F80, 0x3F80, 0x80000000),
]


@pytest.mark.parametrize("dst,a0,a1,b0,b1,want", VDPBF16PS_SILICON)
def test_vdpbf16ps_silicon_table_through_avx512(dst, a0, a1, b0, b1, want):
    a = _bf16(a0, a1).reshape(1, 2)
    b = _bf16(b0, b1).reshape(2, 1)
    c = _f32(dst).reshape(1, 1)
    ref = reference.matmul(a, b, isa="avx512", c=c)
    out = c.copy()
    tilegemm.matmul(a, b, isa="avx512", out=out, accumulate=True)
    assert hex(int(ref.view(np.uint32)[0, 0])) == hex(want)
    assert hex(int(out.view(np.uint32)[0, 0])) == hex(want)
    from tilegemm import native

    if native.usable(instructions.profile("avx512").dtypes["bf16"]):  # this CPU's VDPBF16PS too
        out = c.copy()
        tilegemm.matmul(a, b, isa="avx512", out=out, accumulate=True, backend="native")
        assert hex(int(out.view(np.uint32)[0, 0])) == hex(want)


# VFMADD231PS on AMD EPYC Zen 4: (a, b, c) -> a * b + c, binary32 bits.
VFMADD_SILICON = [
    (0x7FC00001, 0x7FC00002, 0x7FC00003, 0x7FC00001),
    (0x3F800000, 0x7FC00002, 0x7FC00003, 0x7FC00002),
    (0x7F800000, 0x00000000, 0x7FC00003, 0x7FC00003),
    (0x7F800000, 0x00000000, 0x3F800000, 0xFFC00000),
    (0x7F800001, 0x3F800000, 0x00000000, 0x7FC00001),
    (0x3F800000, 0x3F800000, 0xFF800005, 0xFFC00005),
]


@pytest.mark.parametrize("a,b,c,want", VFMADD_SILICON)
def test_fma_nan_rule_matches_silicon(a, b, c, want):
    x, y, z = _f32(a), _f32(b), _f32(c)
    assert hex(int(fma32_read(x, y, z).view(np.uint32)[0])) == hex(want)
    assert hex(int(fma32_x86(x, y, z).view(np.uint32)[0])) == hex(want)
    # VFMADD231PS itself (isa="fp32_fma" reads C without DAZ): A's and B's values must be 16-bit
    # floats there, so the scalar function that profile runs is checked directly
    from tilegemm.reference.isa import fma32_ieee

    assert hex(int(fma32_ieee(x, y, z).view(np.uint32)[0])) == hex(want)


def test_add_nan_rule():
    assert hex(int(add32_x86(_f32(0x7FC00001), _f32(0xFFC00002)).view(np.uint32)[0])) == "0x7fc00001"
    assert hex(int(add32_x86(_f32(0x3F800000), _f32(0xFF800002)).view(np.uint32)[0])) == "0xffc00002"
    assert hex(int(add32_x86(_f32(0x7F800000), _f32(0xFF800000)).view(np.uint32)[0])) == "0xffc00000"


def _nan_heavy(rng, shape, fmt, frac=0.15):
    """Normals with NaNs (random signs and payloads, quiet and signalling), infinities and zeros."""
    x = rng.standard_normal(shape).astype(np.float32)
    r = rng.random(shape)
    if fmt in ("bf16", "fp16"):
        bits = x.astype(ml_dtypes.bfloat16 if fmt == "bf16" else np.float16).view(np.uint16)
        top, inf = (0x7F80, 0x7F) if fmt == "bf16" else (0x7C00, 0x3FF)
        nan = top | rng.integers(1, inf + 1, shape).astype(np.uint16)
        sign = (rng.integers(0, 2, shape) << 15).astype(np.uint16)
        bits = np.where(r < frac, nan | sign, bits)
        bits = np.where((r >= frac) & (r < frac + 0.03), top | sign, bits)
        bits = np.where((r >= frac + 0.03) & (r < frac + 0.08), sign, bits)
        return bits.astype(np.uint16).view(ml_dtypes.bfloat16 if fmt == "bf16" else np.float16)
    u = x.view(np.uint32)
    nan = (
        0x7F800000
        | rng.integers(1, 1 << 23, shape).astype(np.uint32)
        | (rng.integers(0, 2, shape).astype(np.uint32) << 31)
    )
    u[:] = np.where(r < frac, nan, u)
    u[:] = np.where((r >= frac) & (r < frac + 0.03), np.uint32(0x7F800000), u)
    u[:] = np.where((r >= frac + 0.03) & (r < frac + 0.08), np.uint32(0), u)
    return x


def _cases():
    for isa in instructions.ISAS:
        if isa == "onednn":
            continue
        for dt, instr in instructions.profile(isa).dtypes.items():
            if np.dtype(instr.acc).kind in "fc":
                yield pytest.param(isa, dt, id=f"{isa}-{dt}")


def _fp8_codes(rng, shape, fmt, frac):
    """8-bit float codes: finite ones, with NaN codes at rate ``frac`` and 3% infinities (E5M2)."""
    every = np.arange(256, dtype=np.uint8)
    v = every.view(fmt.element).astype(np.float32)
    finite, nan, inf = every[np.isfinite(v)], every[np.isnan(v)], every[np.isinf(v)]
    codes = rng.choice(finite, shape)
    r = rng.random(shape)
    codes = np.where(r < frac, rng.choice(nan, shape), codes)
    if inf.size:
        codes = np.where((r >= frac) & (r < frac + 0.03), rng.choice(inf, shape), codes)
    return codes.astype(np.uint8)


def _operands(isa: str, dt: str, frac: float, seed: int):
    """NaN-heavy operands for ``dt`` on ``isa``: (a, b, c, keywords)."""
    instr = instructions.profile(isa).dtypes[dt]
    rng = np.random.default_rng(seed)
    M, K, N = 19, 77, 35
    fmt = dt if dt in ("bf16", "fp16") else "f32"
    kw: dict = {}
    if instr.a.storage.itemsize == 1 and instr.a.is_float:  # 8-bit float codes
        a, b = _fp8_codes(rng, (M, K), instr.a, frac), _fp8_codes(rng, (K, N), instr.b, frac)
        if isa == "amx":
            kw["fp8_overflow"] = "nan"
    elif not instr.a.is_float:  # MXINT8: integers, NaN from the scales and C
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    elif dt == "cfp16":
        a = (_nan_heavy(rng, (M, K), "fp16", frac), _nan_heavy(rng, (M, K), "fp16", frac))
        b = (_nan_heavy(rng, (K, N), "fp16", frac), _nan_heavy(rng, (K, N), "fp16", frac))
    else:
        a, b = _nan_heavy(rng, (M, K), fmt, frac), _nan_heavy(rng, (K, N), fmt, frac)
    if instr.scale_block:
        nb = -(-K // instr.scale_block)
        sa = rng.integers(118, 136, (M, nb)).astype(np.uint8)
        sb = rng.integers(118, 136, (nb, N)).astype(np.uint8)
        sa[1, 0] = sb[1, 3] = 0xFF
        kw["scales"] = (sa, sb)
    acc = np.dtype(instr.acc)
    if acc.kind == "c":
        c = np.empty((M, N), acc)
        c.real, c.imag = _nan_heavy(rng, (M, N), "f32", frac), _nan_heavy(rng, (M, N), "f32", frac)
    else:
        c = _nan_heavy(rng, (M, N), "fp16" if acc.itemsize == 2 else "f32", frac).astype(acc)
    return a, b, c, kw


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _check(isa: str, dt: str, a, b, c, kw, threads=(1, 2)) -> np.ndarray:
    """The kernels' bits equal the reference's for every output; returns the reference's."""
    want = reference.matmul(a, b, dtype=dt, isa=isa, c=c, **kw)
    for t in threads:
        out = c.copy()
        tilegemm.matmul(a, b, dtype=dt, isa=isa, out=out, accumulate=True, threads=t, **kw)
        got, exp = _bits(out), _bits(want)
        bad = np.argwhere(got != exp)
        assert bad.size == 0, (
            f"{isa} {dt} {kw}: {len(bad)} outputs differ, first {tuple(bad[0])}: "
            f"{got[tuple(bad[0])]:#x} != {exp[tuple(bad[0])]:#x}"
        )
    return want


@pytest.mark.parametrize("isa,dt", list(_cases()))
@pytest.mark.parametrize("frac", [0.02, 0.15])
def test_nan_heavy_kernels_equal_reference(isa, dt, frac):
    """Every output's 32 (or 16) bits, on data with NaNs of random payloads and signs in A, B, C
    and (MX dtypes) a NaN block scale, one thread and two."""
    a, b, c, kw = _operands(isa, dt, frac, seed=int(frac * 100) + len(isa) * 7 + len(dt))
    want = _check(isa, dt, a, b, c, kw)
    assert np.isnan(want).any()


def _switch_cases():
    for isa in instructions.ISAS:
        if isa == "onednn":
            continue
        for dt, instr in instructions.profile(isa).dtypes.items():
            for sw in instr.switches:
                yield pytest.param(isa, dt, sw.name, id=f"{isa}-{dt}-{sw.name}")


#: The switches whose readings differ in NaN bits only (the others have their own tests, on data
#: built for them: denormal C for ``*_dst_daz``, infinities in product order for ``fp8_inf_cancel``).
NAN_SWITCHES = ("ace_e8m0_nan_result", "ace_dst_nan", "tcmm_rl_negate", "tcmm_im_lane_order")


@pytest.mark.parametrize("isa,dt,switch", list(_switch_cases()))
def test_every_switch_acts_on_the_kernels(isa, dt, switch):
    """Each reading of each switch: the kernels give the reference's bits on NaN-heavy data; for a
    NaN switch, the readings do not all give the same bits (a switch the kernels ignored would fail
    one of the two)."""
    instr = instructions.profile(isa).dtypes[dt]
    sw = next(s for s in instr.switches if s.name == switch)
    differs = False
    for frac in (0.1, 0.01, 0.0):  # NaN-heavy first; a switch about infinities needs fewer NaNs
        a, b, c, kw = _operands(isa, dt, frac, seed=7)
        results = [_check(isa, dt, a, b, c, {**kw, switch: value}, threads=(2,)) for value in sw.values]
        differs = differs or any(not np.array_equal(_bits(results[0]), _bits(r)) for r in results[1:])
    assert differs or switch not in NAN_SWITCHES, f"{switch}: every reading gave the same bits"


@pytest.mark.parametrize("dt", ["mxint8", "mxfp8_e4m3"])
def test_ace_nan_switches_act_on_the_kernels(dt):
    """``ace_e8m0_nan_result`` and ``ace_dst_nan`` change the kernels' result as the reference's."""
    rng = np.random.default_rng(3)
    M, K, N = 3, 64, 4
    code = np.uint8 if "fp8" in dt else np.int8
    a = rng.integers(0, 100, (M, K)).astype(code)
    b = rng.integers(0, 100, (K, N)).astype(code)
    sa = np.full((M, 2), 127, np.uint8)
    sb = np.full((2, N), 127, np.uint8)
    sa[0, 0] = 0xFF
    c = np.zeros((M, N), np.float32)
    c[1, 1] = _f32(0x7FC12345)[0]
    expect = {  # (row 0, C[1, 1]) per reading
        (): (0x7FC00000, 0x7FC12345),
        (("ace_e8m0_nan_result", "0xFFC00000"),): (0xFFC00000, 0x7FC12345),
        # the NaN scale's 0x7FC00000 is C for the next block's step, which then writes INDEF
        (("ace_dst_nan", "indefinite"),): (0xFFC00000, 0xFFC00000),
    }
    for sw, (row0, c11) in expect.items():
        out = c.copy()
        tilegemm.matmul(a, b, dtype=dt, isa="ace", scales=(sa, sb), out=out, accumulate=True, **dict(sw))
        want = reference.matmul(a, b, dtype=dt, isa="ace", scales=(sa, sb), c=c, **dict(sw))
        for r in (out, want):
            bits = r.view(np.uint32)
            assert (bits[0] == row0).all(), (sw, [hex(x) for x in bits[0]])
            assert bits[1, 1] == c11, (sw, hex(bits[1, 1]))


def test_nan_payload_of_a_wins_over_b_in_amx_bf16():
    """TDPBF16PS: a = A's element, b = B's: a NaN x NaN product takes A's payload."""
    a = _bf16(0x7FC1, 0x0000).reshape(1, 2)
    b = _bf16(0x7FC5, 0x0000).reshape(2, 1)
    for isa in ("amx", "avx512"):
        assert hex(int(tilegemm.matmul(a, b, isa=isa).view(np.uint32)[0, 0])) == "0x7fc10000"
        assert hex(int(reference.matmul(a, b, isa=isa).view(np.uint32)[0, 0])) == "0x7fc10000"


@pytest.mark.parametrize("frac", [0.02, 0.15])
def test_nan_heavy_vfmadd231ph_both_families(frac, f16acc_family):
    """VFMADD231PH emulated on binary32 lanes and run as the instruction itself (binary16 lanes,
    what AVX512-FP16 hosts get): the same NaN bits as the reference."""
    if f16acc_family == "f16acc_native":
        from conftest import link_half_helpers

        link_half_helpers()
    a, b, c, kw = _operands("avx512_fp16", "fp16", frac, seed=11)
    _check("avx512_fp16", "fp16", a, b, c, kw)


@pytest.mark.parametrize("frac", [0.02, 0.15])
def test_nan_heavy_onednn_profile_equals_its_reference(frac):
    """PyTorch's bf16 matmul on an AMX server (``isa="onednn"``): its emulation against its
    readable reference, every bit of the BF16 outputs, one oneDNN thread and two."""
    rng = np.random.default_rng(int(frac * 100))
    for M, K, N in ((19, 77, 35), (7, 300, 64)):
        a, b = _nan_heavy(rng, (M, K), "bf16", frac), _nan_heavy(rng, (K, N), "bf16", frac)
        for threads in (1, 2):
            got = tilegemm.matmul(a, b, isa="onednn", onednn_threads=threads)
            want = reference.matmul(a, b, isa="onednn", onednn_threads=threads)
            assert np.isnan(want.astype(np.float32)).any()
            assert np.array_equal(_bits(got), _bits(want)), (M, K, N, threads)


@pytest.mark.parametrize("isa,dt", [("amx", "bf16"), ("amx", "fp16"), ("avx512", "bf16")])
def test_sparse_nans_send_only_their_blocks_to_the_exact_path(isa, dt):
    """The blocked kernels run the steps of A's row groups and B's blocks that hold a NaN exactly
    and the rest fast; every output's bits are still the reference's, C's NaN winning the later
    steps' default NaNs (Inf * 0 in B's last rows)."""
    from tilegemm import plan

    rng = np.random.default_rng(12)
    M, K, N = 100, 300, 70
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    a[7, 3] = _f32(0x7FC12345)[0]  # a NaN early in K: C holds it through the later steps
    b[150, 40] = _f32(0x7FC54321)[0]  # rounds to BF16/FP16's quiet NaN 0x7FC0... / 0x7E00
    a[50, 290:] = np.inf  # Inf * 0 in a late step: the default NaN meets C's
    b[290:, :] = 0.0
    a[7, 290] = np.inf
    with plan.recording() as r:
        got = tilegemm.matmul(a, b, dt, isa=isa)
    counts = r.counts()
    assert counts["fast"] > 0 and counts["exact"] > 0, counts
    want = reference.matmul(a, b, dt, isa=isa)
    assert np.array_equal(_bits(got), _bits(want)), np.argwhere(_bits(got) != _bits(want))[:3]
    assert np.isnan(want[7]).all() and np.isnan(want[:, 40]).all()
    # row 50, column 40: B's NaN from step 4 in C, then Inf * 0's default NaN in the last step:
    # C's wins (a C read first in add32); the kernels ran that step fast, through C's own add
    assert hex(int(_bits(want)[50, 40])) == "0x7fc00000"
    assert counts["fast, flushed add"] + counts["flag"] > 0, counts

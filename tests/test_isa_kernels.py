"""The other CPUs' kernels beyond the microkernel tester: int32 saturation mid-chain, denormals,
signed zeros and special values, the fast-path proof, the caller's MXCSR, binary16 C, and the
bodies compiled for AVX2-only and generic x86-64 targets (run on this host)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import F16ACC_FAMILIES, assert_bits, use_f16acc_family
from fpenv import DAZ, FTZ, X86, get_mxcsr, mxcsr_flags

import tilegemm
from tilegemm import instructions, plan, reference

INT_MAX = 2**31 - 1


def _ref(a, b, dtype, isa, c=None):
    return reference.matmul(a, b, dtype, c=c, isa=isa)


@pytest.mark.parametrize("dtype", ["u8s8", "s8s8"])
@pytest.mark.parametrize("tiling,threads", [("1x1", 1), ("2x3", 2)])
def test_int32_saturation_mid_chain(dtype, tiling, threads):
    """C next to both int32 limits, K across several kernel passes: each C element's running sum
    clips where VPDPBUSDS clips, and only there."""
    rng = np.random.default_rng(11)
    instr = instructions.resolve("avx512_vnni_sat", dtype)[2]
    a, b = instr.sample(40, 64 * 9 + 5, 35, rng)
    c = rng.choice([INT_MAX - 3000, INT_MAX - 40000, -INT_MAX + 1000, -INT_MAX + 50000, 5], (40, 35))
    c = c.astype(np.int32)
    want = _ref(a, b, dtype, "avx512_vnni_sat", c)
    wrap = _ref(a, b, dtype, "avx512_vnni", c)
    assert (want != wrap).mean() > 0.1  # the data does saturate, and not everywhere
    for isa in ("avx512_vnni_sat", "avx_vnni_sat"):
        out = c.copy()
        tilegemm.matmul(a, b, dtype, tiling, isa=isa, out=out, accumulate=True, threads=threads)
        assert_bits(out, want, f"{isa} {dtype}")


def test_saturation_free_rule_at_its_edge():
    """The bound of ``plan.saturation_free``, worked by hand: |C| plus K terms of at most
    |a|max * |b|max (u8 activations) or 128 * |b|max (s8 ones, shifted, with the compensation)."""
    u8, s8 = instructions.INSTRUCTIONS["VPDPBUSDS"], instructions.INSTRUCTIONS["VPDPBUSDS.S8"]
    chain = 1024 * 255 * 128  # 33_423_360
    assert plan.saturation_free(u8, 255, 128, INT_MAX - chain, 1024)
    assert not plan.saturation_free(u8, 255, 128, INT_MAX - chain + 1, 1024)
    shifted = 1024 * 128 * 128  # 16_777_216, whatever |a| (at most 128)
    assert plan.saturation_free(s8, 5, 128, INT_MAX - shifted, 1024)
    assert not plan.saturation_free(s8, 5, 128, INT_MAX - shifted + 1, 1024)
    # Full-range operands from C = 0: u8 A up to K = 65_793, s8 A up to K = 131_071.
    assert plan.saturation_free(u8, 255, 128, 0, 65_793) and not plan.saturation_free(u8, 255, 128, 0, 65_794)
    assert plan.saturation_free(s8, 128, 128, 0, 131_071) and not plan.saturation_free(s8, 128, 128, 0, 131_072)
    with plan.forced_path("exact"):
        assert not plan.saturation_free(u8, 1, 1, 0, 1)


def test_the_bound_is_sound_where_it_is_tight():
    """u8 activations of 255 and weights of 127: every running sum grows by 255 * 127 per element,
    so from C = INT_MAX - K * 255 * 127 the chain ends exactly at INT_MAX (the bound holds: the
    wrapping kernel runs), and from one more it clips, where the wrapping sum would turn negative."""
    k = 200
    a = np.full((3, k), 255, np.uint8)
    b = np.full((k, 5), 127, np.int8)
    room = INT_MAX - k * 255 * 127
    for c_fill, kernel in ((room, "vpdpbusd"), (room + 1, "vpdpbusds")):
        c = np.full((3, 5), c_fill, np.int32)
        want = _ref(a, b, "u8s8", "avx512_vnni_sat", c)
        assert (want == INT_MAX).all()
        wrap = _ref(a, b, "u8s8", "avx512_vnni", c)
        assert (wrap == INT_MAX).all() if c_fill == room else (wrap < 0).all()
        out = c.copy()
        with plan.recording() as r:
            tilegemm.matmul(a, b, "u8s8", isa="avx512_vnni_sat", out=out, accumulate=True)
        assert r.calls[0][0].split("-")[0] == kernel, r.calls
        assert_bits(out, want, f"C = {c_fill}")


@pytest.mark.parametrize("dtype", ["u8s8", "s8s8"])
def test_saturating_profiles_wrap_only_where_nothing_can_saturate(dtype):
    """VPDPBUSDS runs the wrapping kernels when the bound shows no running sum can saturate, and
    its own chain otherwise: here a C one step inside and one step outside the bound, where the
    data happens not to saturate, and a C that makes it saturate."""
    rng = np.random.default_rng(13)
    instr = instructions.resolve("avx512_vnni_sat", dtype)[2]
    a, b = instr.sample(37, 200, 41, rng)
    b_max = int(np.abs(b.astype(np.int64)).max())
    term = 128 * b_max if a.dtype == np.int8 else int(a.max()) * b_max
    room = INT_MAX - 200 * term
    for c_fill, kernel in ((room, "vpdpbusd"), (room + 1, "vpdpbusds"), (INT_MAX - 5, "vpdpbusds")):
        c = np.full((37, 41), c_fill, np.int32)
        c[::2] = -c_fill  # both signs, the bound by |C|
        want = _ref(a, b, dtype, "avx512_vnni_sat", c)
        for packed in (False, True):
            out = c.copy()
            with plan.recording() as r:
                rhs = tilegemm.pack(b, dtype, "avx512_vnni_sat") if packed else b
                tilegemm.matmul(a, rhs, dtype, isa="avx512_vnni_sat", out=out, accumulate=True)
            assert r.calls[0][0].split("-")[0].split(".")[0] == kernel, (c_fill, r.calls)
            assert_bits(out, want, f"C = +-{c_fill}, packed {packed}")
    assert (want == INT_MAX).any()  # the last C saturates


@pytest.mark.parametrize("dtype", ["u8s8", "s8s8"])
def test_avx2_accumulates_and_batches(dtype):
    rng = np.random.default_rng(12)
    instr = instructions.resolve("avx2", dtype)[2]
    a, b = instr.sample(3 * 21, 77, 30, rng)
    a = a.reshape(3, 21, 77)
    c = rng.integers(-(2**31), 2**31, (3, 21, 30)).astype(np.int32)
    want = np.stack([_ref(a[i], b, dtype, "avx2", c[i]) for i in range(3)])
    out = c.copy()
    tilegemm.matmul(a, tilegemm.pack(b, dtype, "avx2"), out=out, accumulate=True)
    assert_bits(out, want, "batched accumulate")


POOL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-133, -(2.0**-130), 2.0**-70, 3.0e38, -1.0, 1.5])


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_fp32_fma_specials_denormals_and_zeros(dtype):
    rng = np.random.default_rng(13)
    a = rng.choice(POOL, (20, 45))
    b = rng.choice(POOL, (45, 19))
    assert_bits(tilegemm.matmul(a, b, dtype, isa="fp32_fma"), _ref(a, b, dtype, "fp32_fma"), "specials")
    c = rng.choice(np.float32([0.0, -0.0, 2.0**-140, -(2.0**-149), 1.0, np.nan]), (20, 19))
    out = c.copy()
    tilegemm.matmul(a, b, dtype, isa="fp32_fma", out=out, accumulate=True)
    assert_bits(out, _ref(a, b, dtype, "fp32_fma", c), "specials from a denormal C")


@pytest.mark.parametrize("k,sign", [(1, True), (2, True), (31, True), (33, True), (32, True)])
@pytest.mark.parametrize(
    "isa,dtype,family", [("fp32_fma", "bf16", None)] + [("avx512_fp16", "fp16", f) for f in F16ACC_FAMILIES]
)
def test_minus_zero_survives_padding(isa, dtype, family, k, sign, monkeypatch):
    """A -0 C with -0 products stays -0 whatever K: the K padding (-0 in A, a value or the
    binary16 code 0x8000) is an exact no-op."""
    if family is not None:
        use_f16acc_family(monkeypatch, family)
    acc = instructions.resolve(isa, dtype)[2].acc
    out = np.full((1, 1), -0.0, acc)
    tilegemm.matmul(np.full((1, k), -0.0), np.ones((k, 1)), dtype, isa=isa, out=out, accumulate=True)
    assert out[0, 0] == 0 and bool(np.signbit(out[0, 0])) == sign
    out = np.full((3, 2), -0.0, acc)
    tilegemm.matmul(np.full((3, k), 2.0), np.zeros((k, 2)), dtype, isa=isa, out=out, accumulate=True)
    assert not np.signbit(out).any()  # +0 products: -0 + +0 = +0


def test_fp32_fma_proof_refuses_denormals(monkeypatch):
    seen = []
    real = plan.fast_path_ok
    monkeypatch.setattr(plan, "fast_path_ok", lambda *a: seen.append(real(*a)) or seen[-1])
    rng = np.random.default_rng(14)
    a = rng.standard_normal((17, 40))
    b = rng.standard_normal((40, 9))
    tilegemm.matmul(a, b, "bf16", isa="fp32_fma")
    a[3, 5] = 2.0**-130  # a BF16 denormal, kept by this path
    got = tilegemm.matmul(a, b, "bf16", isa="fp32_fma")
    out = np.full((17, 9), 2.0**-140, np.float32)  # a denormal C
    tilegemm.matmul(a[:, :1] * 0 + 1, b[:1], "bf16", isa="fp32_fma", out=out, accumulate=True)
    assert seen == [True, False, False]
    assert_bits(got, _ref(a, b, "bf16", "fp32_fma"), "denormal input")
    assert got[3].view(np.uint32).tolist() != tilegemm.matmul(a, b, "bf16")[3].view(np.uint32).tolist()


def test_fp16_accumulator_specials_and_out(f16acc_family):
    rng = np.random.default_rng(15)
    pool = np.float16([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, 65504.0, -65504.0, 300.0, 1.0, -1.5])
    a = rng.choice(pool, (21, 40))
    b = rng.choice(pool, (40, 18))
    got = tilegemm.matmul(a, b, "fp16", isa="avx512_fp16")
    assert got.dtype == np.float16
    assert_bits(got, _ref(a, b, "fp16", "avx512_fp16"), "specials")
    c = rng.choice(pool, (21, 18))
    out = c.copy()
    tilegemm.matmul(a, b, "fp16", isa="avx512_fp16", out=out, accumulate=True)
    assert_bits(out, _ref(a, b, "fp16", "avx512_fp16", c), "accumulate from binary16 C")
    with pytest.raises(ValueError, match="out has dtype float32, but dtype 'fp16' returns float16"):
        tilegemm.matmul(a, b, "fp16", isa="avx512_fp16", out=np.zeros((21, 18), np.float32), accumulate=True)


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
@pytest.mark.parametrize("force_exact", [False, True])
def test_caller_ftz_daz_does_not_change_bits(force_exact, monkeypatch):
    if force_exact:
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args: False)
    rng = np.random.default_rng(16)
    runs = []
    for isa in ("fp32_fma", "avx512_fp16", "avx2", "avx512_vnni_sat"):
        for dtype, instr in instructions.PROFILES[isa].dtypes.items():
            a, b = instr.sample(20, 70, 19, rng)
            if instr.is_float:
                a = a * np.float32(2.0**-6)  # products near the bottom of binary16 and BF16 denormals
                a[0, :3] = [2.0**-133, -(2.0**-140), 2.0**-20]
            runs.append((a, b, dtype, isa))
    want = [tilegemm.matmul(a, b, d, isa=i, threads=1) for a, b, d, i in runs]
    before = get_mxcsr()
    with mxcsr_flags(FTZ | DAZ):
        got = [tilegemm.matmul(a, b, d, isa=i, threads=1) for a, b, d, i in runs]
        assert get_mxcsr() & (FTZ | DAZ) == FTZ | DAZ
    assert get_mxcsr() == before
    for g, w, (a, b, d, i) in zip(got, want, runs):
        assert_bits(g, w, f"{i} {d} under caller FTZ|DAZ")
        assert_bits(w, _ref(a, b, d, i), f"{i} {d}")


# -- the bodies compiled for other targets, run here -----------------------------------------

_CROSS = r"""
import sys, numpy as np, tilegemm
from tilegemm.kernels import targets
print(targets.target_class())
runs = np.load(sys.argv[1], allow_pickle=True)["runs"]
out = {}
for n, (a, b, c, dtype, isa) in enumerate(runs):
    acc = tilegemm.instructions.resolve(isa, dtype)[2].acc
    r = np.zeros((a.shape[0], b.shape[1]), acc) if c is None else c.copy()
    tilegemm.matmul(a, b, dtype, "2x2", isa=isa, out=r, accumulate=True, threads=1)
    out[f"r{n}"] = r
np.savez(sys.argv[2], **out)
"""


def _cross_runs(cases: str) -> list:
    """The operands each target runs: per profile, three shapes of sampled values, then an int32
    C near both ends of the range (integer profiles) or special values (float profiles)."""
    rng = np.random.default_rng(3)
    runs = []
    for case in cases.split(","):
        isa, d = case.split(":")
        instr = instructions.resolve(isa, d)[2]
        for m, k, n in [(37, 131, 45), (16, 64, 16), (5, 3, 7)]:
            a, b = instr.sample(m, k, n, rng)
            runs.append((a, b, None, d, isa))
            if instr.acc.kind == "i":
                c = rng.choice([2**31 - 5000, -(2**31) + 5000, 7], (m, n)).astype(np.int32)
                runs.append((a, b, c, d, isa))
            else:
                pool = np.array([0.0, -0.0, np.inf, np.nan, 2.0**-24, 60000.0, 1.0, -3.5, 2.0**-133])
                runs.append((rng.choice(pool, (m, k)), rng.choice(pool, (k, n)), None, d, isa))
        if instr.exact_sum:  # AMX-FP8: 2^-16 in every row of every step: every step rounds in binary32
            a, b = instr.sample(37, 20 * 64 + 17, 45, rng)
            a[:, ::64] = 2.0**-16
            runs.append((a * 8, b, None, d, isa))
    return runs


# Each body's other emitters (the float FMA body differs only in vector width, and the +128
# shift is applied before any emitter runs, so one dtype each is enough).
_TARGETS = {
    # AVX2 + FMA + F16C: VPMADDUBSW/VPMADDWD on ymm, F16C conversions, 8-wide float bodies.
    # AMX-FP8's binary32 body there holds C in memory (16 ymm; on 32-register hosts it holds C in
    # registers), as does the x86-64 one (xmm).
    "haswell": ("+sse4.2,+popcnt,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+movbe,+cx16", "avx2:s8s8,avx512_fp16:fp16,amx:bf8"),
    # AVX-512 without VNNI: VPDPBUSDS's portable form on 16 lanes.
    "skylake-avx512": (
        "+sse4.2,+popcnt,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+movbe,+cx16,+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl",
        "avx512_vnni_sat:u8s8",
    ),
    # x86-64 baseline: every body in generic IR, binary16 by integer operations.
    "x86-64": ("+64bit,+sse,+sse2,+cx8,+fxsr,+mmx,+cmov", "avx512_vnni_sat:s8s8,avx2:u8s8,avx512_fp16:fp16,amx:bf8"),
}


def _host_features() -> set[str]:
    import llvmlite.binding as llvm

    return {f for f in llvm.get_host_cpu_features().flatten().split(",") if f.startswith("+")}


# Each compiles its bodies in a fresh process with an empty cache for its target (20 to 60 s):
# the deep tier (pytest -m deep, run by CI).
@pytest.mark.deep
@pytest.mark.skipif(not X86, reason="runs x86 code compiled for other x86 targets")
@pytest.mark.parametrize("cpu", list(_TARGETS))
def test_bodies_for_other_targets(cpu, tmp_path):
    """The kernels compiled for ``cpu`` (a child process with ``NUMBA_CPU_NAME``) equal the
    reference, which runs here, compiled once for this host."""
    features, cases = _TARGETS[cpu]
    missing = sorted(set(features.split(",")) - _host_features())
    if missing:  # its code would fault here (SIGILL); tests/test_inspect.py still compiles it
        pytest.skip(f"this CPU lacks {','.join(missing)}: code compiled for {cpu} cannot run on it")
    runs = _cross_runs(cases)
    arr = np.empty(len(runs), object)
    arr[:] = runs
    np.savez(tmp_path / "runs.npz", runs=arr)
    env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features)
    args = [sys.executable, "-c", _CROSS, str(tmp_path / "runs.npz"), str(tmp_path / "out.npz")]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == {"haswell": "avx2", "skylake-avx512": "avx512", "x86-64": "generic"}[cpu]
    got = np.load(tmp_path / "out.npz")
    for n, (a, b, c, d, isa) in enumerate(runs):
        assert_bits(got[f"r{n}"], reference.matmul(a, b, d, c=c, isa=isa), f"{cpu}: {isa} {d} {a.shape} x {b.shape}")


def test_host_bodies_use_the_instructions_they_emulate():
    """Where the compile target has VPDPBUSDS / VPMADDUBSW / F16C, the bodies are those
    instructions (and FMAs stay vector FMAs); elsewhere the portable code runs (tested above)."""
    from tilegemm import inspect
    from tilegemm.kernels import targets

    have = targets.target_features()
    sat = inspect.asm("u8s8", "1x1", "avx512_vnni_sat")
    assert ("vpdpbusds" in sat) == ({"+avx512f", "+avx512bw", "+avx512vnni"} <= have)
    pairs = inspect.asm("s8s8", "1x1", "avx2")
    if "+avx2" in have:
        assert "vpmaddubsw" in pairs and ("vpmaddwd" in pairs or "vpdpwssd" in pairs)
    r = inspect.vector_report("bf16", "1x1", "fp32_fma")
    assert r.vectorized and r.scalar_fma == 0 and r.vector_fma >= 4 * 32


def test_fp16_accumulator_rounds_once_for_every_a(f16acc_family):
    """K = 1: every binary16 code as A against B values whose products land on binary16
    midpoints (0.75, 1.5 * 2^-10, ...) or overflow (2^15), with C = +-2^-24, the smallest
    subnormal, which decides those midpoints (the first worked example, 683/512 * 0.75 + 2^-24,
    is one of them), and C = +-65504, 2^-14, -0: one rounding of the exact a * b + c each."""
    a = np.arange(2**16, dtype=np.uint16).view(np.float16).reshape(-1, 1)
    b = np.float16([[0.75, 1.5 * 2**-10, -0.75, 2.0**15, 1.0, 2.0**-24, 1.25, -3.0]])
    c = np.float16([2.0**-24, -(2.0**-24), 65504.0, -65504.0, 2.0**-14, -0.0, 2.0**-24, 1.0])
    out = np.tile(c, (a.shape[0], 1))
    want = _ref(a, b, "fp16", "avx512_fp16", out.copy())
    tilegemm.matmul(a, b, "fp16", isa="avx512_fp16", out=out, accumulate=True)
    assert_bits(out, want, f"{f16acc_family}: every A code, K = 1")
    tie = np.float16(np.float32(a[0x3D56, 0]) * np.float32(0.75))  # 1 + 2^-11 through binary32: a tie
    assert tie == 1 and want[0x3D56, 0].view(np.uint16) == 0x3C01  # the exact sum is above it


def _nearest11_scan():
    """A compiled scan of binary32 codes through the IR of ``kernels.isa._nearest11`` (the
    rounding the FP16-accumulator body applies to lanes it does not send to the exact path),
    against round-to-nearest-even on 11 bits done on the codes: adding 0xFFF plus the last kept
    bit and clearing the 13 bits below it (a carry moves into the exponent, as it should)."""
    from numba import njit, types
    from numba.extending import intrinsic

    from tilegemm.kernels import isa as kisa

    width = kisa.F16.width
    vt = kisa._vec(kisa._F32, width)

    @intrinsic
    def round_lanes(typingctx, x):
        def codegen(context, builder, signature, args):
            p = context.make_array(signature.args[0])(context, builder, args[0]).data
            ptr = kisa._ptr(builder, p, kisa._const(0), vt)
            builder.store(kisa._nearest11(builder, builder.load(ptr, align=4), width), ptr, align=4)
            return context.get_dummy_value()

        return types.void(x), codegen

    @njit
    def scan(lo, hi, sign):
        buf = np.empty(width, np.float32)
        bits = buf.view(np.uint32)
        bad, first, checked = 0, -1, 0
        for start in range(lo, hi, width):
            for i in range(width):
                bits[i] = sign | min(start + i, hi - 1)
            round_lanes(buf)
            for i in range(width):
                b = min(start + i, hi - 1)
                if b & 0x1FFF == 0x1000:
                    continue  # a tie: the body sends it to the exact path
                checked += 1
                if np.int64(bits[i]) != sign | ((b + 0xFFF + ((b >> 13) & 1)) & ~0x1FFF):
                    bad += 1
                    if first < 0:
                        first = sign | b
        return bad, first, checked

    return scan


def test_the_fp16_accumulators_rounding_is_nearest_on_its_whole_range():
    """Every binary32 with 2^-14 <= |x| < 65520 that is no binary16 tie (about 500 million
    codes, both signs): the body's rounding gives binary16's rounding of it."""
    lo, hi = 0x38800000, 0x477FF000  # 2^-14, 65520
    rng = np.random.default_rng(17)
    sample = rng.integers(lo, hi, 200_000, dtype=np.uint32)
    sample = sample[(sample & 0x1FFF) != 0x1000]
    rounded = (sample.astype(np.int64) + 0xFFF + ((sample >> 13) & 1)) & ~0x1FFF
    # the code formula against numpy's binary16 conversion, so the scan's expectation is independent
    assert_bits(
        rounded.astype(np.uint32).view(np.float32),
        sample.view(np.float32).astype(np.float16).astype(np.float32),
        "11-bit rounding by codes",
    )
    scan = _nearest11_scan()
    for sign in (0, 0x80000000):
        bad, first, checked = scan(lo, hi, sign)
        assert checked == (hi - lo) - (hi - lo) // 0x2000
        assert bad == 0, f"{bad} codes round wrong, the first 0x{first:08X}"

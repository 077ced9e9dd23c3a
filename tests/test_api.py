"""matmul's contract as a user meets it: errors, out, threads, FP state, packing, installation."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading

import ml_dtypes
import numba
import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_bits, instr, operands
from fpenv import DAZ, FTZ, X86, get_mxcsr, mxcsr_flags
from hypothesis import given
from hypothesis import strategies as st

import tilegemm

A = np.ones((4, 3))
B = np.ones((3, 5))


# -- errors: each raised with its message, nothing written ----------------------------------


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (
            lambda: tilegemm.matmul(np.ones((2, 3)), np.ones((4, 5))),
            ValueError,
            r"inner dimensions .*\(2, 3\).*\(4, 5\)",
        ),
        (
            lambda: tilegemm.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 5))),
            ValueError,
            r"batch dimensions do not broadcast.*\(2, 2, 3\).*\(3, 3, 5\)",
        ),
        (lambda: tilegemm.matmul(np.float64(2.0), B), ValueError, r"0-d operands"),
        (
            lambda: tilegemm.matmul(A, B, dtype="fp8"),
            ValueError,
            r"unknown dtype 'fp8'; valid dtypes are bf16, fp16, s8s8",
        ),
        (lambda: tilegemm.matmul(A, B, tiling="4x4x"), ValueError, r"unknown tiling '4x4x'.*1x1, 1x2"),
        (
            lambda: tilegemm.matmul(np.full((2, 2), 200), np.ones((2, 2), int), "int8"),
            ValueError,
            r"operand a has values in \[200, 200\], outside the int8 range \[-128, 127\]",
        ),
        (
            lambda: tilegemm.matmul(np.ones((2, 2), int), np.full((2, 2), -1), "s8u8"),
            ValueError,
            r"operand b has values in \[-1, -1\], outside the uint8 range \[0, 255\]",
        ),
        (lambda: tilegemm.matmul(A.astype(complex), B), TypeError, r"operand a has dtype complex128"),
        (lambda: tilegemm.matmul(A.astype(object), B), TypeError, r"dtype object"),
        (lambda: tilegemm.matmul(A, B.astype(bool)), TypeError, r"operand b has dtype bool"),
        (lambda: tilegemm.matmul(np.array([["a"]]), np.array([["b"]])), TypeError, r"string"),
        (lambda: tilegemm.matmul(A, B, "int8"), TypeError, r"operand a has dtype float64.*quantize"),
        (lambda: tilegemm.matmul(A, B, threads=0), ValueError, r"threads must be >= 1, got 0"),
        (
            lambda: tilegemm.matmul(A, B, threads=10_000),
            ValueError,
            rf"threads=10000 exceeds Numba's configured maximum of {numba.config.NUMBA_NUM_THREADS}",
        ),
        (
            lambda: tilegemm.matmul(A, tilegemm.pack(B, "fp16"), "bf16"),
            ValueError,
            r"dtype 'bf16' on isa='amx' contradicts the packed B, which was packed for 'fp16'",
        ),
        (lambda: tilegemm.matmul(A, B, accumulate=True), ValueError, r"accumulate=True needs out="),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "make_out,match",
    [
        (lambda: np.zeros((4, 6), np.float32), r"out has shape \(4, 6\), but the result has shape \(4, 5\)"),
        (lambda: np.zeros((4, 5), np.float64), r"out has dtype float64, but dtype 'bf16' returns float32"),
        (lambda: np.zeros((5, 4), np.float32).T, r"out must be C-contiguous"),
    ],
)
def test_bad_out_is_untouched(make_out, match):
    out = make_out()
    before = out.copy()
    with pytest.raises(ValueError, match=match):
        tilegemm.matmul(A, B, out=out)
    assert np.array_equal(out, before)


def test_out_overlapping_an_operand():
    buf = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="out overlaps operand a"):
        tilegemm.matmul(buf, np.ones((4, 4)), out=buf)


def test_error_after_out_given_leaves_it_untouched():
    out = np.full((2, 2), 7, np.int32)
    with pytest.raises(ValueError, match="outside the int8 range"):
        tilegemm.matmul(np.full((2, 2), 300), np.ones((2, 2), int), "int8", out=out, accumulate=True)
    assert np.all(out == 7)


# -- dtypes accepted at the boundary --------------------------------------------------------


def test_input_dtypes_round_once():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 30))
    y = rng.standard_normal((30, 10))
    want = tilegemm.matmul(x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16))
    assert_bits(tilegemm.matmul(x, y), want, "float64 -> bf16 once")
    x32 = x.astype(np.float32)
    assert_bits(tilegemm.matmul(x32, y), tilegemm.matmul(x32.astype(ml_dtypes.bfloat16), y), "float32")
    assert_bits(
        tilegemm.matmul(x.astype(np.float16), y, "fp16"),
        tilegemm.matmul(x.astype(np.float16), y.astype(np.float16), "fp16"),
        "float16 as is",
    )
    ints = rng.integers(-300, 300, (20, 30))
    assert_bits(tilegemm.matmul(ints, y), tilegemm.matmul(ints.astype(np.float64), y), "integers as bf16")


def test_dtype_defaults():
    p = tilegemm.pack(np.ones((3, 2), np.int8), "u8s8")
    assert tilegemm.matmul(np.ones((1, 3), np.uint8), p).dtype == np.int32
    assert tilegemm.matmul(A, B).dtype == np.float32
    assert set(tilegemm.DTYPES) >= {"bf16", "fp16", "int8", "s8s8", "s8u8", "u8s8", "u8u8"}
    assert {"1x1", "2x2", "2x3", "3x2", "1x6", "6x1"} <= set(tilegemm.TILINGS)


# -- PackedB ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_packed_layout_and_roundtrip(dtype):
    rng = np.random.default_rng(4)
    _, b = operands(dtype, (1, 1), (70, 40), rng)
    fmt = instr(dtype)
    p = tilegemm.pack(b, dtype)
    assert p.shape == (70, 40) and p.dtype == dtype
    kb, nb = -(-70 // fmt.k_step), -(-40 // 16)
    assert p.data.shape == (kb, nb, 16, 64) and p.data.dtype == np.uint8
    # VNNI, docs/semantics.md section 2: block (kb, nb), row r, element g*n + j holds B[kb*step + g*r + j][16*nb + n].
    el = p.data.view(fmt.b.element)
    g = fmt.group
    bel = fmt.b.to_element(b, "b", dtype)
    for kbi, nbi, r, n, j in [(0, 0, 0, 0, 0), (0, 1, 3, 5, min(1, g - 1)), (1, 2, 2, 7, g - 1)]:
        k = kbi * fmt.k_step + g * r + j
        col = 16 * nbi + n
        want = bel[k, col] if k < 70 and col < 40 else 0
        assert el[kbi, nbi, r, g * n + j].tobytes() == np.asarray(want, fmt.b.element).tobytes()
    assert np.array_equal(p.unpack().view(np.uint8), bel.view(np.uint8))
    q = pickle.loads(pickle.dumps(p))
    assert q.shape == p.shape and q.dtype == p.dtype and np.array_equal(q.data, p.data)
    a, _ = operands(dtype, (9, 70), (1, 1), rng)
    assert_bits(tilegemm.matmul(a, q), tilegemm.matmul(a, b, dtype), "pickled PackedB")


# -- threads and concurrency -----------------------------------------------------------------


def test_threads_restored_and_identical():
    rng = np.random.default_rng(6)
    a, b = operands("bf16", (100, 90), (90, 70), rng)
    before = numba.get_num_threads()
    r1 = tilegemm.matmul(a, b, threads=1)
    assert numba.get_num_threads() == before
    r2 = tilegemm.matmul(a, b, threads=numba.config.NUMBA_NUM_THREADS)
    assert_bits(r1, r2, "threads")


def test_concurrent_callers():
    rng = np.random.default_rng(8)
    jobs = [operands(d, (70, 65), (65, 50), rng) + (d,) for d in ("bf16", "fp16", "s8s8", "u8u8") * 3]
    want = [tilegemm.reference.matmul(a, b, d) for a, b, d in jobs]
    got = [None] * len(jobs)
    errors = []

    def work(i):
        try:
            a, b, d = jobs[i]
            for _ in range(3):
                got[i] = tilegemm.matmul(a, b, d, threads=1 + i % numba.config.NUMBA_NUM_THREADS)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for g, w in zip(got, want):
        assert_bits(g, w, "concurrent")


# -- the caller's floating-point state -------------------------------------------------------


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
@pytest.mark.parametrize("force_exact", [False, True])
def test_caller_ftz_daz_does_not_change_bits(force_exact, monkeypatch):
    from cases import CASES

    from tilegemm import plan

    if force_exact:
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args: False)
        monkeypatch.setattr(plan, "FORCED_PATH", "exact")
    rng = np.random.default_rng(10)
    a, b = operands("bf16", (40, 70), (70, 30), rng)
    runs = [(a, b, "bf16"), (a, b, "fp16")] + [(np.array(c[2]), np.array(c[3]), c[1]) for c in CASES]
    want = [tilegemm.matmul(x, y, d, threads=1) for x, y, d in runs]
    before = get_mxcsr()
    with mxcsr_flags(FTZ | DAZ):
        got = [tilegemm.matmul(x, y, d, threads=1) for x, y, d in runs]
        assert get_mxcsr() & (FTZ | DAZ) == FTZ | DAZ  # still the caller's, untouched
    assert get_mxcsr() == before
    for g, w in zip(got, want):
        assert_bits(g, w, "under caller FTZ|DAZ")


# -- installation layout ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_kernels_subpackage_is_the_kernels_folder(where, tmp_path):
    """From the repository root (the source tree shadows any install) and from elsewhere (the
    installed or editable package), tilegemm.kernels is the repository's kernels/ folder, and no
    top-level package named kernels exists."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import importlib.util, os, tilegemm.kernels.gemm as k; "
        "print(os.path.realpath(k.__file__)); print(importlib.util.find_spec('kernels'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cwd = root if where == "root" else tmp_path
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    installed = os.path.join(os.path.dirname(os.path.realpath(tilegemm.__file__)), "kernels", "gemm.py")
    assert out[0] in (os.path.realpath(os.path.join(root, "kernels", "gemm.py")), os.path.realpath(installed))
    if where == "elsewhere":
        assert out[1] == "None"  # nothing installs a top-level `kernels` package


def test_regular_install_maps_kernels_into_the_package(tmp_path):
    """A wheel holds tilegemm/kernels/..., never a top-level kernels/, and imports from there."""
    import zipfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", root, "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
        env=dict(os.environ, TILEGEMM_PRECOMPILE="0"),  # the layout only (tests/test_precompile.py builds one)
    )
    (wheel,) = tmp_path.glob("tilegemm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tilegemm/kernels/gemm.py" in names
    assert not any(n.startswith("kernels/") for n in names)
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = dict(os.environ, PYTHONPATH=str(target), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-c", "import tilegemm.kernels as k; print(k.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == str(target / "tilegemm" / "kernels" / "__init__.py")


# -- properties ------------------------------------------------------------------------------


@given(
    dtype=st.sampled_from(ALL_DTYPES),
    m=st.integers(1, 40),
    n=st.integers(1, 40),
    k=st.integers(0, 70),
    seed=st.integers(0, 2**32 - 1),
    tiling=st.sampled_from(tilegemm.TILINGS + ("auto",)),
    scale=st.sampled_from([1.0, 2.0**-50, 2.0**60]),
)
def test_property_matches_reference(dtype, m, n, k, seed, tiling, scale):
    rng = np.random.default_rng(seed)
    a, b = operands(dtype, (m, k), (k, n), rng)
    if dtype in ("bf16", "fp16"):
        a = a * scale
    want = tilegemm.reference.matmul(a, b, dtype)
    got = tilegemm.matmul(a, b, dtype, tiling)
    assert_bits(got, want, f"seed={seed} dtype={dtype} tiling={tiling} M,N,K={m},{n},{k} scale={scale}")

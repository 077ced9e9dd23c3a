"""``tilegemm.matmul(backend=...)``: which backend runs, and the errors where native cannot."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_bits, instr, operands

import tilegemm
from tilegemm import native


def test_default_is_the_emulation():
    assert inspect.signature(tilegemm.matmul).parameters["backend"].default == "emulated" == native.BACKENDS[0]
    assert native.select("emulated", instr("bf16")) is None


@pytest.mark.parametrize("bad", ["silicon", "", None, 1])
def test_unknown_backend_is_an_error_before_any_write(bad):
    out = np.full((2, 2), 7.0, np.float32)
    with pytest.raises(ValueError, match=r"backend must be one of 'emulated', 'native', 'auto', got "):
        tilegemm.matmul(np.ones((2, 3)), np.ones((3, 2)), out=out, backend=bad)
    assert (out == 7.0).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_native_runs_or_names_what_is_missing(dtype):
    """Where this CPU can run the instruction, native gives the emulation's bits; where it
    cannot, NativeUnavailable names the missing flags (or the refused permission) and ``out``
    is left as it was."""
    i = instr(dtype)
    a, b = operands(dtype, (20, 40), (40, 20), np.random.default_rng(len(dtype)))
    want = tilegemm.matmul(a, b, dtype)
    out = np.full((20, 20), 3, i.acc)
    missing = native.lacks(i)
    if missing:
        with pytest.raises(
            native.NativeUnavailable,
            match=rf"cannot run {re.escape(i.mnemonic)} here: .* lacks {re.escape(missing[0])}",
        ):
            tilegemm.matmul(a, b, dtype, out=out, backend="native")
        assert (out == 3).all()
        return
    if not native.usable(i):  # the kernel refused tile permission: the error says so
        with pytest.raises(native.NativeUnavailable, match="refused tile data permission"):
            tilegemm.matmul(a, b, dtype, out=out, backend="native")
        return
    tilegemm.matmul(a, b, dtype, out=out, backend="native")
    assert_bits(out, want, f"native {dtype}")


@pytest.mark.parametrize("isa,dtype", [("amx", d) for d in ALL_DTYPES] + [("avx512", "bf16")])
def test_auto_always_gives_the_emulation_bits(isa, dtype):
    i = instr(dtype, isa)
    a, b = operands(dtype, (17, 70), (70, 33), np.random.default_rng(9), isa=isa)
    got = tilegemm.matmul(a, b, dtype, isa=isa, backend="auto")
    assert_bits(got, tilegemm.matmul(a, b, dtype, isa=isa), f"auto {isa} {dtype}")
    assert native.select("auto", i) is (native.gemm.HOST if native.usable(i) else None)


def test_amx_native_is_refused_on_a_cpu_without_amx():
    """This machine's answer, stated: without amx_tile, native TDPBF16PS is refused by name."""
    if "amx_tile" in native.this_host().flags:
        pytest.skip("this CPU has AMX: the refusal cannot happen here")
    with pytest.raises(native.NativeUnavailable) as info:
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="native")
    assert "amx_tile" in info.value.missing and "amx_bf16" in info.value.missing
    assert "use backend='emulated' (the default) or 'auto'" in str(info.value)
    with pytest.raises(native.NativeUnavailable, match="TileUnit"):
        tilegemm.amx.TileUnit(native=True)

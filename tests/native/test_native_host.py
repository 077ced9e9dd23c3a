"""CPU detection, the kernel's tile permission, and what a host lacks for each instruction.

Nothing here runs a tile instruction. Where the answer depends on the machine, the test checks
the answer this machine must give (from /proc/cpuinfo), whichever it is.
"""

from __future__ import annotations

import errno

import pytest

from tilegemm import instructions, native
from tilegemm.native import gemm
from tilegemm.native import host as H

I = instructions.INSTRUCTIONS
HOST = H.this_host()
HAS_AMX = "amx_tile" in HOST.flags

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
bugs\t\t: spectre_v1

processor\t: 1
model name\t: should not be read
flags\t\t: fpu
"""


def test_parse_cpuinfo_reads_the_first_processor():
    model, flags = H.parse_cpuinfo(CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    assert flags == {"fpu", "sse2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}
    assert H.parse_cpuinfo("") == ("unknown CPU", frozenset())


def test_host_is_read_from_proc_cpuinfo():
    with open("/proc/cpuinfo") as f:
        model, flags = H.parse_cpuinfo(f.read())
    assert HOST.flags == flags and HOST.model == model
    assert HOST.lacks(("fpu", "no_such_flag", "amx_tile")) == ("no_such_flag",) + (() if HAS_AMX else ("amx_tile",))


def test_what_each_instruction_needs():
    assert native.needs(I["TDPBF16PS"]) == ("amx_tile", "amx_bf16")
    assert native.needs(I["TDPFP16PS"]) == ("amx_tile", "amx_fp16")
    assert all(native.needs(I[m]) == ("amx_tile", "amx_int8") for m in ("TDPBSSD", "TDPBSUD", "TDPBUSD", "TDPBUUD"))
    assert native.needs(I["VDPBF16PS"]) == ("avx512_bf16",)
    for instr in I.values():
        if gemm.generator(instr) is None:  # e.g. complex FP16 pairs: no native program yet
            assert native.lacks(instr) == (f"a native program for {instr.mnemonic}",)
        else:
            assert native.lacks(instr) == HOST.lacks(native.needs(instr))


def test_permission_answer_matches_the_cpu():
    """A CPU without AMX: the kernel refuses, with errno and the offered features in the
    message, and nothing is granted. A CPU with it: permission is granted and stays granted."""
    if HAS_AMX:
        H.request_tile_permission()
        assert H.tile_permission()
        return
    with pytest.raises(H.NativeUnavailable) as info:
        H.request_tile_permission()
    msg = str(info.value)
    assert "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA=18)" in msg
    assert "failed with E" in msg and "XTILEDATA (bit 18)" in msg
    assert info.value.missing and info.value.missing[0].startswith("tile data permission (E")
    assert not H.tile_permission()


@pytest.mark.parametrize(
    "offer,words", [(0x602E7, "0x602e7, which include XTILEDATA"), (0x2E7, "0x2e7, which lack XTILEDATA")]
)
def test_permission_message_names_errno_and_offer(monkeypatch, offer, words):
    """The message as built from the kernel's answers (EINVAL, and the features it offers)."""
    import ctypes

    calls = []

    def fake(option, arg):
        calls.append(option)
        if option == H.ARCH_GET_XCOMP_SUPP:
            ctypes.c_uint64.from_address(arg).value = offer
            return 0, 0
        return -1, errno.EINVAL

    monkeypatch.setattr(H, "_arch_prctl", fake)
    with pytest.raises(
        H.NativeUnavailable, match=rf"failed with EINVAL \(Invalid argument\); the kernel offers XSAVE features {words}"
    ):
        H.request_tile_permission()
    assert calls == [H.ARCH_REQ_XCOMP_PERM, H.ARCH_GET_XCOMP_SUPP]


def test_permission_refused_for_a_small_signal_stack(monkeypatch):
    monkeypatch.setattr(H, "_arch_prctl", lambda option, arg: (-1, errno.ENOSPC))
    with pytest.raises(H.NativeUnavailable, match=r"ENOSPC .*alternate signal stack is too small .*bpo-46968"):
        H.request_tile_permission()


def test_require_names_what_is_missing():
    for instr in I.values():
        missing = native.lacks(instr)
        if missing:
            with pytest.raises(native.NativeUnavailable) as info:
                native.require(instr)
            assert info.value.missing == missing
            assert f"cannot run {instr.mnemonic} here: this CPU ({HOST.model}) lacks {', '.join(missing)}" in str(
                info.value
            )
            assert not native.usable(instr)
    if not HAS_AMX:
        assert native.lacks(I["TDPBF16PS"]) == ("amx_tile", "amx_bf16")

"""What this machine offers for native execution: CPU flags, and the kernel's tile permission.

CPU flags are read from ``/proc/cpuinfo`` only, never from CPUID. Linux lists a feature there
only when it also manages the register state the feature needs (``arch/x86/kernel/fpu/xstate.c``
clears ``amx_tile`` when XSAVE does not cover tile data), which is the question that matters for
running code; the instruction records' ``cpu_flag`` fields use the same names; and reading a file
needs no machine code, so detection can never fault. Native execution is Linux on x86-64 only:
the tile permission below is a Linux system call. On another architecture the host lists no
flags, whatever /proc/cpuinfo holds (under qemu-user it is the x86 host's file).

Tile data (XSAVE component 18, XTILEDATA) is enabled in XCR0 on Linux, but a process's first
tile instruction faults unless the process asked for it with
``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`` (the kernel's
``Documentation/arch/x86/xstate.rst``). The permission is process-wide; tilegemm still asks in
every worker thread before that thread runs a tile instruction (the request is idempotent and
costs one system call), so no thread depends on another having asked first.

This module must not execute any instruction the CPU may lack.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
from dataclasses import dataclass

__all__ = [
    "NativeUnavailable",
    "Host",
    "this_host",
    "parse_cpuinfo",
    "request_tile_permission",
    "tile_permission",
    "ARCH_GET_XCOMP_SUPP",
    "ARCH_GET_XCOMP_PERM",
    "ARCH_REQ_XCOMP_PERM",
    "XFEATURE_XTILEDATA",
]

# <asm/prctl.h> and the x86-64 system call table.
ARCH_GET_XCOMP_SUPP = 0x1021
ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
SYS_ARCH_PRCTL = 158  # x86-64

#: The flag every tile instruction needs besides its own (LDTILECFG, TILELOADD ... are AMX-TILE).
TILE_FLAG = "amx_tile"


class NativeUnavailable(RuntimeError):
    """Native execution was asked for but this machine cannot do it.

    ``missing`` lists what is missing: CPU flags (``"amx_bf16"``), or a sentence for the
    operating system or the kernel's permission.
    """

    def __init__(self, what: str, missing: tuple[str, ...] = ()):
        self.missing = tuple(missing)
        super().__init__(what)


@dataclass(frozen=True)
class Host:
    """The CPU as Linux describes it: ``model`` name and ``flags`` from /proc/cpuinfo, and the
    operating system and architecture (``platform.system()``, ``platform.machine()``)."""

    model: str
    flags: frozenset[str]
    system: str
    machine: str

    @property
    def supported_os(self) -> bool:
        return self.system == "Linux" and self.machine in ("x86_64", "AMD64")

    def lacks(self, flags) -> tuple[str, ...]:
        """The flags of ``flags`` this CPU does not list, in the order given."""
        return tuple(f for f in flags if f not in self.flags)


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """``(model name, flags)`` of the first processor in /proc/cpuinfo text."""
    model, flags = "unknown CPU", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key == "flags":
            flags = frozenset(value.split())
            break
    return model, flags


@functools.cache
def this_host() -> Host:
    """This machine (read once per process)."""
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        # The "flags" line is x86's (AArch64 Linux lists "Features"; macOS has no /proc), and
        # under qemu-user /proc/cpuinfo is the x86 host's, whose flags this process cannot use.
        return Host(platform.processor() or machine, frozenset(), platform.system(), machine)
    try:
        with open("/proc/cpuinfo") as f:
            model, flags = parse_cpuinfo(f.read())
    except OSError:
        model, flags = platform.processor() or "unknown CPU", frozenset()
    return Host(model, flags, platform.system(), machine)


def _arch_prctl(option: int, arg) -> tuple[int, int]:
    """``syscall(SYS_arch_prctl, option, arg)`` through libc: (return value, errno)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    fn.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p)
    ctypes.set_errno(0)
    rc = fn(SYS_ARCH_PRCTL, option, arg)
    return int(rc), ctypes.get_errno()


def _mask(option: int) -> int | None:
    """The feature bitmap ARCH_GET_XCOMP_SUPP / _PERM stores, or None where the call fails."""
    value = ctypes.c_uint64(0)
    rc, _ = _arch_prctl(option, ctypes.addressof(value))
    return int(value.value) if rc == 0 else None


def tile_permission() -> bool:
    """Whether this process may use tile data now (ARCH_GET_XCOMP_PERM has bit 18)."""
    if not this_host().supported_os:
        return False
    mask = _mask(ARCH_GET_XCOMP_PERM)
    return mask is not None and bool(mask >> XFEATURE_XTILEDATA & 1)


def request_tile_permission() -> None:
    """Ask the kernel for tile data in this process; :class:`NativeUnavailable` if it refuses.

    The message names the call, the errno and what the kernel offers (ARCH_GET_XCOMP_SUPP).
    """
    h = this_host()
    if not h.supported_os:
        raise NativeUnavailable(
            f"native tile instructions need Linux on x86-64; this is {h.system} on {h.machine}",
            (f"Linux x86-64 (this is {h.system} {h.machine})",),
        )
    rc, err = _arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    if rc == 0:
        return
    name = errno.errorcode.get(err, str(err))
    supp = _mask(ARCH_GET_XCOMP_SUPP)
    offered = (
        "the kernel does not support ARCH_GET_XCOMP_SUPP (Linux before 5.16?)"
        if supp is None
        else f"the kernel offers XSAVE features {supp:#x}, "
        + ("which include" if supp >> XFEATURE_XTILEDATA & 1 else "which lack")
        + f" XTILEDATA (bit {XFEATURE_XTILEDATA})"
    )
    if err == errno.ENOSPC:  # the kernel checks every thread's sigaltstack against the larger frame
        offered += (
            "; a thread's alternate signal stack is too small for signal frames with tile data "
            "(CPython's faulthandler sizes it from AT_MINSIGSTKSZ since bpo-46968)"
        )
    raise NativeUnavailable(
        f"the kernel refused tile data permission: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA="
        f"{XFEATURE_XTILEDATA}) failed with {name} ({os.strerror(err)}); {offered}",
        (f"tile data permission ({name})",),
    )

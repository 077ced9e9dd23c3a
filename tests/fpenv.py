"""Read and write the calling thread's MXCSR, to show results do not depend on it.

Test-only: ``stmxcsr`` / ``ldmxcsr`` through a Numba intrinsic (x86-64 only).
"""

from __future__ import annotations

import platform
from contextlib import contextmanager

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

FTZ = 1 << 15
DAZ = 1 << 6
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _csr_fn(builder, name):
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()])
    return cgutils.get_or_insert_function(builder.module, fnty, name)


@intrinsic
def _stmxcsr(typingctx):
    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        builder.call(_csr_fn(builder, "llvm.x86.sse.stmxcsr"), [builder.bitcast(slot, ir.IntType(8).as_pointer())])
        return builder.load(slot)

    return types.uint32(), codegen


@intrinsic
def _ldmxcsr(typingctx, value):
    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        builder.store(args[0], slot)
        builder.call(_csr_fn(builder, "llvm.x86.sse.ldmxcsr"), [builder.bitcast(slot, ir.IntType(8).as_pointer())])
        return context.get_dummy_value()

    return types.none(types.uint32), codegen


@njit
def get_mxcsr():
    return _stmxcsr()


@njit
def set_mxcsr(v):
    _ldmxcsr(v)


@contextmanager
def mxcsr_flags(flags):
    """Set ``flags`` in this thread's MXCSR for the block, then restore the old value."""
    old = get_mxcsr()
    set_mxcsr(old | flags)
    try:
        yield
    finally:
        set_mxcsr(old)

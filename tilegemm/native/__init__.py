"""Native execution: the emulated instructions run on this CPU's own silicon, where it has them.

What a host can run is decided from ``/proc/cpuinfo`` and, for tile instructions, the kernel's
tile permission (:mod:`tilegemm.native.host`); nothing here executes an instruction the CPU
lacks. :mod:`tilegemm.native.program` holds the tile programs and the LLVM IR made from them,
:mod:`tilegemm.native.jit` compiles IR with llvmlite. This package imports llvmlite only when
something is compiled.
"""

"""tilegemm's compiled microkernels (installed as ``tilegemm.kernels``). Nothing else lives here.

- ``families.py``: the kernel families, declared once as data (entries, body, layouts, register
  blocking by target class), and the constants every body shares; no Numba.
- ``gemm.py``: the one driver, ``drive`` (superblocks, or rows of superblocks for the variants
  registered so, shared out among the workers), and the entry points of the families declared
  in ``families.py``.
- ``tiles.py``: one tile multiply per body, chosen at compile time by its variant, and the
  registry of chunk-of-steps bodies.
- ``vector.py``: the register-blocked vector bodies, as explicit LLVM vector IR.
- ``exact.py``: scalar binary32 ``fma32``/``add32`` with FTZ, exact on any CPU state; the 8-bit
  float decode (``fp8_fix``) and the exact integer-to-binary32 rounding (``round_scaled``).
- ``cfp16.py``, ``fp8.py``: the AMX-COMPLEX and AMX-FP8 tile multiplies (fast and exact bodies;
  AMX-FP8 also in binary32, each step checked through MXCSR's precision flag).
- ``ace.py``: the ACE outer products, C rounded after every rank-4 (rank-2) step.
- ``isa.py``: the other CPUs' paths (VPDPBUSDS, VPMADDUBSW, VFMADD231PS, VFMADD231PH): their tile
  bodies and IEEE ``fma32_ieee``/``fma16`` without flushes.
- ``targets.py``: the per-target table of the blocked drivers, the target classes, and the
  families that run an instruction itself where the target has it.
- ``blocked.py``, ``bodies.py``: the blocked GEMM drivers (B read as packed, the proof per block)
  and their register-blocked bodies.
- ``rounding.py``, ``onednn.py``: the 16-bit float conversions on bit patterns, and oneDNN's
  brgemm epilogue operations; ``_cache.py``: where compiled code is cached.
- ``aten.py``: PyTorch's own bf16 gemm kernels (an AVX2 server, and small products on every
  server), each output one float32 dot product in the order of the kernel PyTorch picks;
  ``gemm_jit.py``: oneDNN's gemm:jit kernels for bf16 on AVX-512 without AVX512_BF16 (the gemm
  kernel's K blocks of emulated VDPBF16PS pairs, and its two gemv kernels), element by element.
- A module of its own per family whose body is new, named as its family and declaring it there
  (``families.get`` finds it by name; ``python -m tilegemm info`` lists every family).

The contract of the GEMM entry points (``docs/architecture.md``, "The microkernel contract"; the
framework in ``tilegemm/`` prepares the operands and looks the kernel up in ``tilegemm.dispatch``;
a kernel never converts, packs or checks input):

``gemm_*(w, nw, A, B, C, ia, ib, k, rows, cols, *switch_codes)``, which calls
``gemm.drive(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw)``.

- ``w``, ``nw``: this call is worker ``w`` of ``nw``; it runs its own share of the superblocks
  (``gemm.share``) and returns. Entries are compiled with ``nogil=True`` and
  ``tilegemm.workers.run`` calls all ``nw`` at once on threads, never Numba's ``prange``, which
  compiles the whole kernel once more (``tilegemm/workers.py`` says why).
- ``A``: ``(nA, M_tiles, KB, 16, k_step)`` C-contiguous panels (one 16-row tile of A per K
  step), in the family's A layout (``tilegemm.layouts``), zero-padded along M and K.
- ``B``: ``(nB, NB, KB, 16, ...)`` C-contiguous, column panels first (``PackedB.kernel_b``), in
  the family's B layout: the packed VNNI bytes ``[quad][n][4]`` (``"bytes"``), exact float32
  ``[pair][even/odd][n]`` (``"f32"``; ``[k][n]`` for groups of one), binary16 codes (``"f16"``),
  the 8-bit floats' exact values in binary64 or binary32 (``"f64"``, ``"fp8_32"``), or ACE's MX
  values times their block scales (``"mx64"``, ``"mx32"``, ``"mx32c"`` with a bound per step).
- ``C``: ``(nC, M, N)`` C-contiguous float32/int32 holding the starting values (zeros, or the
  caller's C, already read with DAZ where the instruction does so; complex results as
  ``(nC, M, 2N)`` interleaved float32). Updated in place: ``C[i] += A[ia[i]] @ B[ib[i]]``.
- ``k``: the true K (the tail rule, docs/semantics.md section 6, needs it).
- ``rows``, ``cols``: the tiling, in C tiles of 16 x 16 per superblock (one of ``tilegemm.TILINGS``).
- ``switch_codes``: the indices of the instruction's switch values, where it has switches.
- ``*_exact``: scalar arithmetic for any input; ``*_fast``: vector code, valid where the
  family's layout proof (``tilegemm.plan.fast_path_ok``) holds for the operands' ranges.

Every tiling and thread count gives the same bits because each C element's arithmetic is fixed by
docs/semantics.md, not by the visiting order.
"""

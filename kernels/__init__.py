"""tilegemm's compiled microkernels (installed as ``tilegemm.kernels``). Nothing else lives here.

- ``gemm.py``: the tile loop (superblocks in ``prange``), shared by every instruction; for the
  binary64 AMX-FP8 and ACE MX paths on 32-register targets, rows of superblocks across N.
- ``tiles.py``: one tile multiply per instruction family, chosen at compile time by operand type.
- ``vector.py``: the register-blocked vector bodies, as explicit LLVM vector IR.
- ``exact.py``: scalar binary32 ``fma32``/``add32`` with DAZ/FTZ, exact on any CPU state; the
  8-bit float decode (``fp8_fix``) and the exact integer-to-binary32 rounding (``round_scaled``).
- ``cfp16.py``, ``fp8.py``: the AMX-COMPLEX and AMX-FP8 tile multiplies (fast and exact bodies;
  AMX-FP8 also in binary32, each step checked through MXCSR's precision flag).
- ``ace.py``: the ACE outer products, C rounded after every rank-4 (rank-2) step: the MX forms in
  binary64 and, for MXINT8, in binary32; TOP2BF16PS in binary32 (fast and exact bodies).
- ``targets.py``: register blocking per target, the one table the bodies take their shapes from,
  and the families that run an instruction itself where the target has it.
- ``blocked.py``, ``bodies.py``: the blocked GEMM drivers (B read as packed, the proof per block)
  and their register-blocked bodies.
- ``rounding.py``, ``onednn.py``: the 16-bit float conversions on bit patterns, and oneDNN's
  brgemm epilogue operations; ``_cache.py``: where compiled code is cached.
- ``isa.py``: the other CPUs' paths (``gemm_i8sat``, ``gemm_i16pairs``, ``gemm_f32fma_*``,
  ``gemm_f16acc``): their tile bodies and IEEE ``fma32_ieee``/``fma16`` without flushes.

The contract of the entry points in ``gemm.py`` (``gemm_amx_fast``, ``gemm_amx_exact``,
``gemm_avx512_fast``, ``gemm_avx512_exact``, ``gemm_int``, ``gemm_cfp16_*``, ``gemm_fp8_*``; the
framework in ``tilegemm/`` prepares the operands and looks the kernel up in ``tilegemm.dispatch``;
a kernel never converts, packs or checks input):

``gemm_*(A, B, C, ia, ib, k, rows, cols, *switch_codes)``

- ``A``: ``(nA, M_tiles, KB, 16, k_step)`` C-contiguous panels (one 16-row tile of A per K
  step, contiguous), the kernel element type (exact float32 values, or int8/uint8), zero-padded
  along M and K (``tilegemm.convert.pack_a_float`` / ``pack_a_int``).
- ``B``: ``(nB, NB, KB, 16, ...)`` C-contiguous, column panels first (``tilegemm.PackedB.kernel_b``): for int8 the
  packed VNNI bytes ``[quad][n][4]``; for floats exact float32 ``[pair][even/odd][n]``; for
  complex FP16 float32 ``[k][re/im][n]`` (A panels then hold (re, im) pairs, 2 * k_step values
  a row); for the 8-bit floats exact binary64 ``[k][n]`` (A panels binary64 too), or the same
  values in binary32 (``"fp8_32"``, the binary32 AMX-FP8 kernel ``gemm_fp8c_fast``); for ACE's
  MX forms the values times their block scales, binary64 ``[k][n]`` (``"mx64"``) or, MXINT8
  under its proof, binary32 (``"mx32"``), A panels alike; for the MX FP8 forms under theirs,
  binary32 with bounds (``"mx32c"``): B ``(nB, NB, KB, k_step + 1, 16, 1)``, each block's
  ``[k][n]`` rows then one row of a bound per outer product, and A panels ``(nA, M_tiles, KB,
  16, k_step + 16)``, each row's values then a bound per outer product (``tilegemm.ace``).
- ``C``: ``(nC, M, N)`` C-contiguous float32/int32 holding the starting values (zeros, or the
  caller's C already read with DAZ; complex results as ``(nC, M, 2N)`` interleaved float32).
  Updated in place: ``C[i] += A[ia[i]] @ B[ib[i]]``.
- ``switch_codes``: the indices of the instruction's switch values, where it has switches.
- ``k``: the true K (the tail rule, docs/semantics.md section 6, needs it).
- ``rows``, ``cols``: the tiling, in C tiles of 16 x 16 per superblock (``1, 1`` or ``2, 2``).
- ``*_exact``: scalar fma32/add32 with DAZ/FTZ, for any input; ``*_fast``: vector FMA code,
  valid only when ``tilegemm.dispatch.fast_path_ok`` has proven that no result can be tiny and no
  product can overflow (then plain FMA code gives the same bits).

Superblocks are distributed with ``prange``; every tiling and thread count gives the same bits
because each C element's arithmetic is fixed by docs/semantics.md, not by the visiting order.
"""

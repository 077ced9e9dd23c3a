"""tilegemm's compiled microkernels (installed as ``tilegemm.kernels``). Nothing else lives here.

The contract every GEMM kernel follows (the framework in ``tilegemm/`` prepares the operands and
looks the kernel up in ``tilegemm.dispatch``; a kernel never converts, packs or checks input):

``kernel(A, B, C, ia, ib, k, rows, cols, variant)``

- ``A``: ``(nA, M, KB * k_step)`` C-contiguous, the kernel element type (exact float32 values, or
  int8/uint8), zero-padded along K.
- ``B``: ``(nB, KB, NB, 16, 16, group)`` C-contiguous: the packed VNNI blocks in the same element
  type (``tilegemm.PackedB.kernel_b``).
- ``C``: ``(nC, M, N)`` C-contiguous float32/int32 holding the starting values (zeros, or the
  caller's C already read with DAZ). Updated in place: ``C[i] += A[ia[i]] @ B[ib[i]]``.
- ``k``: the true K (the tail rule of SEMANTICS.md needs it).
- ``rows``, ``cols``: the tiling, in C tiles of 16 x 16 per superblock (``1, 1`` or ``2, 2``).
- ``variant``: float kernels only; 0 = the exact path (scalar fma32/add32 with DAZ/FTZ, any
  input), 1 = the fast path, valid only when ``tilegemm.dispatch.fast_path_ok`` has proven that
  no result can be tiny and no product can overflow (then plain FMA code gives the same bits).

Superblocks are distributed with ``prange``; every tiling and thread count gives the same bits
because each C element's arithmetic is fixed by SEMANTICS.md, not by the visiting order.
"""

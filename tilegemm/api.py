"""``tilegemm.matmul``: check and convert operands once, pack B, look up the kernel, run it.

All validation happens before anything is written, so an error leaves ``out`` untouched. No
Python loop runs over tiles or elements here; the compiled kernels do that.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numba
import numpy as np

from . import convert, dispatch
from .formats import Format, daz, get_format
from .packing import PackedB, _pack_elements

__all__ = ["matmul"]

# Numba's workqueue threading layer aborts when two Python threads enter parallel code at once,
# and the per-call thread count is thread-local state: one lock around the kernel launch keeps
# concurrent callers safe whichever layer Numba picked. Each call already uses every worker.
_LAUNCH = threading.Lock()


def _matmul_shapes(a_shape, b_shape):
    """numpy.matmul's shape rules: (batch, M, K, N, result shape) or a ValueError."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"matmul: 0-d operands are not allowed (a has shape {a_shape}, b has shape {b_shape})")
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: inner dimensions do not match: a has shape {a_shape} and b has shape "
            f"{b_shape} (K = {a2[-1]} vs {b2[-2]})"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions do not broadcast: a has shape {a_shape} and b has shape {b_shape}"
        ) from None
    M, K, N = a2[-2], a2[-1], b2[-1]
    result = tuple(batch) + ((M,) if len(a_shape) > 1 else ()) + ((N,) if len(b_shape) > 1 else ())
    return a2, b2, tuple(batch), M, K, N, result


def _resolve_dtype(dtype, b) -> Format:
    if isinstance(b, PackedB):
        if dtype is not None and get_format(dtype).name != b.dtype:
            raise ValueError(f"dtype {dtype!r} contradicts the packed B, which was packed for {b.dtype!r}")
        return get_format(b.dtype)
    return get_format("bf16" if dtype is None else dtype)


def _check_out(out, result_shape, fmt: Format, operands) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != result_shape:
        raise ValueError(f"out has shape {out.shape}, but the result has shape {result_shape}")
    if out.dtype != fmt.out:
        raise ValueError(f"out has dtype {out.dtype}, but dtype {fmt.name!r} returns {fmt.out}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    for name, x in operands:
        if np.may_share_memory(out, x):
            raise ValueError(f"out overlaps operand {name}; pass a separate output array")


def _check_threads(threads) -> None:
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be an integer or None, got {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    limit = numba.config.NUMBA_NUM_THREADS
    if threads > limit:
        raise ValueError(f"threads={threads} exceeds Numba's configured maximum of {limit} (NUMBA_NUM_THREADS)")


@contextmanager
def _numba_threads(threads):
    """Run with ``threads`` workers (thread-local in Numba), restoring the previous count."""
    if threads is None:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(int(threads))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def _batch_index(shape, batch) -> np.ndarray:
    """For each matrix of the broadcast batch, which matrix of an operand with batch ``shape``."""
    n = int(np.prod(shape, dtype=np.int64))
    idx = np.arange(n, dtype=np.int64).reshape(shape)
    return np.array(np.broadcast_to(idx, batch), dtype=np.int64).ravel()  # writable: one kernel type


def matmul(a, b, dtype=None, tiling=None, *, out=None, accumulate=False, threads=None, isa="amx"):
    """Matrix product with the exact bits of an Intel AMX tile-multiply sequence.

    Parameters
    ----------
    a : array_like, (..., M, K) or (K,)
        Left operand. Floats and integers for ``"bf16"``/``"fp16"`` (rounded once, RNE, to the
        format); ``ml_dtypes.bfloat16`` or ``numpy.float16`` arrays are taken as they are.
        Integers within the 8-bit range of the operand's signedness for the int8 dtypes.
    b : array_like (..., K, N) or (K,), or PackedB
        Right operand, or B already packed with :func:`tilegemm.pack`.
    dtype : str, optional
        ``"bf16"`` (TDPBF16PS), ``"fp16"`` (TDPFP16PS), ``"int8"``/``"s8s8"`` (TDPBSSD),
        ``"s8u8"`` (TDPBSUD), ``"u8s8"`` (TDPBUSD), ``"u8u8"`` (TDPBUUD). Default: the packed
        B's dtype, else ``"bf16"``.
    tiling : str, optional
        ``"RxC"``: R accumulator tiles along M by C along N per superblock, any of
        :data:`tilegemm.TILINGS` (``R*C + 2 <= 8``; ``"1x1"`` and ``"2x2"`` are the seed's), or
        ``"auto"`` (:func:`tilegemm.dispatch.auto_tiling`). Default ``"2x2"``. The bits never
        depend on it.
    out : numpy.ndarray, optional
        C-contiguous float32/int32 array of the result's shape to write into.
    accumulate : bool
        Continue the AMX chain from ``out`` (``C += A @ B``) instead of from +0.
    threads : int, optional
        Worker threads for this call only (default: Numba's current setting).
    isa : {"amx", "avx512"}
        ``"amx"`` emulates the tile multiply named by ``dtype``. ``"avx512"`` (bf16 only) emulates
        the seed's AVX-512 BF16 baseline, VDPBF16PS: one FP32 accumulator per element, each pair's
        odd product first. It has no tiles; ``tiling`` is accepted and only orders the blocks of
        C, which never changes a bit.

    Returns
    -------
    numpy.ndarray
        float32 (bf16, fp16) or int32 (int8 dtypes), shaped as ``numpy.matmul`` would.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> tilegemm.matmul(a, a)
    array([[ 7., 10.],
           [15., 22.]], dtype=float32)
    >>> tilegemm.matmul(np.int8([[1, -2]]), np.int8([[3], [4]]), dtype="int8")
    array([[-5]], dtype=int32)
    """
    fmt = _resolve_dtype(dtype, b)
    tiling = "2x2" if tiling is None else tiling
    if tiling != "auto":
        kernel = dispatch.lookup(isa, fmt, tiling)
    _check_threads(threads)
    if accumulate and out is None:
        raise ValueError("accumulate=True needs out= holding the C to accumulate into")

    packed = b if isinstance(b, PackedB) else None
    a = np.asarray(a)
    b_arr = None if packed is not None else np.asarray(b)
    b_shape = packed.shape if packed is not None else b_arr.shape
    a2, b2, batch, M, K, N, result_shape = _matmul_shapes(a.shape, b_shape)
    if tiling == "auto":
        kernel = dispatch.lookup(isa, fmt, dispatch.auto_tiling(M, N))

    # float32 to BF16/FP16 is rounded inside the compiled panel pass; everything else converts here.
    fast_f32 = fmt.is_float and a.dtype == np.float32
    a_el = a.reshape(a2) if fast_f32 else fmt.to_bits(a, "a").reshape(a2)
    if packed is None:
        b_el = fmt.to_bits(b_arr, "b", b_side=True).reshape(b2)
    if out is not None:
        operands = [("a", a)] + ([("b", packed.data)] if packed is not None else [("b", b_arr)])
        _check_out(out, result_shape, fmt, operands)
    # -- nothing above writes; from here on the inputs are valid ---------------------------
    if packed is None:
        packed = _pack_elements(fmt, b_el)

    C = out if out is not None else np.empty(result_shape, fmt.out)
    if not accumulate:
        C[...] = 0
    if K == 0 or C.size == 0:
        return C  # no instruction runs: C stays as it was (accumulate) or +0
    C3 = C.reshape((-1, M, N))
    if accumulate and fmt.is_float:
        np.copyto(C3, daz(C3))  # the first add reads a denormal C as zero (SEMANTICS.md)

    a_batch = a2[:-2]
    nA = int(np.prod(a_batch, dtype=np.int64))
    panels = (nA, -(-M // 16), packed.data.shape[-4], 16, fmt.k_step)
    a_range = None
    if fmt.is_float:
        A = np.zeros(panels, np.uint32)
        if fast_f32:  # float32 -> BF16/FP16 rounding fused into the panel pass
            mode = convert.MODE_F32_TO_BF16 if fmt.name == "bf16" else convert.MODE_F32_TO_FP16
            a_range = convert.pack_a_float(a.view(np.uint32).reshape(nA, M, K), mode, A)
        else:
            mode = convert.MODE_BF16 if fmt.name == "bf16" else convert.MODE_FP16
            a_range = convert.pack_a_float(a_el.reshape(nA, M, K), mode, A)
        A = A.view(np.float32)
        a_range = None if a_range[0] > a_range[1] else a_range
    else:
        A = np.zeros(panels, fmt.element)
        convert.pack_a_int(a_el.reshape(nA, M, K), A)
    B = packed.kernel_b()
    ia = _batch_index(a_batch, batch)
    ib = _batch_index(b2[:-2], batch)

    loop = kernel.fast
    if fmt.is_float:
        c_range = dispatch.exponent_range(C3) if accumulate else None
        if packed._stats is None:
            packed._stats = dispatch.exponent_range(B)
        if not dispatch.fast_path_ok(fmt, a_range, packed._stats, c_range):
            loop = kernel.exact

    with _LAUNCH, _numba_threads(threads):
        loop(A, B, C3, ia, ib, K, kernel.rows, kernel.cols)
    return C

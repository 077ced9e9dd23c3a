"""PyTorch's CPU bf16 matmul on x86 servers, bit for bit: the ``"onednn"`` profile.

On a Sapphire Rapids or later Xeon, PyTorch sends bf16 ``matmul``, ``mm``, ``bmm``, ``addmm``,
``baddbmm`` and ``linear`` to oneDNN's brgemm matmul (``brg_matmul:avx10_1_512_amx``). oneDNN
cuts each output's K sum into blocks whose size it chooses from the shape, the thread count and
the caches; each block is one chain of TDPBF16PS tile multiplies starting from zero, the block
results are added in float32, a bias (or ``addmm``'s input) is added in float32, and the sum is
rounded to bf16. This module computes exactly that:

- :func:`plan` (:mod:`~tilegemm.onednn.schedule`): oneDNN's decisions for a problem on a modelled
  :class:`Host`, from its blocking heuristics (:mod:`~tilegemm.onednn.blocking`).
- :func:`matmul` and :func:`linear`: the bf16 results, as ``torch.matmul`` / ``torch.bmm`` /
  ``torch.addmm`` / ``F.linear`` return them on that host. Each chain runs on tilegemm's AMX
  kernels; the float32 additions and the bf16 rounding run in compiled code on bit patterns.
- ``tilegemm.matmul(a, b, isa="onednn")`` is :func:`matmul` (see :func:`profile_matmul`).

The other server classes are hosts too (:data:`HOSTS`, ``docs/onednn.md``, "The fleet"): on an
``avx512_core_bf16`` host (AMD EPYC Zen 4/5) each chain is VDPBF16PS under oneDNN's AVX-512
blocking; on an ``avx2`` host, and for products of at most 16^3 multiply-adds on every host,
PyTorch runs its own kernels (:mod:`tilegemm.kernels.aten`), which :func:`plan` names.

``onednn_threads`` is the thread count oneDNN runs with on the modelled host (it changes the
bits); ``threads`` is tilegemm's own worker count here (it never does). ``docs/onednn.md`` has the
rules with the oneDNN source lines they follow, and what is and is not modelled.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..api import matmul as _tile_matmul
from ..formats import BF16, bf16_dtype, kernel_input
from ..instructions import PROFILES, Instruction, resolve
from ..kernels.onednn import bf16_keep_denormals, c10_bf16, vcvtneps2bf16, vfmadd
from ..packing import PackedB, pack_codes
from . import chains
from .blocking import Blocking
from .float32 import stored, vaddps
from .packing import pack_transposed
from .schedule import HOSTS, MODELLED_ISAS, RECORDING_HOST, Host, Plan, gemm_pieces, plan, rd_block

__all__ = [
    "Host",
    "Plan",
    "rd_block",
    "Blocking",
    "RECORDING_HOST",
    "HOSTS",
    "MODELLED_ISAS",
    "plan",
    "matmul",
    "linear",
    "problem_of",
    "compute",
    "profile_matmul",
    "vaddps",
    "pack_weights",
]

_OPTIONS = ("onednn_threads", "b_transposed", "host", "beta")


def _chain_isa(mnemonic: str) -> str:
    """The instruction profile whose kernels run one chain of ``mnemonic`` (not a library
    profile): ``"amx"`` for TDPBF16PS, ``"avx512"`` for VDPBF16PS."""
    for p in PROFILES.values():
        if p.library is None and any(i.mnemonic == mnemonic for i in p.dtypes.values()):
            return p.name
    raise LookupError(f"no instruction profile runs {mnemonic}")  # pragma: no cover


def _library_instruction() -> Instruction:
    for p in PROFILES.values():
        if p.library == "tilegemm.onednn:profile_matmul":
            return next(iter(p.dtypes.values()))
    raise LookupError("no profile runs tilegemm.onednn")  # pragma: no cover


_INSTR = _library_instruction()
_CHAIN_ISA = _chain_isa(_INSTR.mnemonic)


def problem_of(a_shape: tuple, b_shape: tuple) -> tuple[int, int, int, int, tuple]:
    """``(M, K, N, batch, result shape)`` of the oneDNN problem ``torch.matmul`` makes of operands
    with these shapes (no gradient needed, operands viewable as their folded shape):

    - 1-D @ 2-D: ``a.unsqueeze(0).mm(b)``, M = 1, the result squeezed;
    - 2-D @ 2-D: ``mm``;
    - N-D @ 2-D (N >= 3): folded into one ``mm`` of ``prod(a.shape[:-1])`` rows;
    - otherwise (B with a batch): ``bmm`` over the broadcast batch dimensions.

    A 1-D ``b`` is a matrix-vector product (``mv``), which oneDNN's brgemm matmul does not run
    the same way: ``ValueError``.
    """
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"onednn matmul: 0-d operands are not allowed (shapes {a_shape} and {b_shape})")
    if len(b_shape) == 1:
        raise ValueError(
            f"onednn matmul: a 1-D b (shape {b_shape}) is a matrix-vector product (torch.mv), which the "
            f"onednn profile does not model; give b as a (K, 1) matrix"
        )
    a2 = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    K, N = b_shape[-2], b_shape[-1]
    if a2[-1] != K:
        raise ValueError(
            f"onednn matmul: inner dimensions do not match: a has shape {a_shape} and b has shape {b_shape} "
            f"(K = {a2[-1]} vs {K})"
        )
    if len(b_shape) == 2:
        M = int(np.prod(a2[:-1], dtype=np.int64))
        result = tuple(a_shape[:-1]) + (N,)
        return M, K, N, 1, result
    try:
        batch = np.broadcast_shapes(a2[:-2], tuple(b_shape[:-2]))
    except ValueError:
        raise ValueError(
            f"onednn matmul: batch dimensions do not broadcast: a has shape {a_shape} and b has shape {b_shape}"
        ) from None
    M = a2[-2]
    result = tuple(batch) + ((M,) if len(a_shape) > 1 else ()) + (N,)
    return M, K, N, int(np.prod(batch, dtype=np.int64)), result


def _k_slice(packed: PackedB, k0: int, k1: int, isa: str) -> PackedB:
    """The packed B of rows ``k0:k1`` for the chain profile ``isa`` (TDPBF16PS and VDPBF16PS read
    the same tile-blocked layout): a view of whole K blocks when the range starts on a block and
    ends on one or at K (always, for oneDNN's blocks), else packed afresh."""
    step = packed.instruction.k_step
    K = packed.shape[-2]
    shape = packed.shape[:-2] + (k1 - k0, packed.shape[-1])
    if k0 % step == 0 and (k1 % step == 0 or k1 == K):
        data = packed.data[..., k0 // step : -(-k1 // step), :, :, :]
        return PackedB(shape, packed.dtype, data, isa)
    codes = packed.unpack()[..., k0:k1, :].view(packed.format.storage)
    return pack_codes(np.ascontiguousarray(codes), isa, packed.dtype)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32)


def _check_beta(beta) -> float:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not math.isfinite(float(beta)):
        raise ValueError(f"beta must be a finite real number, got {beta!r}")
    return float(beta)


def _check_threads(name: str, v) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {v!r}")


def run(
    a: np.ndarray,
    packed: PackedB,
    p: Plan,
    c: np.ndarray | None,
    beta: float,
    result_shape: tuple,
    threads: int | None = None,
    tiling: str | None = None,
) -> np.ndarray:
    """The bf16 bits (uint16, ``result_shape``) of ``p`` applied to bf16 ``a`` and ``packed``.

    ``a``: ml_dtypes.bfloat16 (..., M, K); ``c``: uint16 bf16 bits broadcastable to the result,
    or None. Every chain is one :func:`tilegemm.matmul` over a K range, on the AMX kernels or the
    VDPBF16PS ones as the host says; their float32 results are combined in the plan's order with
    IEEE binary32 additions on bit patterns.
    """
    if p.kernel == "gemm":
        return _run_gemm(a, packed, p, c, beta, result_shape, threads)
    if p.kernel != "brgemm":
        return _run_aten(a, packed, p, c, beta, result_shape, threads)
    isa = _chain_isa(p.host.chain)
    # Where both operands hold NaNs, which NaN a VDPBF16PS product returns depends on the order of
    # its sources: brgemm's AVX-512 microkernel passes the weights first and the broadcast A
    # second (docs/onednn.md, "NaN bits"), so the product runs transposed, B^T @ A^T, in which
    # the kernels' first multiplicand is B. Otherwise the two orders give the same bits.
    swap = p.host.chain == "VDPBF16PS" and BF16.holds_nan(a) and BF16.holds_nan(packed.unpack())
    acc = None
    for group in p.groups:
        buf = None
        for call in group:
            r = None
            for k0, k1 in call:  # a call's blocks chain in the tiles
                rows = np.ascontiguousarray(a[..., k0:k1])  # contiguous: the kernels' usual operand
                if swap:
                    x = np.ascontiguousarray(np.swapaxes(packed.unpack()[..., k0:k1, :], -1, -2))
                    y = np.swapaxes(rows, -1, -2)
                    if r is None:
                        r = _tile_matmul(x, y, threads=threads, tiling=tiling, isa=isa)
                    else:
                        _tile_matmul(x, y, threads=threads, tiling=tiling, isa=isa, out=r, accumulate=True)
                    continue
                piece = _k_slice(packed, k0, k1, isa)
                if r is None:
                    r = _tile_matmul(rows, piece, threads=threads, tiling=tiling, isa=isa)
                else:
                    _tile_matmul(rows, piece, threads=threads, tiling=tiling, isa=isa, out=r, accumulate=True)
            assert r is not None  # every call has at least one block
            if swap:
                r = np.ascontiguousarray(np.swapaxes(r, -1, -2))
            rb = _bits(r)
            buf = rb if buf is None else vaddps(rb, buf, out=buf)  # C = call + C (vaddps)
        if acc is None:
            acc = buf
        else:
            vaddps(acc, buf, out=acc)  # the parallel-K reduction: buf0 += buf_r
    assert acc is not None  # every plan has at least one group
    if p.reduce:
        vaddps(np.uint32(0), acc, out=acc)  # the post-op pass after the reduction: 0 + C
    acc = acc.reshape(result_shape)
    if c is not None:
        prev = _f32_bits(c, result_shape)
        if beta == 1.0:
            vaddps(acc, prev, out=acc)  # the sum post-op: C + dst
        else:
            scale = np.float32(beta).view(np.uint32)
            vfmadd(prev, scale, acc, out=acc)  # dst * beta + C, one rounding
    return vcvtneps2bf16(acc)


def _operands(a, b):
    """a (..., M, K) and b (codes or a PackedB, (..., K, N)) as (nb, M, K) and (nb, K, N) codes."""
    if isinstance(b, chains.GemmWeights):
        codes = b.codes
    else:
        codes = b.unpack().view(np.uint16) if isinstance(b, PackedB) else np.asarray(b).view(np.uint16)
    K, N = codes.shape[-2:]
    if codes.ndim == 2:  # one product of all of a's rows
        return a.reshape(1, -1, K), codes[None]
    batch = np.broadcast_shapes(a.shape[:-2], codes.shape[:-2])
    A = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    return A, np.broadcast_to(codes, batch + codes.shape[-2:]).reshape((-1, K, N))


def _f32_bits(c: np.ndarray, shape: tuple) -> np.ndarray:
    """bf16 bits ``c`` as binary32 bits (exact), broadcast to ``shape``: widened where ``c`` is
    stored, so that a broadcast ``c`` (a bias expanded over the rows) stays one row."""
    return np.broadcast_to(stored(c).astype(np.uint32) << np.uint32(16), shape)


def _epilogue(acc: np.ndarray, c, beta: float, result_shape: tuple) -> np.ndarray:
    """The sum post-op of oneDNN's gemm:jit and of PyTorch's kernels: ``c + acc`` or
    ``fma(beta, c, acc)``, one rounding (binary32 bits, ``result_shape``)."""
    acc = acc.reshape(result_shape)
    if c is None:
        return acc
    prev = _f32_bits(c, result_shape)
    if beta == 1.0:
        return vaddps(acc, prev)
    return vfmadd(prev, np.float32(beta).view(np.uint32), acc)


def _run_gemm(a, b, p: Plan, c, beta: float, result_shape: tuple, threads: int | None) -> np.ndarray:
    """``run`` on a gemm:jit host: oneDNN's single-threaded gemm calls on each thread's share of
    the outputs (``gemm_pieces``), one-row pieces by the gemv kernels, then the sum post-op and
    oneDNN's own rounding to bf16 (denormals kept, NaNs keeping sign and payload)."""
    from ..api import _LAUNCH, _numba_threads
    from ..kernels import gemm_jit

    A, B = _operands(a, b)
    pieces = list(gemm_pieces(A.shape[0], A.shape[1], B.shape[2], p.onednn_threads))
    codes = kernel_input(A).view(np.uint16)
    fast = None
    if any(m1 - m0 > 1 for _, m0, m1, _, _ in pieces):
        weights = b if isinstance(b, chains.GemmWeights) else None
        fast = chains.gemm(codes, B.view(np.uint16), threads, weights)  # every row; gemv rows replaced below
    out = np.empty(A.shape[:2] + (B.shape[2],), np.float32) if fast is None else fast.view(np.float32)
    if fast is not None and all(m1 - m0 > 1 for _, m0, m1, _, _ in pieces):
        return bf16_keep_denormals(_epilogue(_bits(out), c, beta, result_shape))
    Wc = Bc = None
    if p.b_transposed and any(m1 - m0 == 1 for _, m0, m1, _, _ in pieces):
        Wc = kernel_input(np.swapaxes(B, -1, -2)).view(np.uint16)  # the gemv kernel reads it along K
    if fast is None or Wc is None:
        Bc = kernel_input(B).view(np.uint16)
    from ..kernels.aten import VALUES as V

    kp = p.blocking.K_blk
    with _LAUNCH, _numba_threads(threads):
        for bi, m0, m1, n0, n1 in pieces:
            if m1 - m0 > 1:
                if fast is None:
                    gemm_jit.gemm(codes, Bc, V, out, kp, bi, m0, m1, n0, n1)
            elif Wc is not None:
                gemm_jit.gemv_t(codes, Wc, V, out, bi, m0, n0, n1)
            else:
                gemm_jit.gemv_n(codes, Bc, V, out, bi, m0, n0, n1)
    return bf16_keep_denormals(_epilogue(_bits(out), c, beta, result_shape))


#: Rows per product from which ATen's ``transa`` runs as batched products: its 64 chains per
#: output cost a regrouped copy of the weights, which a few rows do not pay back (one row of
#: 4096 x 11008 takes seconds that way, and a fraction of one element by element).
_TRANSA_ROWS = 16


def _run_aten(a, b, p: Plan, c, beta: float, result_shape: tuple, threads: int | None) -> np.ndarray:
    """``run`` on an ATen host: each output one float32 dot product in the order of the kernel
    PyTorch picks (``p.kernel``), then ``c`` (``fma(beta, c, dot)``) and ``c10::BFloat16``'s
    rounding. ``b``: bf16 codes (..., K, N) (a transposed view for ``transa``), or a PackedB.
    ``transa`` and ``notrans`` run as the host's own binary32 steps (``kernels.aten.transa_fast``,
    ``notrans_fast``) where ``chains.binary32_steps_hold`` proves them exact; otherwise the chains
    run as batched ``fp32_fma`` products (:mod:`tilegemm.onednn.chains`) where they can, else
    element by element (``tilegemm.kernels.aten``)."""
    from ..api import _LAUNCH, _numba_threads
    from ..kernels import aten

    A, B = _operands(a, b)
    codes = kernel_input(A).view(np.uint16)
    acc = None
    if p.kernel == "notrans":
        Bc = B.view(np.uint16)
        if chains.binary32_steps_hold(codes, Bc):  # the hardware's own binary32 steps, proved exact
            out = np.empty(A.shape[:2] + (B.shape[2],), np.float32)
            with _LAUNCH, _numba_threads(threads):
                aten.notrans_fast(codes, kernel_input(Bc), out)
            acc = _bits(out)
        else:
            acc = chains.notrans(codes, Bc, threads)
    elif p.kernel == "transa":
        W = np.swapaxes(B, -1, -2).view(np.uint16)
        if chains.binary32_steps_hold(codes, W):
            out = np.empty(A.shape[:2] + (W.shape[1],), np.float32)
            with _LAUNCH, _numba_threads(threads):
                aten.transa_fast(codes, kernel_input(W), aten.VALUES, out)
            acc = _bits(out)
        elif A.shape[1] >= _TRANSA_ROWS:
            acc = chains.transa(codes, W, threads)
    if acc is None:
        if p.kernel == "transa":  # both operands read along K
            Bc = kernel_input(np.swapaxes(B, -1, -2)).view(np.uint16)
        else:
            Bc = kernel_input(B).view(np.uint16)
        out = np.empty(A.shape[:2] + (B.shape[2],), np.float32)
        with _LAUNCH, _numba_threads(threads):
            getattr(aten, p.kernel)(codes, Bc, aten.VALUES, out)
        acc = _bits(out)
    return c10_bf16(_epilogue(acc, c, beta, result_shape))


def pack_weights(b, kernel: str = "brgemm") -> PackedB | chains.GemmWeights:
    """``b`` (..., K, N), rounded to bf16, prepared once for the calls of plans with ``kernel``
    (:attr:`Plan.kernel`): ``compute`` and ``matmul`` take it in place of ``b`` for the same bits,
    so that weights used by many calls are prepared once. ``"brgemm"``: a PackedB, as the tile
    chains read it (a ``b`` stored transposed, ``w.T`` of a row-major ``w``, read along its
    rows); ``"gemm"``: :class:`chains.GemmWeights`, the K blocks of the gemm:jit order."""
    codes = BF16.to_codes(np.asarray(b), "b", "bf16")
    if kernel == "gemm":
        return chains.GemmWeights(codes)
    if kernel != "brgemm":
        raise ValueError(f"weights are prepared for the 'brgemm' and 'gemm' kernels, not {kernel!r}")
    w = codes.swapaxes(-1, -2)
    if w.flags.c_contiguous and not codes.flags.c_contiguous:  # B = w.T: read w along its rows
        return pack_transposed(w, _CHAIN_ISA, "bf16")
    return pack_codes(np.ascontiguousarray(codes), _CHAIN_ISA, "bf16")


def _prepare(a, b, c, b_transposed, pack=True):
    """Operands as bf16 (a as elements, b packed, or as codes in its own layout where ``pack`` is
    False: the ATen kernels), the oneDNN problem, and c's bits."""
    a = np.asarray(a)
    if isinstance(b, chains.GemmWeights):
        if pack:
            raise ValueError("b was prepared for the gemm:jit kernel (pack_weights(b, 'gemm')), not for this plan's")
        M, K, N, batch, result = problem_of(a.shape, b.shape)
        packed = b
    elif isinstance(b, PackedB):
        _, _, instr = resolve(b.isa, b.dtype)
        if instr.b_layout != _INSTR.b_layout:
            raise ValueError(f"b was packed for {b.dtype!r} on isa={b.isa!r}, not for bf16 tile multiplies")
        M, K, N, batch, result = problem_of(a.shape, b.shape)
        packed = b
    else:
        b = np.asarray(b)
        M, K, N, batch, result = problem_of(a.shape, b.shape)
        packed = pack_weights(b) if pack else BF16.to_codes(b, "b", "bf16")
    a_el = BF16.to_codes(a, "a", "bf16").view(bf16_dtype())
    c_bits = None
    if c is not None:
        c_bits = BF16.to_codes(np.asarray(c), "c", "bf16")
        try:
            fits = np.broadcast_shapes(c_bits.shape, result) == tuple(result)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"c of shape {c_bits.shape} does not broadcast to the result shape {tuple(result)}")
    return a_el, packed, (M, K, N, batch, result), c_bits, bool(b_transposed)


def compute(
    a,
    b,
    p: Plan,
    *,
    c=None,
    beta: float = 1.0,
    threads: int | None = None,
    tiling: str | None = None,
) -> np.ndarray:
    """The bf16 result of ``a @ b`` (plus ``c``'s sum post-op) computed the way plan ``p`` says.

    For callers that decide the oneDNN problem themselves (:mod:`tilegemm.torch` reads it from
    tensor strides; :mod:`tilegemm.dask` plans the whole product and computes it block by block):
    every output's arithmetic depends only on its row of ``a``, its column of ``b`` and the plan,
    so ``a`` and ``b`` may be any rows and columns of the planned problem, with its K. A ``b``
    stored transposed is packed along its rows. ``ValueError`` if K differs from the plan's.
    """
    beta = _check_beta(beta)
    _check_threads("threads", threads)
    if not isinstance(p, Plan):
        raise TypeError(f"p must be a tilegemm.onednn.Plan, got {type(p).__name__}")
    a_el, packed, (M, K, N, batch, result), c_bits, _ = _prepare(
        a, b, c if beta != 0.0 else None, False, p.kernel == "brgemm"
    )
    if K != p.K:
        raise ValueError(f"the operands have K = {K}, but the plan was made for K = {p.K}")
    if (c_bits is not None) != p.post_sum:
        raise ValueError(f"the plan was made {'with' if p.post_sum else 'without'} a sum post-op (c), the call is not")
    return run(a_el, packed, p, c_bits, beta, result, threads, tiling).view(bf16_dtype())


def matmul(
    a,
    b,
    *,
    c=None,
    beta: float = 1.0,
    onednn_threads: int | None = None,
    b_transposed: bool | None = None,
    host: Host | str | None = None,
    threads: int | None = None,
    tiling: str | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """What PyTorch's bf16 ``matmul`` / ``bmm`` (with ``c``: ``addmm`` / ``baddbmm``) returns on
    the modelled host, bit for bit.

    Parameters
    ----------
    a : array_like, (..., M, K) or (K,)
        Rounded once to bf16 (RNE) unless already bfloat16.
    b : array_like (..., K, N), or PackedB, or chains.GemmWeights
        Rounded once to bf16; or packed with :func:`tilegemm.pack` (``dtype="bf16"``); or
        prepared with :func:`pack_weights` for the plan's kernel.
    c : array_like, optional
        ``addmm``'s input: rounded to bf16 (PyTorch copies it into the bf16 result), broadcast to
        the result, and added by oneDNN's sum post-op in float32 after the product.
    beta : float
        ``addmm``'s ``beta`` (the sum post-op's scale; 0 ignores ``c``).
    onednn_threads : int, optional
        Threads oneDNN runs with on the modelled host (``torch.get_num_threads()`` there);
        default ``host.cores``.
    b_transposed : bool, optional
        B is stored transposed on the host (``x @ w.T`` of a row-major ``w``, ``F.linear``'s
        weight). oneDNN plans transposed weights differently. Default False.
    host : Host or str, optional
        The modelled machine, or a name of :data:`HOSTS` (default :data:`RECORDING_HOST`).
    threads : int, optional
        tilegemm's worker threads (never changes a bit).
    tiling : str, optional
        The tiling of the tile chains (never changes a bit).
    out : numpy.ndarray, optional
        A C-contiguous bfloat16 array of the result's shape to write into.

    Returns
    -------
    numpy.ndarray
        ``ml_dtypes.bfloat16``, shaped as ``torch.matmul`` shapes it (:func:`problem_of`).

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm import onednn
    >>> a = np.full((2, 64), 0.1, np.float32)
    >>> onednn.matmul(a, np.ones((64, 3), np.float32)).astype(np.float32)
    array([[6.40625, 6.40625, 6.40625],
           [6.40625, 6.40625, 6.40625]], dtype=float32)
    """
    beta = _check_beta(beta)
    _check_threads("onednn_threads", onednn_threads)
    _check_threads("threads", threads)
    M, K, N, batch, _ = problem_of(
        np.shape(a), b.shape if isinstance(b, (PackedB, chains.GemmWeights)) else np.shape(b)
    )
    use_c = c is not None and beta != 0.0
    p = plan(
        M, K, N, batch=batch, onednn_threads=onednn_threads, b_transposed=bool(b_transposed), post_sum=use_c, host=host
    )
    a_el, packed, (M, K, N, batch, result), c_bits, bt = _prepare(
        a, b, c if use_c else None, b_transposed, p.kernel == "brgemm"
    )
    if out is not None:
        _check_out(out, result)
    bits = run(a_el, packed, p, c_bits, beta, result, threads, tiling)
    if out is not None:
        out.view(np.uint16)[...] = bits
        return out
    return bits.view(bf16_dtype())


def _check_out(out, result) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(result):
        raise ValueError(f"out has shape {out.shape}, but the result has shape {tuple(result)}")
    if out.dtype != bf16_dtype():
        raise ValueError(f"out has dtype {out.dtype}, but the onednn profile returns bfloat16")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable, C-contiguous array")


def linear(
    x,
    weight,
    bias=None,
    *,
    onednn_threads: int | None = None,
    host: Host | str | None = None,
    threads: int | None = None,
    tiling: str | None = None,
) -> np.ndarray:
    """What ``torch.nn.functional.linear(x, weight, bias)`` returns in bf16 on the modelled host.

    PyTorch flattens ``x`` to ``(-1, K)`` and calls ``addmm(bias, x, weight.t())``: oneDNN sees
    transposed weights, and the bias becomes its sum post-op (``docs/onednn.md``).

    Parameters
    ----------
    x : array_like (..., K)
    weight : array_like (N, K)
    bias : array_like (N,), optional

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm import onednn
    >>> y = onednn.linear(np.ones((4, 8)), np.ones((3, 8)), np.float32([0.5, 1, 2]))
    >>> y.astype(np.float32)[0]
    array([ 8.5,  9. , 10. ], dtype=float32)
    """
    w = np.asarray(weight)
    if w.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (N, K), got shape {w.shape}")
    if bias is not None and np.ndim(bias) != 1:
        raise ValueError(f"linear: bias must be 1-D (N,), got shape {np.shape(bias)}")
    return matmul(
        x,
        w.T,
        c=bias,
        onednn_threads=onednn_threads,
        b_transposed=True,
        host=host,
        threads=threads,
        tiling=tiling,
    )


def profile_matmul(a, b, dtype=None, tiling=None, *, out=None, accumulate=False, threads=None, **options):
    """``tilegemm.matmul(a, b, isa="onednn", ...)``: :func:`matmul`, with ``accumulate=True``
    meaning ``addmm(out, a, b)`` (``out`` holds bf16 values and receives the result).

    Keywords of :func:`matmul` other than ``c`` are accepted as options (``onednn_threads``,
    ``b_transposed``, ``host``, ``beta``).
    """
    for name in options:
        if name not in _OPTIONS:
            raise TypeError(f"unexpected keyword argument {name!r} for isa='onednn' (it takes {', '.join(_OPTIONS)})")
    if accumulate and out is None:
        raise ValueError("accumulate=True needs out= holding the C to accumulate into")
    c = None
    if accumulate:
        _check_out(out, out.shape if isinstance(out, np.ndarray) else ())
        c = out.copy()
    return matmul(a, b, c=c, threads=threads, tiling=tiling, out=out, **options)

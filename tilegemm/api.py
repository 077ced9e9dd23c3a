"""``tilegemm.matmul``: the one-way data path of a call.

API checks (shapes, ``out``, ``threads``) -> operand conversion (``formats``) -> packing (A
panels and B, ``packing``) -> plan (the fast-path proof and the kernel, ``plan`` / ``dispatch``)
-> kernel -> result. All validation happens before anything is written, so an error leaves
``out`` untouched. No Python loop runs over tiles or elements here; the compiled kernels do that.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numba
import numpy as np

from . import ace, dispatch, instructions, native, plan, workers
from .formats import any_nan, check_fp8_overflow, daz
from .instructions import Instruction, Profile
from .kernels.targets import x86_nans
from .packing import PackedB, a_panels, exponent_range, int_absmax, pack_codes

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


def _resolve(dtype, isa, b) -> tuple[Profile, str, Instruction]:
    """The profile, dtype name and instruction of a call; a PackedB supplies what is not given."""
    if isinstance(b, PackedB):
        p, name, instr = instructions.resolve(b.isa if isa is None else isa, b.dtype if dtype is None else dtype)
        if instr.b_layout != b.instruction.b_layout:
            raise ValueError(
                f"dtype {name!r} on isa={p.name!r} contradicts the packed B, which was packed for "
                f"{b.dtype!r} on isa={b.isa!r}"
            )
        return p, name, instr
    return instructions.resolve(instructions.DEFAULT_ISA if isa is None else isa, "bf16" if dtype is None else dtype)


def _check_out(out, result_shape, name: str, instr: Instruction, operands) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != result_shape:
        raise ValueError(f"out has shape {out.shape}, but the result has shape {result_shape}")
    if out.dtype != instr.acc:
        raise ValueError(f"out has dtype {out.dtype}, but dtype {name!r} returns {instr.acc}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    for name, x in operands:
        if np.may_share_memory(out, x):
            raise ValueError(f"out overlaps operand {name}; pass a separate output array")


def _int8_bounds(a: np.ndarray, b: np.ndarray | PackedB, c: np.ndarray | None) -> tuple[int, int, int]:
    """``(a_max, b_absmax, c_absmax)`` of :func:`tilegemm.plan.saturation_free`: the largest
    magnitudes of A, of B (a PackedB keeps its own) and of C."""
    b_absmax = b.int8_absmax() if isinstance(b, PackedB) else int_absmax(b)
    return int_absmax(a), b_absmax, 0 if c is None else int_absmax(c)


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


_NO_SUMS = np.zeros((1, 1), np.int32)  # the column sums a call without the VNNI correction passes


def _batch_index(shape, batch) -> np.ndarray:
    """For each matrix of the broadcast batch, which matrix of an operand with batch ``shape``."""
    if not shape and not batch:  # two 2-D operands: the one matrix
        return np.zeros(1, np.int64)
    n = int(math.prod(shape))
    idx = np.arange(n, dtype=np.int64).reshape(shape)
    return np.array(np.broadcast_to(idx, batch), dtype=np.int64).ravel()  # writable: one kernel type


def matmul(
    a,
    b,
    dtype=None,
    tiling=None,
    *,
    out=None,
    accumulate=False,
    threads=None,
    isa=None,
    backend="emulated",
    scales=None,
    fp8_overflow="error",
    **switches,
):
    """Matrix product with the exact bits of an Intel AMX tile-multiply sequence.

    Parameters
    ----------
    a : array_like, (..., M, K) or (K,)
        Left operand. Floats and integers for ``"bf16"``/``"fp16"`` (rounded once, RNE, to the
        format); ``ml_dtypes.bfloat16`` or ``numpy.float16`` arrays are taken as they are.
        Integers within the 8-bit range of the operand's signedness for the int8 dtypes. For the
        8-bit float dtypes: ``ml_dtypes.float8_e5m2`` / ``float8_e4m3fn`` arrays as they are (an
        array of the other 8-bit format is refused), uint8 arrays as codes, other numbers rounded
        once as ml_dtypes rounds them, with overflow as ``fp8_overflow`` says. For
        ``"cfp16"``: complex arrays (each part rounded as ``numpy.float16`` does), a
        ``(real, imag)`` tuple of real arrays, or uint32 codes (imaginary FP16 in the high half).
        torch CPU tensors of these types are read in place (bf16 and FP8 tensors included).
    b : array_like (..., K, N) or (K,), or PackedB
        Right operand, or B already packed with :func:`tilegemm.pack`.
    dtype : str, optional
        ``"bf16"`` (TDPBF16PS), ``"fp16"`` (TDPFP16PS), ``"int8"``/``"s8s8"`` (TDPBSSD),
        ``"s8u8"`` (TDPBSUD), ``"u8s8"`` (TDPBUSD), ``"u8u8"`` (TDPBUUD), ``"cfp16"``
        (TCMMRLFP16PS and TCMMIMFP16PS), ``"bf8"`` (TDPBF8PS), ``"bf8hf8"`` (TDPBHF8PS: A E5M2,
        B E4M3), ``"hf8bf8"`` (TDPHBF8PS), ``"hf8"`` (TDPHF8PS): the dtypes of the ``isa``
        profile. ``isa="ace"`` (the outer products, ``docs/ace.md``) takes the int8 dtypes,
        ``"bf16"`` (TOP2BF16PS), ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp8_e4m3_e5m2"``,
        ``"mxfp8_e5m2_e4m3"`` (TOP4MX*F8PS; A's format first) and ``"mxint8"`` (TOP4MXBSSPS).
        Default: the packed B's dtype, else ``"bf16"``.
    tiling : str, optional
        ``"RxC"``: R accumulator tiles along M by C along N per superblock, any of
        :data:`tilegemm.TILINGS` (``R*C + 2 <= 8``; ``"1x1"`` and ``"2x2"`` are the seed's), or
        ``"auto"`` (:func:`tilegemm.plan.auto_tiling`). Default ``"2x2"``. The bits never
        depend on it.
    out : numpy.ndarray, optional
        C-contiguous array of the result's shape and dtype to write into.
    accumulate : bool
        Continue the instruction chain from ``out`` (``C += A @ B``) instead of from zero.
    threads : int, optional
        Worker threads for this call only (default: Numba's current setting).
    isa : str, optional
        The instruction profile (:data:`tilegemm.instructions.ISAS`): ``"amx"`` (default, or the
        packed B's) emulates the tile multiply named by ``dtype``; ``"avx512"`` (bf16) the seed's
        AVX-512 BF16 baseline, VDPBF16PS: one FP32 accumulator per element, each pair's odd
        product first. Profiles without tiles accept ``tiling``; it only orders the blocks of C,
        which never changes a bit. ``"onednn"`` (bf16) returns what PyTorch's bf16 matmul returns
        on an AMX server (bfloat16; :func:`tilegemm.onednn.matmul`, whose keywords it takes).
    backend : str, optional
        ``"emulated"`` (default): the emulation, on any CPU. ``"native"``: the instruction itself
        on this CPU (AMX tiles, or AVX512_BF16 for ``isa="avx512"``), JIT-compiled for it, on the
        same operands and K steps; ``tilegemm.native.NativeUnavailable`` names what is missing
        where the CPU or the kernel does not allow it. ``"auto"``: native where it can run, else
        emulated. See ``docs/native.md``.
    scales : tuple, optional
        For the ACE MX dtypes: ``(sa, sb)``, the OCP MX block scales of A and B as
        ``ml_dtypes.float8_e8m0fnu`` or uint8 E8M0 codes, one per 32 elements along K: ``sa`` of
        A's shape with K replaced by ``ceil(K / 32)``, ``sb`` of B's; either may be None (1.0), and
        ``sb`` must be None when B is packed (the PackedB holds B's). A ``ValueError`` for any other
        dtype.
    fp8_overflow : {"error", "saturate", "nan"}
        For the 8-bit float dtypes, a value the rounding takes past the format's largest finite
        value (E4M3 448, E5M2 57344): ``"error"`` (default) raises a ``ValueError`` naming it,
        ``"saturate"`` clamps it to the largest finite value of its sign (OCP's saturating
        conversion), ``"nan"`` keeps ml_dtypes' result (E4M3 NaN, E5M2 infinity). Other dtypes
        ignore it.
    **switches
        Readings of points the instruction's sources leave open, by switch name
        (:attr:`tilegemm.instructions.Instruction.switches`); each defaults to its normative
        reading. A switch of another instruction is a ``ValueError``.

    Returns
    -------
    numpy.ndarray
        float32 (bf16, fp16, the 8-bit floats), int32 (int8 dtypes) or complex64 (cfp16: the
        real part from TCMMRLFP16PS, the imaginary part from TCMMIMFP16PS), shaped as
        ``numpy.matmul`` would.

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
    check_fp8_overflow(fp8_overflow)
    prof, name, instr = _resolve(dtype, isa, b)
    if prof.library is not None:  # a library's whole call, e.g. isa="onednn" (docs/onednn.md)
        library = prof.library_fn
        assert library is not None
        return library(a, b, name, tiling, out=out, accumulate=accumulate, threads=threads, **switches)
    options = instr.options(switches, name)
    target = native.select(backend, instr)  # None: emulated; raises where native cannot run
    if target is not None and switches:
        raise ValueError(
            f"switches ({', '.join(switches)}) choose readings of the emulation; backend={backend!r} runs "
            f"the instruction itself and takes none"
        )
    tiling = "2x2" if tiling is None else tiling
    if tiling != "auto":
        dispatch.lookup(prof.name, name, tiling)  # validates the tiling before any work
    _check_threads(threads)
    if accumulate and out is None:
        raise ValueError("accumulate=True needs out= holding the C to accumulate into")

    packed = b if isinstance(b, PackedB) else None
    a = instr.a.asarray(a, "a", name)
    b_arr = None if packed is not None else instr.b.asarray(b, "b", name)
    b_shape = packed.shape if packed is not None else b_arr.shape
    a2, b2, batch, M, K, N, result_shape = _matmul_shapes(a.shape, b_shape)
    ace.check_operand(instr, a, "a", name)
    if b_arr is not None:
        ace.check_operand(instr, b_arr, "b", name)
    sa, sb = ace.check_scales(
        instr, name, scales, a.shape, b_shape, None if packed is None else packed.scales, packed is not None
    )
    kernel = dispatch.lookup(prof.name, name, plan.auto_tiling(M, N) if tiling == "auto" else tiling)
    b_codes = None

    # -- operand conversion: float32 headed for a 16-bit float is rounded inside the compiled
    # A panel pass; everything else becomes codes here (rounded once, or range-checked).
    # An 8-bit float's rounding is checked for overflow (fp8_overflow) here, not in the pass.
    fused = target is None and instr.a.f32_round is not None and a.dtype == np.float32 and instr.a.minifloat is None
    a_in = a if fused else instr.a.to_codes(a, "a", name, fp8_overflow)
    if packed is None:
        b_codes = instr.b.to_codes(b_arr, "b", name, fp8_overflow).reshape(b2)
    if out is not None:
        operands = [("a", a)] + ([("b", packed.data)] if packed is not None else [("b", b_arr)])
        _check_out(out, result_shape, name, instr, operands)
    # -- nothing above writes; from here on the inputs are valid ---------------------------
    if out is None:
        # calloc's zero pages: the kernels' first writes fault them in already zero, where
        # np.empty and a fill would write all of C once more (the chains of tilegemm.onednn
        # return 64 outputs per output)
        C = np.zeros(result_shape, instr.acc)
    else:
        C = out
        if not accumulate:
            C[...] = 0
    if K == 0 or C.size == 0:
        return C  # no instruction runs: C stays as it was (accumulate) or zero
    C3 = C.reshape((-1, M, N)).view(instr.kernel_acc)  # complex: interleaved (re, im) float32
    if accumulate and instr.dst_daz:
        np.copyto(C3, daz(C3))  # the first add reads a denormal C as zero (docs/semantics.md)

    isa_name = prof.name
    if target is None and instr.mnemonic in plan.WRAPPING_TWIN:
        # VPDPBUSDS where no running sum can saturate: the wrapping instruction's (fast) kernels.
        b_now = packed if packed is not None else b_codes
        if plan.saturation_free(instr, *_int8_bounds(a_in, b_now, C3 if accumulate else None), K):
            instr = instructions.INSTRUCTIONS[plan.WRAPPING_TWIN[instr.mnemonic]]
            isa_name = instructions.find(instr)[0]
            kernel = dispatch.lookup(isa_name, name, kernel.tiling)
    call = _Call(instr, kernel, options, M, K, a2, b2, batch, accumulate, isa_name, name, sa)
    if sb is not None and sb.ndim == 1:
        sb = sb.reshape(-1, 1)  # a 1-D b is a column
    if target is not None:
        packed = packed if packed is not None else pack_codes(b_codes, prof.name, name, sb)
        call.run_native(target, a_in, packed, C3, plan.threads_for(C.size * K, threads) or numba.get_num_threads())
        return C
    with _LAUNCH, _numba_threads(plan.threads_for(C.size * K, threads)):
        # B is packed with the call's threads too: a small call's parallel pass would wait for workers.
        call.run(a_in, packed if packed is not None else b_codes, C3, sb)
    return C


@dataclass(frozen=True)
class _Call:
    """A validated call: what runs, on which shapes."""

    instr: Instruction
    kernel: dispatch.Kernel
    options: dict
    M: int
    K: int
    a2: tuple
    b2: tuple
    batch: tuple
    accumulate: bool
    isa: str = instructions.DEFAULT_ISA
    dtype: str = "bf16"

    sa: np.ndarray | None = None  # A's MX block scales (ACE MX dtypes)

    def run(self, a_in: np.ndarray, b: PackedB | np.ndarray, C3: np.ndarray, sb=None) -> None:
        """The one run path: A as codes (or float32 a compiled pass rounds), B packed or as codes
        (``sb``: its MX block scales), C3 the result as the kernels see it. A blocked kernel reads
        B as packed, in slabs where it is not packed yet (:meth:`_run_blocked`); the superblock
        driver reads the layouts of its family (:meth:`_run_layouts`).

        Where the target's invalid operations (inf - inf, 0 * inf) do not return x86's NaN
        (``targets.x86_nans``: AArch64 returns +NaN, x86 -NaN), a result that holds a NaN is
        computed again from the caller's C as a call with NaN inputs is, whose paths take every
        NaN from x86's rule."""
        if x86_nans() or not self.instr.is_float:
            return self._run(a_in, b, C3, sb)
        start = C3.copy()
        self._run(a_in, b, C3, sb)
        if any_nan(C3):
            C3[...] = start
            self._run(a_in, b, C3, sb, nan=True)

    def _run(self, a_in: np.ndarray, b: PackedB | np.ndarray, C3: np.ndarray, sb=None, nan: bool = False) -> None:
        """:meth:`run` once; ``nan``: as if an operand held a NaN."""
        if self.kernel.blocked is not None:
            # The blocked kernels send the steps of A's rows and B's blocks that hold a NaN to
            # their exact path themselves; a NaN in the caller's C sends the whole call.
            c_nan = nan or (self.accumulate and self.instr.is_float and any_nan(C3))
            self._run_blocked(a_in, b, C3, c_nan)
        else:
            # a family whose fast body takes NaNs by rule needs no scan of the operands
            nan = nan or (self.kernel.family.nans != "fast" and self._nan_inputs(a_in, b, C3, sb))
            packed = b if isinstance(b, PackedB) else pack_codes(b, self.isa, self.dtype, sb)
            self._run_layouts(a_in, packed, C3, nan)

    def _nan_inputs(self, a_in: np.ndarray, b: PackedB | np.ndarray, C3: np.ndarray, sb) -> bool:
        """Whether A, B, the C read or a block scale holds a NaN (``plan.make_plan``)."""
        instr = self.instr
        if not instr.is_float:
            return False
        if isinstance(b, PackedB):
            b_nan, sb = b.holds_nan(), b.scales
        else:
            b_nan = instr.b.holds_nan(b)
        scales = [s for s in (self.sa, sb) if s is not None]
        return (
            b_nan
            or instr.a.holds_nan(a_in)
            or (self.accumulate and C3.dtype.kind in "fc" and any_nan(C3))
            or any(bool((np.asarray(s).view(np.uint8) == 0xFF).any()) for s in scales)  # E8M0's NaN
        )

    def _run_blocked(self, a_in: np.ndarray, b: PackedB | np.ndarray, C3: np.ndarray, nan: bool = False) -> None:
        """A blocked kernel (``tilegemm.kernels.blocked``): A as the caller gave it (codes, or
        float32 that the kernel rounds while packing it), B as packed. A B not yet packed is packed
        in slabs of whole K steps (``plan.slab_steps``), each run before the next is packed, so
        that the call's memory stays near the operands' own; each C element still sees its K
        steps in order, and the blocks' paths restart from C's exponents at each slab."""
        instr, kern = self.instr, self.kernel
        if self.M == 1:
            # A matrix-vector product reads each step of B once, for one row: rewriting it for
            # VDPBF16PS costs more than the instruction saves (GEMV at K = N = 4096 on Zen 4:
            # 0.92 of numpy's speed on VDPBF16PS, 1.26 on FMA)
            kern = replace(kern, pinned_engine="fma")
        nA = int(math.prod(self.a2[:-2]))
        A = np.ascontiguousarray(a_in.reshape(nA, self.M, self.K))
        ia = _batch_index(self.a2[:-2], self.batch)
        ib = _batch_index(self.b2[:-2], self.batch)
        p = plan.make_plan(kern, None, None, None, None, nan_inputs=nan)
        entry = p.entry
        assert entry is not None
        kc = plan.k_chunk(kern, self.M)
        one_row = plan.one_row_body(kern)
        nthr = numba.get_num_threads()
        stats = np.zeros(len(plan.PATH_NAMES), np.int64)

        def launch(packed: PackedB, k0: int, k: int, c_dirty: bool) -> None:
            taken = np.zeros(1, np.int64)  # the workers' job counter
            if instr.is_float:
                st = np.zeros((nthr, len(plan.PATH_NAMES)), np.int64)
                workers.run(
                    entry,
                    nthr,
                    A.view(np.uint16),
                    A.dtype == np.float32,
                    k0,
                    packed.blocks(np.uint32),
                    ia,
                    ib,
                    packed.block_exponents(),
                    C3,
                    k,
                    kc,
                    p.force,
                    c_dirty,
                    one_row,
                    taken,
                    st,
                )
                stats[:] += st.sum(axis=0)
            else:
                same = instr.a.storage == instr.b.storage
                colsum = packed.column_sums() if same else _NO_SUMS
                signed = np.dtype(np.int8)
                workers.run(
                    entry,
                    nthr,
                    A.view(np.uint8),
                    instr.a.storage == signed,
                    k0,
                    packed.blocks(np.uint8),
                    instr.b.storage == signed,
                    ia,
                    ib,
                    colsum,
                    C3,
                    k,
                    kc,
                    one_row,
                    taken,
                )

        def dirty() -> bool:
            """C holds values on a grid finer than 2^-126: the blocks' final adds must flush."""
            if not (instr.is_float and kern.family.needs_proof):
                return False
            r = exponent_range(C3)
            return r is not None and r[0] - 23 < -126

        c_dirty = self.accumulate and dirty()
        if isinstance(b, PackedB):
            launch(b, 0, self.K, c_dirty)
        else:
            step = instr.k_step * plan.slab_steps(len(ib), b.shape[-1], instr.k_step)
            for k0 in range(0, self.K, step):
                k1 = min(self.K, k0 + step)
                packed = pack_codes(np.ascontiguousarray(b[..., k0:k1, :]), self.isa, self.dtype)
                launch(packed, k0, k1 - k0, c_dirty)
                c_dirty = k1 < self.K and dirty()
        plan.record(kern, p.path if kern.family.needs_proof else "fast", stats, nthr)

    def _run_layouts(self, a_in: np.ndarray, packed: PackedB, C3: np.ndarray, nan: bool = False) -> None:
        """The family's layouts, the plan and the driver's entry (inside the caller's thread
        setting: the packing passes are compiled)."""
        instr, family = self.instr, self.kernel.family
        if nan and family.nans not in ("exact", "fast"):  # a family whose NaNs follow the rule
            other = replace(self.kernel, family=dispatch.FAMILIES[family.nans])
            return replace(self, kernel=other)._run_layouts(a_in, packed, C3, nan)
        a_batch = self.a2[:-2]
        nA = int(math.prod(a_batch))
        sa = None if self.sa is None else self.sa.reshape(nA, self.M, -1)
        a3 = a_in.reshape(nA, self.M, self.K)
        A, a_range = a_panels(instr, family.a_layout, a3, packed.data.shape[-4], sa, self.options)
        B = packed.kernel_b(family.b_layout, instr.daz_inputs, self.options)
        b_range = c_range = None
        if family.needs_proof:
            c_range = exponent_range(C3, denormals=not instr.dst_daz) if self.accumulate else None
            b_range = packed.exponent_range(family.b_layout, instr.daz_inputs, self.options)
        codes = instr.option_codes(self.options)
        p = plan.make_plan(self.kernel, None, a_range, b_range, c_range, codes, nan)
        if p.path == "fallback" and family.fallback is not None:  # the proof failed: the fallback runs
            other = replace(self.kernel, family=dispatch.FAMILIES[family.fallback])
            return replace(self, kernel=other)._run_layouts(a_in, packed, C3, nan)
        ia = _batch_index(a_batch, self.batch)
        ib = _batch_index(self.b2[:-2], self.batch)
        family.run_prepare(instr, A, B, C3, ib, self.K)
        Ck = family.kernel_c(C3)
        nthr = numba.get_num_threads()
        workers.run(p.entry, nthr, A, B, Ck, ia, ib, self.K, self.kernel.rows, self.kernel.cols, *codes)
        plan.record(self.kernel, p.path, None, nthr)

    def run_native(self, target, a_codes: np.ndarray, packed: PackedB, C3: np.ndarray, threads: int) -> None:
        """The native program on ``target`` (``tilegemm.native.gemm``), on A's codes and the packed B."""
        from .native import gemm

        nA = int(math.prod(self.a2[:-2]))
        ia = _batch_index(self.a2[:-2], self.batch)
        ib = _batch_index(self.b2[:-2], self.batch)
        a3 = a_codes.reshape(nA, self.M, self.K)
        gemm.run(
            self.instr, self.kernel.rows, self.kernel.cols, a3, packed, C3, ia, ib, self.accumulate, threads, target
        )

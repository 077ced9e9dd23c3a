"""Run a PyTorch model's bf16 matrix products as an AMX server computes them, on any CPU.

``with tilegemm.torch.emulate():`` is a ``torch.overrides.TorchFunctionMode``. Inside it, the
bf16 CPU calls of ``torch.matmul`` (and ``Tensor.matmul``, ``@``), ``torch.mm``, ``torch.bmm``,
``torch.addmm``, ``torch.baddbmm`` and ``torch.nn.functional.linear`` (so ``nn.Linear``) return
the bits that PyTorch returns on the modelled AMX host (``tilegemm.onednn``, ``docs/onednn.md``).
Each call is taken apart exactly as PyTorch's C++ takes it apart on its way to oneDNN (the
folding of ``matmul``, ``linear``'s ``addmm``, the strides that decide whether oneDNN sees a
transposed weight), and the resulting oneDNN problem is planned and computed by
:mod:`tilegemm.onednn`.

Anything else runs in PyTorch unchanged. Matrix products the mode does not emulate (other
dtypes, ``alpha != 1``, a transposed source, ``out=``, convolutions, ``einsum``, attention
kernels ...) are recorded in :attr:`emulate.skipped`; with ``strict=True`` they raise
:class:`NotEmulated` instead.

Autograd: the forward values are emulated; the backward is PyTorch's own on this CPU. When an
input needs a gradient, the call also runs in PyTorch to build its autograd graph, and the
emulated values replace its output's values (the gradient flows into PyTorch's graph unchanged),
so gradients are exactly those plain PyTorch computes from the same inputs and upstream gradient.

Needs PyTorch (``pip install "tilegemm[torch]"``).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import numpy as np

try:
    import torch
    from torch.overrides import TorchFunctionMode
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError('tilegemm.torch needs PyTorch: pip install "tilegemm[torch]"') from e

from . import instructions
from . import onednn as _onednn
from .compare import BitDiff, bitdiff
from .formats import host_array

__all__ = [
    "emulate",
    "NotEmulated",
    "Call",
    "to_numpy",
    "from_numpy",
    "compare",
    "Comparison",
    "LayerDiff",
    "FLEET",
    "demo_model",
]


class NotEmulated(RuntimeError):
    """A matrix product that ``emulate(strict=True)`` cannot emulate (the message says why)."""


class _Uncovered(Exception):
    """Internal: this call is not emulated, for the reason in the message."""


@dataclass(frozen=True)
class Call:
    """One matrix product seen by the mode.

    Attributes
    ----------
    function:
        The PyTorch function called (``"linear"``, ``"matmul"`` ...).
    problem:
        What oneDNN computes for it (``"mm 32x4096x4096, weights ba, sum post-op"``), or the
        call's shapes when it was not emulated.
    plan:
        The oneDNN plan (:class:`tilegemm.onednn.Plan`); None when not emulated.
    reason:
        Why it was not emulated (None when it was).
    """

    function: str
    problem: str
    plan: _onednn.Plan | None = None
    reason: str | None = None


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor as a NumPy array in place (same memory, same strides): a bf16 tensor as
    ``ml_dtypes.bfloat16``, FP8 tensors as their ml_dtypes types (``tilegemm.formats.host_array``,
    which ``tilegemm.matmul`` reads its operands with)."""
    return host_array(t, "tensor")


def from_numpy(bits: np.ndarray) -> torch.Tensor:
    """uint16 bf16 bit patterns (or an ml_dtypes.bfloat16 array) as a bf16 tensor."""
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(torch.bfloat16)


class _PackedWeights:
    """Parameters' bf16 views prepared for the tile chains of brgemm and the K blocks of gemm:jit
    (``tilegemm.onednn.pack_weights``), kept across calls and modes: packing a weight took a
    quarter of an emulated forward pass, and the same weights meet every pass. An entry is the
    preparation of one view (data pointer, shape, strides) for one kernel at one version of the
    parameter's data: an in-place update (an optimizer step, ``copy_``) bumps the version and the
    view is prepared again. Entries go with their parameter, and the least recently used go
    first beyond :attr:`limit` bytes. Other tensors (activations) are packed per call, as they
    change with every pass."""

    limit = 1 << 30

    def __init__(self) -> None:
        self._entries: dict[tuple, tuple] = {}  # key -> (weakref to the parameter, PackedB), in use order
        self._bytes = 0

    def get(self, b: torch.Tensor, kernel: str = "brgemm"):
        """``b`` prepared for ``kernel``'s plans (``tilegemm.onednn.pack_weights``), now if need be;
        None where ``b`` is not a view of a parameter."""
        base = b if b._base is None else b._base
        if not isinstance(base, torch.nn.Parameter):
            return None
        key = (id(base), base._version, b.data_ptr(), tuple(b.shape), b.stride(), kernel)
        hit = self._entries.pop(key, None)
        if hit is not None and hit[0]() is base:
            self._entries[key] = hit  # most recently used last
            return hit[1]
        packed = _onednn.pack_weights(to_numpy(b), kernel)
        self._entries[key] = (weakref.ref(base, functools.partial(self._forget, key)), packed)
        self._bytes += _nbytes(packed)
        for old in list(self._entries):
            if self._bytes <= self.limit or old == key:
                break
            self._drop(old)
        stale = [k for k in self._entries if k[0] == key[0] and k[1] != key[1]]  # earlier versions
        for k in stale:
            self._drop(k)
        return packed

    def _forget(self, key, _ref) -> None:  # the parameter is gone
        self._drop(key)

    def _drop(self, key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= _nbytes(entry[1])

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0


def _nbytes(prepared) -> int:
    if isinstance(prepared, _onednn.chains.GemmWeights):
        return prepared.codes.nbytes + sum(p.data.nbytes for p in prepared.blocks)
    return prepared.data.nbytes


_PACKED = _PackedWeights()


def _shape(t) -> str:
    return "x".join(map(str, t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__


class _ReplaceValues(torch.autograd.Function):
    """Forward: the emulated values; backward: the gradient flows into PyTorch's own graph."""

    @staticmethod
    def forward(ctx, reference, emulated):
        return emulated

    @staticmethod
    def backward(ctx, grad):
        return grad, None


# -- how PyTorch hands a product to oneDNN ---------------------------------------------------


def _mm_layout(m1: torch.Tensor, m2: torch.Tensor) -> tuple[int, int, bool, bool]:
    """oneDNN's (M, N, src transposed, weights transposed) for ``mm(m1, m2)`` into a fresh result.

    ``addmm_impl_cpu_`` (aten/src/ATen/native/LinearAlgebra.cpp) first decides whether to compute
    ``C`` or ``C^T`` from the result's strides, then whether each operand is used as it is, as a
    transpose, or copied contiguous; ``mkldnn_gemm`` (aten/src/ATen/native/mkldnn/Matmul.cpp)
    then hands oneDNN ``C^T = B^T A^T``: src is the second BLAS operand, the weights the first.
    """
    M, K = m1.shape
    N = m2.shape[1]
    res_strides = torch.empty((M, N), device="meta").stride()
    if res_strides[0] == 1 and (N == 1 or res_strides[1] >= max(1, M)):
        tc = False
    elif res_strides[1] == 1 and (M == 1 or res_strides[0] >= max(1, N)):
        tc = True
        m1, m2 = m2, m1
    else:  # pragma: no cover - a fresh result is always one of the two
        tc = False
    m = N if tc else M
    n = M if tc else N
    k = K
    s1, s2 = m1.stride(), m2.stride()
    i, o = (1, 0) if tc else (0, 1)
    if s1[i] == 1 and s1[o] >= max(1, m):
        transpose_a = False
    elif s1[o] == 1 and s1[i] >= max(1, k):
        transpose_a = True
    else:
        transpose_a = not tc  # cloned contiguous
    if s2[i] == 1 and s2[o] >= max(1, k):
        transpose_b = False
    elif s2[o] == 1 and s2[i] >= max(1, n):
        transpose_b = True
    else:
        transpose_b = not tc
    # mkldnn_gemm: src = b (n x k, transposed if transb), weights = a (k x m, transposed if transa)
    return n, m, transpose_b, transpose_a


def _bmm_format(t: torch.Tensor) -> str:
    """``is_mkldnn_optimized_format`` of mkldnn_matmul: ``"plain"``, ``"transposed"`` (the last two
    dimensions swapped, batch outermost), or ``"plain"`` after PyTorch's ``.contiguous()``."""
    if t.is_contiguous():
        return "plain"
    s, z = t.stride(), t.shape
    if s[0] == z[1] * z[2] and s[1] == 1 and s[2] == z[1]:
        return "transposed"
    return "plain"


class emulate(TorchFunctionMode):
    """Emulate bf16 matrix products of PyTorch on an AMX server, inside a ``with`` block.

    Parameters
    ----------
    isa : str
        A library profile of :data:`tilegemm.instructions.PROFILES` (``"onednn"``).
    strict : bool
        Raise :class:`NotEmulated` for a matrix product the mode cannot emulate, instead of
        running it in PyTorch and recording it in :attr:`skipped`.
    onednn_threads : int, optional
        Threads PyTorch runs with on the modelled host (``torch.get_num_threads()`` there); the
        default is the host's cores. Not this machine's setting: it changes the bits.
    host : tilegemm.onednn.Host or str, optional
        The modelled machine, or a name of :data:`tilegemm.onednn.HOSTS` (``"genoa-96"``,
        ``"sapphire-rapids-56"`` ...); default: the AMX recording host.
    threads, tiling : optional
        tilegemm's own worker threads and tiling (they never change a bit).

    Attributes
    ----------
    calls : list of Call
        The products emulated, in order.
    skipped : list of Call
        The products run in PyTorch instead, with the reason.

    Examples
    --------
    >>> import torch, tilegemm.torch
    >>> x = torch.ones(4, 64, dtype=torch.bfloat16)
    >>> layer = torch.nn.Linear(64, 8, dtype=torch.bfloat16)
    >>> with tilegemm.torch.emulate() as mode:
    ...     y = layer(x)
    >>> y.dtype, tuple(y.shape), mode.calls[0].problem
    (torch.bfloat16, (4, 8), 'mm 4x64x8, weights ba, sum post-op')
    """

    def __init__(
        self,
        isa: str = "onednn",
        *,
        strict: bool = False,
        onednn_threads: int | None = None,
        host: _onednn.Host | str | None = None,
        threads: int | None = None,
        tiling: str | None = None,
    ):
        super().__init__()
        prof = instructions.profile(isa)
        if prof.library is None:
            libs = ", ".join(p.name for p in instructions.PROFILES.values() if p.library is not None)
            raise ValueError(f"emulate() runs library profiles ({libs}); isa={isa!r} is one instruction sequence")
        if onednn_threads is not None and (
            isinstance(onednn_threads, bool) or not isinstance(onednn_threads, int) or onednn_threads < 1
        ):
            raise ValueError(f"onednn_threads must be a positive integer or None, got {onednn_threads!r}")
        if host is not None:
            host = _onednn.schedule.as_host(host)  # a Host, or a name of tilegemm.onednn.HOSTS
        self.isa = prof.name
        self.strict = bool(strict)
        self.onednn_threads = onednn_threads
        self.host = host
        self.threads = threads
        self.tiling = tiling
        self.calls: list[Call] = []
        self.skipped: list[Call] = []
        self._handlers = _handlers()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = self._handlers.get(func)
        if entry is None:
            name = _PRODUCTS.get(func)
            if name is None:
                return func(*args, **kwargs)
            return self._skip(func, name, args, kwargs, "the onednn profile does not model this function")
        name, handler = entry
        try:
            out = handler(self, *args, **kwargs)
        except _Uncovered as e:
            return self._skip(func, name, args, kwargs, str(e))
        if _needs_grad(args, kwargs):
            reference = func(*args, **kwargs)
            out = _ReplaceValues.apply(reference, out)
        return out

    def _skip(self, func, name, args, kwargs, reason):
        shapes = ", ".join(_shape(a) for a in args if isinstance(a, torch.Tensor))
        dtypes = ", ".join(sorted({str(a.dtype) for a in args if isinstance(a, torch.Tensor)}))
        call = Call(name, f"{name}({shapes}) {dtypes}", None, reason)
        if self.strict:
            raise NotEmulated(f"{call.problem}: {reason}")
        self.skipped.append(call)
        return func(*args, **kwargs)

    # -- the products, as oneDNN receives them ------------------------------------------------

    def _plan(self, M, K, N, batch, b_transposed, post_sum):
        return _onednn.plan(
            M,
            K,
            N,
            batch=batch,
            onednn_threads=self.onednn_threads,
            b_transposed=b_transposed,
            post_sum=post_sum,
            host=self.host,
        )

    def _record(self, name, kind, M, K, N, batch, b_transposed, post_sum, p):
        dims = f"{M}x{K}x{N}" if kind == "mm" else f"{batch}x{M}x{K}x{N}"
        extra = (", weights ba" if b_transposed else "") + (", sum post-op" if post_sum else "")
        self.calls.append(Call(name, f"{kind} {dims}{extra}", p))

    def _mm(self, name, a, b, c=None, beta=1.0):
        """``addmm(c, a, b, beta)`` (``mm`` without c) of 2-D bf16 tensors, as a fresh tensor."""
        M, K = a.shape
        N = b.shape[1]
        if K == 0 or M == 0 or N == 0:
            raise _Uncovered("an empty product")
        Mo, No, src_t, wei_t = _mm_layout(a, b)
        if src_t and Mo != 1:
            raise _Uncovered("oneDNN would see a transposed source (A stored column-major), which is not modelled")
        post_sum = c is not None and beta != 0
        p = self._plan(Mo, K, No, 1, wei_t, post_sum)
        self._record(name, "mm", Mo, K, No, 1, wei_t, post_sum, p)
        c_np = None
        if post_sum:
            c_np = to_numpy(c.expand(M, N))
        w = _PACKED.get(b, p.kernel) if p.kernel in ("brgemm", "gemm") else None
        out = _onednn.compute(
            to_numpy(a), to_numpy(b) if w is None else w, p, c=c_np, beta=beta, threads=self.threads, tiling=self.tiling
        )
        return from_numpy(out)

    def _bmm(self, name, a, b, c=None, beta=1.0):
        """``baddbmm(c, a, b, beta)`` (``bmm`` without c) of 3-D bf16 tensors."""
        B, M, K = a.shape
        N = b.shape[2]
        if min(B, M, K, N) == 0:
            raise _Uncovered("an empty product")
        if _bmm_format(a) == "transposed" and M != 1:
            raise _Uncovered("oneDNN would see a transposed source (A stored column-major), which is not modelled")
        wei_t = _bmm_format(b) == "transposed"
        post_sum = c is not None and beta != 0
        p = self._plan(M, K, N, B, wei_t, post_sum)
        self._record(name, "bmm", M, K, N, B, wei_t, post_sum, p)
        c_np = to_numpy(c.expand(B, M, N)) if post_sum else None
        out = _onednn.compute(to_numpy(a), to_numpy(b), p, c=c_np, beta=beta, threads=self.threads, tiling=self.tiling)
        return from_numpy(out)

    def _matmul(self, name, t1, t2):
        """``torch.matmul``, as ``_matmul_impl`` (LinearAlgebra.cpp) takes it apart."""
        d1, d2 = t1.dim(), t2.dim()
        if d1 == 0 or d2 == 0:
            raise _Uncovered("0-d operands")
        if d2 == 1:
            raise _Uncovered("a matrix-vector product (mv/dot), which the onednn profile does not model")
        if d1 == 1 and d2 == 2:
            return self._mm(name, t1.unsqueeze(0), t2).squeeze_(0)
        if d1 == 2 and d2 == 2:
            return self._mm(name, t1, t2)
        if _should_fold(t1, t2):
            transpose = d2 > d1
            f1 = t2.mT if transpose else t1
            f2 = (t1.t() if d1 == 2 else t1) if transpose else t2
            if f2.dim() != 2:
                raise _Uncovered("a matrix-vector product (mv), which the onednn profile does not model")
            shape = tuple(f1.shape[:-1]) + (f2.shape[1],)
            folded = f1.reshape(-1, f1.shape[-1])
            out = self._mm(name, folded, f2).view(shape)
            return out.mT.contiguous() if transpose else out
        # bmm over the broadcast batch
        if d1 == 3 and d2 == 3 and t1.shape[0] != t2.shape[0]:
            if t1.shape[0] == 1 and t1.requires_grad:
                return self._matmul(name, t1.squeeze(0), t2)
            if t2.shape[0] == 1 and t2.requires_grad:
                return self._matmul(name, t1, t2.squeeze(0))
        n = t1.shape[-2] if d1 > 1 else 1
        m1 = t1.shape[-1]
        p = t2.shape[-1]
        batch = torch.broadcast_shapes(t1.shape[: max(d1 - 2, 0)], t2.shape[: max(d2 - 2, 0)])
        nb = int(np.prod(batch, dtype=np.int64))
        e1 = t1.expand(tuple(batch) + (n, m1)).reshape(nb, n, m1)
        e2 = t2.expand(tuple(batch) + (t2.shape[-2], p)).reshape(nb, t2.shape[-2], p)
        out = self._bmm(name, e1, e2)
        shape = tuple(batch) + ((n,) if d1 > 1 else ()) + (p,)
        return out.view(shape)

    def _linear(self, name, x, weight, bias=None):
        """``F.linear`` (aten/src/ATen/native/Linear.cpp)."""
        if x.dim() == 0 or weight.dim() not in (1, 2):
            raise _Uncovered("0-d input or a weight of more than two dimensions")
        if weight.dim() == 1:
            raise _Uncovered("a 1-D weight (a matrix-vector product)")
        if x.dim() == 2 and bias is not None:
            return self._mm(name, x, weight.t(), bias, 1.0)
        fusable = bias is not None and (bias.dim() == 1 or bias.squeeze().dim() == 1) and bias.is_contiguous()
        if fusable and x.is_contiguous():
            rows = x.reshape(-1, x.shape[-1])
            out = self._mm(name, rows, weight.t(), bias, 1.0)
            return out.view(tuple(x.shape[:-1]) + (weight.shape[0],))
        out = self._matmul(name, x, weight.t())
        if bias is not None:
            out.add_(bias)  # bf16 + bf16 in PyTorch: one rounding, the same on every CPU
        return out


def _should_fold(t1: torch.Tensor, t2: torch.Tensor) -> bool:
    """``should_fold`` (LinearAlgebra.cpp): fold an N-D @ 2-D (or 2-D @ N-D) product into one mm."""
    larger = t1.dim() >= t2.dim()
    f1 = t1 if larger else t2.mT
    dim_small = t2.dim() if larger else t1.dim()
    if not (f1.dim() >= 3 and dim_small <= 2):
        return False
    if (t2 if larger else t1).requires_grad:
        return True
    if t1.dim() == 2:
        return False
    if f1.numel() == 0:
        return True
    sizes, strides = f1.shape, f1.stride()
    return all(strides[i] == strides[i + 1] * sizes[i + 1] for i in range(f1.dim() - 2))


def _needs_grad(args, kwargs) -> bool:
    if not torch.is_grad_enabled():
        return False
    vals = list(args) + list(kwargs.values())
    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in vals)


def _is_bf16_cpu(*ts) -> None:
    for t in ts:
        if t is None:
            continue
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise _Uncovered(f"an operand of type {type(t).__name__}")
        if t.dtype != torch.bfloat16:
            raise _Uncovered(f"dtype {t.dtype}: the onednn profile models bf16 products")
        if t.device.type != "cpu" or t.layout != torch.strided:
            raise _Uncovered(f"a {t.device.type} / {t.layout} tensor")
        if t.is_conj() or t.is_neg():
            raise _Uncovered("a lazily conjugated or negated tensor")


def _scalar(v, name) -> float:
    if isinstance(v, torch.Tensor):
        raise _Uncovered(f"{name} given as a tensor")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise _Uncovered(f"{name}={v!r}") from None


def _h_mm(mode, a, b, *, out=None):
    if out is not None:
        raise _Uncovered("out=")
    _is_bf16_cpu(a, b)
    if a.dim() != 2 or b.dim() != 2:
        raise _Uncovered("mm of operands that are not 2-D")
    return mode._mm("mm", a, b)


def _h_bmm(mode, a, b, *, out=None):
    if out is not None:
        raise _Uncovered("out=")
    _is_bf16_cpu(a, b)
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
        raise _Uncovered("bmm of operands that are not 3-D with one batch")
    return mode._bmm("bmm", a, b)


def _h_addmm(mode, c, a, b, *, beta=1, alpha=1, out=None):
    if out is not None:
        raise _Uncovered("out=")
    _is_bf16_cpu(c, a, b)
    beta, alpha = _scalar(beta, "beta"), _scalar(alpha, "alpha")
    if alpha != 1.0:
        raise _Uncovered(f"alpha={alpha} (oneDNN's output scale is not modelled)")
    if a.dim() != 2 or b.dim() != 2:
        raise _Uncovered("addmm of operands that are not 2-D")
    try:
        torch.broadcast_shapes(c.shape, (a.shape[0], b.shape[1]))
    except RuntimeError:
        raise _Uncovered("an input that does not broadcast to the result") from None
    return mode._mm("addmm", a, b, c, beta)


def _h_baddbmm(mode, c, a, b, *, beta=1, alpha=1, out=None):
    if out is not None:
        raise _Uncovered("out=")
    _is_bf16_cpu(c, a, b)
    beta, alpha = _scalar(beta, "beta"), _scalar(alpha, "alpha")
    if alpha != 1.0:
        raise _Uncovered(f"alpha={alpha} (oneDNN's output scale is not modelled)")
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
        raise _Uncovered("baddbmm of operands that are not 3-D with one batch")
    return mode._bmm("baddbmm", a, b, c, beta)


def _h_matmul(mode, a, b, *, out=None):
    if out is not None:
        raise _Uncovered("out=")
    _is_bf16_cpu(a, b)
    return mode._matmul("matmul", a, b)


def _h_rmatmul(mode, b, a):
    _is_bf16_cpu(a, b)
    return mode._matmul("matmul", a, b)


def _h_linear(mode, x, weight, bias=None):
    _is_bf16_cpu(x, weight, bias)
    return mode._linear("linear", x, weight, bias)


def _handlers() -> dict:
    """PyTorch function -> (name, handler) for the products the mode emulates."""
    import torch.nn.functional as F

    table = {}
    for funcs, name, h in (
        ((torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__), "matmul", _h_matmul),
        ((torch.Tensor.__rmatmul__,), "matmul", _h_rmatmul),
        ((torch.mm, torch.Tensor.mm), "mm", _h_mm),
        ((torch.bmm, torch.Tensor.bmm), "bmm", _h_bmm),
        ((torch.addmm, torch.Tensor.addmm), "addmm", _h_addmm),
        ((torch.baddbmm, torch.Tensor.baddbmm), "baddbmm", _h_baddbmm),
        ((F.linear,), "linear", _h_linear),
    ):
        for f in funcs:
            table[f] = (name, h)
    return table


def _product_names() -> dict:
    """Other matrix products: not emulated, listed (strict: an error)."""
    import torch.nn.functional as F

    names = {}
    candidates = [
        (
            torch,
            [
                "addmv",
                "addr",
                "addbmm",
                "mv",
                "dot",
                "vdot",
                "inner",
                "einsum",
                "tensordot",
                "chain_matmul",
                "conv1d",
                "conv2d",
                "conv3d",
                "conv_transpose1d",
                "conv_transpose2d",
                "conv_transpose3d",
            ],
        ),
        (torch.Tensor, ["addmv", "addmv_", "addbmm", "addbmm_", "addmm_", "baddbmm_", "mv", "dot", "vdot", "inner"]),
        (torch.linalg, ["matmul", "multi_dot", "vecdot"]),
        (
            F,
            [
                "bilinear",
                "conv1d",
                "conv2d",
                "conv3d",
                "conv_transpose1d",
                "conv_transpose2d",
                "conv_transpose3d",
                "scaled_dot_product_attention",
                "multi_head_attention_forward",
            ],
        ),
    ]
    for owner, attrs in candidates:
        for a in attrs:
            f = getattr(owner, a, None)
            if f is not None:
                names[f] = a
    return names


_PRODUCTS = _product_names()


# -- the fleet question: one model on several hosts --------------------------------------------

#: One host of each modelled server class: AMX Xeon, AMD EPYC Zen 4 (VDPBF16PS), a Xeon without
#: AMX or AVX512_BF16 (gemm:jit; the Zen 4 under ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``), AVX2 server.
FLEET = ("recording-amx", "recording-zen4", "recording-zen4-avx512", "milan-64")


@dataclass(frozen=True)
class LayerDiff:
    """One layer's output on two hosts, compared bit for bit (:func:`tilegemm.bitdiff`)."""

    layer: str
    hosts: tuple[str, str]
    diff: BitDiff


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found.

    Attributes
    ----------
    hosts:
        The hosts, in the order given.
    layers:
        Every module whose output was compared, in the order of their first call (``name#2`` for
        a module's second call), the model's own output last (``"(output)"``).
    rows:
        One :class:`LayerDiff` per layer and pair of hosts.
    outputs:
        The model's output on each host (the first tensor it returns).
    skipped:
        Per host, the products PyTorch ran unemulated (:attr:`emulate.skipped`).
    """

    hosts: tuple[str, ...]
    layers: tuple[str, ...]
    rows: tuple[LayerDiff, ...]
    outputs: dict
    skipped: dict

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [(a, b) for i, a in enumerate(self.hosts) for b in self.hosts[i + 1 :]]

    def divergence(self) -> np.ndarray:
        """The share of each layer's outputs that differ, layers x pairs (:attr:`pairs`)."""
        share = {(r.layer, r.hosts): r.diff.share for r in self.rows}
        return np.array([[share[(layer, p)] for p in self.pairs] for layer in self.layers])

    def table(self) -> str:
        """The per-layer table: for each pair of hosts, the outputs that differ, the largest
        distance in ulp, and the first differing index."""
        head = ("layer", "hosts", "differ", "max ulp", "first")
        lines = [head]
        for r in self.rows:
            d = r.diff
            first = "" if d.first is None else str(tuple(int(i) for i in d.first))
            ulp = str(d.max_ulp) + (f" +{d.sign_flips} sign" if d.sign_flips else "") if d.count else ""
            lines.append((r.layer, f"{r.hosts[0]} / {r.hosts[1]}", f"{d.count} of {d.total}", ulp, first))
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in lines)

    def __str__(self) -> str:
        return self.table()

    def plot(self, ax=None):
        """A heatmap of :meth:`divergence` (layers down, host pairs across) on ``ax`` (a new
        figure's by default), with matplotlib, which tilegemm does not require."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:  # pragma: no cover - matplotlib is installed with the tests
            raise ImportError("Comparison.plot needs matplotlib: pip install matplotlib") from e
        data = self.divergence() * 100
        if ax is None:
            _, ax = plt.subplots(figsize=(2.2 + 1.6 * len(self.pairs), 1.0 + 0.32 * len(self.layers)))
        im = ax.imshow(data, cmap="viridis", aspect="auto", vmin=0)
        ax.set_xticks(range(len(self.pairs)), [f"{a}\nvs {b}" for a, b in self.pairs], fontsize=8)
        ax.set_yticks(range(len(self.layers)), self.layers, fontsize=8)
        for (i, j), v in np.ndenumerate(data):
            ax.text(j, i, f"{v:.2f}%", ha="center", va="center", fontsize=7, color="w" if v < data.max() / 2 else "k")
        ax.figure.colorbar(im, ax=ax, label="outputs that differ (%)")
        ax.set_title("bf16 outputs that differ between server classes", fontsize=9)
        return ax


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def compare(model, *inputs, hosts=FLEET, onednn_threads: int | None = None, strict: bool = False, **kwargs):
    """Run ``model(*inputs, **kwargs)`` once per host under :class:`emulate` and compare every
    layer's output between each pair of hosts, bit for bit.

    Parameters
    ----------
    model : torch.nn.Module
        Run in inference mode (``torch.no_grad()``); every submodule's output (the first tensor
        it returns) is recorded with a forward hook.
    inputs, kwargs
        The model's arguments, the same on every host.
    hosts : sequence of str or tilegemm.onednn.Host
        At least two hosts (names of :data:`tilegemm.onednn.HOSTS` or Hosts); default
        :data:`FLEET`, one of each server class.
    onednn_threads : int, optional
        PyTorch's thread count on every host (default: each host's cores).
    strict : bool
        As :class:`emulate`: raise on a product that cannot be emulated.

    Returns
    -------
    Comparison
        ``print(result)`` shows the table; ``result.plot()`` draws the heatmap.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare needs a torch.nn.Module, got {type(model).__name__}")
    hosts = tuple(hosts)
    names = [h if isinstance(h, str) else repr(h) for h in hosts]
    if len(hosts) < 2:
        raise ValueError(f"compare needs at least two hosts, got {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"compare got a host twice: {names}")
    for h in hosts:
        _onednn.schedule.as_host(h)  # an unknown name fails before anything runs
    runs, outputs, skipped = {}, {}, {}
    order: list[str] = []
    for name, host in zip(names, hosts):
        seen: dict[str, np.ndarray] = {}
        counts: dict[str, int] = {}
        handles = []

        def hook(module, args, out, _path=None):
            t = _first_tensor(out)
            if t is None:
                return
            counts[_path] = counts.get(_path, 0) + 1
            key = _path if counts[_path] == 1 else f"{_path}#{counts[_path]}"
            seen[key] = (
                t.detach().to(torch.float32).numpy().copy()
                if t.dtype != torch.bfloat16
                else to_numpy(t.detach()).copy()
            )

        for path, module in model.named_modules():
            if path:  # the model itself is the output row
                handles.append(module.register_forward_hook(lambda m, a, o, _p=path: hook(m, a, o, _p)))
        try:
            with torch.no_grad(), emulate(host=host, onednn_threads=onednn_threads, strict=strict) as mode:
                out = model(*inputs, **kwargs)
        finally:
            for h in handles:
                h.remove()
        final = _first_tensor(out)
        if final is None:
            raise TypeError(f"the model returned no tensor ({type(out).__name__})")
        seen["(output)"] = to_numpy(final).copy() if final.dtype == torch.bfloat16 else final.to(torch.float32).numpy()
        for key in seen:
            if key not in order:
                order.append(key)
        runs[name], outputs[name], skipped[name] = seen, final, list(mode.skipped)
    order.remove("(output)")
    order.append("(output)")
    rows = []
    for layer in order:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if layer in runs[a] and layer in runs[b]:
                    rows.append(LayerDiff(layer, (a, b), bitdiff(runs[a][layer], runs[b][layer])))
    layers = tuple(layer for layer in order if all(layer in runs[n] for n in names))
    return Comparison(tuple(names), layers, tuple(rows), outputs, skipped)


class _Attention(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        h = self.heads
        q, k, v = (t.reshape(B, T, h, C // h).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) * (C // h) ** -0.5
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class _Block(torch.nn.Module):
    def __init__(self, d: int, heads: int, mlp: int):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = _Attention(d, heads)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, mlp)
        self.fc2 = torch.nn.Linear(mlp, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def demo_model(layers: int = 2, d: int = 128, heads: int = 4, mlp: int = 512, seq: int = 64, batch: int = 2, seed=0):
    """A small GPT-like stack of pre-norm transformer blocks in bf16 (causal attention, GELU MLP),
    with random weights from ``seed``, and an input ``(batch, seq, d)``: what ``python -m tilegemm
    fleet --demo`` compares."""
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(*(_Block(d, heads, mlp) for _ in range(layers)))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 if p.dim() == 1 and p.shape[0] == d else 0.05))
    x = torch.randn(batch, seq, d, generator=g)
    return model.to(torch.bfloat16).eval(), x.to(torch.bfloat16)

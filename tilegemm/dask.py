"""``tilegemm.dask.matmul``: tilegemm products of dask arrays, with the bits of one call.

For data sets and models too large for one process or one machine: ``matmul(x, y)`` with ``x`` a
dask array ``(..., M, K)`` and ``y`` a dask or NumPy array ``(K, N)`` or a :class:`tilegemm.PackedB`
returns a dask array whose every element has exactly the bits of
``tilegemm.matmul(x.compute(), y, ...)``, whatever the chunking and wherever the tasks run.

How the bits stay those of one call: each task computes one block of the result from the whole K.
Its row panel of ``x`` and column panel of ``y`` arrive as the chunks along K and are joined
(``numpy.concatenate``) inside the task, which then makes one tilegemm call. Every output of
tilegemm depends only on its row of ``x``, its column of ``y``, K and the profile (the tiling and
the thread count never change a bit), so a task's outputs are the single call's. K chunks are not
chained from task to task: a chain split anywhere but on a whole instruction step (32 elements
for BF16/FP16, 64 for int8) would step through K differently, and across tasks it would also
serialise the work along K. For the ``"onednn"`` profile, whose blocking depends on the whole
problem, the plan is made once for the full shape and every task computes its block with it.

A :class:`tilegemm.PackedB` is a broadcast weight: it enters the graph once (one key), every task
reads it, and the result has one chunk along N. On a ``dask.distributed`` cluster it travels to
each worker that needs it once (it pickles as its packed bytes), and the tasks of a worker share
it, with the kernels' form of it made once.

Needs dask (``pip install "tilegemm[dask]"``).
"""

from __future__ import annotations

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as e:  # pragma: no cover - exercised only without dask
    raise ImportError('tilegemm.dask needs dask: pip install "tilegemm[dask]"') from e

from . import instructions
from .api import matmul as _matmul
from .dispatch import lookup
from .formats import bf16_dtype
from .packing import PackedB

__all__ = ["matmul"]

_LETTERS = "abcdefgh"


def _block(xb, yb, name, tiling, isa, threads, switches, plan):
    """One task: the result block of ``xb`` (..., mi, K) and ``yb`` (K, nj) or a PackedB."""
    if isinstance(xb, list):  # chunks along K (dask hands them over unjoined when asked to)
        xb = np.concatenate(xb, axis=-1)
    if isinstance(yb, list):
        yb = np.concatenate(yb, axis=0)
    if plan is not None:
        from . import onednn

        return onednn.compute(xb, yb, plan, threads=threads, tiling=tiling)
    return _matmul(xb, yb, name, tiling, isa=isa, threads=threads, **switches)


def matmul(x, y, dtype=None, tiling=None, *, isa=None, threads=None, **options):
    """The tilegemm product of dask arrays, bit for bit that of one :func:`tilegemm.matmul` call.

    Parameters
    ----------
    x : dask.array.Array or array_like, (..., M, K)
        Chunked any way; leading dimensions are batch rows.
    y : dask.array.Array or array_like (K, N), or PackedB
        Chunked any way along K and N; a :class:`tilegemm.PackedB` is used as one broadcast
        weight (the result then has one chunk along N).
    dtype, tiling, isa, threads :
        As for :func:`tilegemm.matmul` (``threads``: tilegemm's workers inside each task).
    **options
        The instruction's switches, or, for ``isa="onednn"``, the keywords of
        :func:`tilegemm.onednn.matmul` that shape its plan (``onednn_threads``,
        ``b_transposed``, ``host``).

    Returns
    -------
    dask.array.Array
        ``(..., M, N)``, chunked as ``x`` along the rows and as ``y`` along N; the dtype of
        :func:`tilegemm.matmul` (bfloat16 for ``isa="onednn"``).

    Examples
    --------
    >>> import numpy as np, dask.array as da, tilegemm, tilegemm.dask
    >>> a = np.arange(12.0).reshape(3, 4)
    >>> x = da.from_array(a, chunks=(1, 3))
    >>> r = tilegemm.dask.matmul(x, np.ones((4, 2)))
    >>> bool(tilegemm.bitdiff(r.compute(), tilegemm.matmul(a, np.ones((4, 2)))).identical)
    True
    """
    packed = y if isinstance(y, PackedB) else None
    x = x if isinstance(x, da.Array) else da.asarray(x)
    if packed is None:
        y = y if isinstance(y, da.Array) else da.asarray(y)
    y_shape = packed.shape if packed is not None else y.shape
    if x.ndim < 2 or len(y_shape) != 2:
        raise ValueError(
            f"tilegemm.dask.matmul takes x of shape (..., M, K) and y of shape (K, N), got {x.shape} and {y_shape}"
        )
    K, N = y_shape
    if x.shape[-1] != K:
        raise ValueError(f"inner dimensions do not match: x has shape {x.shape} and y has shape {y_shape}")
    if any(np.isnan(s) for s in x.shape) or (packed is None and any(np.isnan(s) for s in y.shape)):
        raise ValueError("tilegemm.dask.matmul needs known chunk sizes (call compute_chunk_sizes() first)")
    if packed is not None:
        prof, name, instr = instructions.resolve(
            packed.isa if isa is None else isa, packed.dtype if dtype is None else dtype
        )
        if instr.b_layout != packed.instruction.b_layout:
            raise ValueError(f"dtype {name!r} on isa={prof.name!r} contradicts the packed B ({packed.dtype!r})")
    else:
        prof, name, instr = instructions.resolve(instructions.DEFAULT_ISA if isa is None else isa, dtype or "bf16")
    plan = None
    switches = {}
    if prof.library is not None:
        from . import onednn

        unknown = set(options) - {"onednn_threads", "b_transposed", "host"}
        if unknown:
            raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r} for isa={prof.name!r}")
        M = int(np.prod(x.shape[:-1], dtype=np.int64))
        plan = onednn.plan(M, K, N, **options)  # one plan for the whole problem
        out_dtype = bf16_dtype()
    else:
        instr.options(options, name)  # validates the switches before any task runs
        switches = dict(options)
        if tiling not in (None, "auto"):
            lookup(prof.name, name, tiling)
        out_dtype = instr.acc
    lead = _LETTERS[: x.ndim - 2]
    literals = sum(((a, None) for a in (name, tiling, prof.name, threads, switches, plan)), ())
    if packed is not None:
        weight = dask.delayed(packed, pure=True)  # one key: the whole graph shares it
        x = x.rechunk({x.ndim - 1: -1})  # the whole K in every task
        return da.blockwise(
            _block, lead + "ij", x, lead + "ik", weight, None, *literals,
            new_axes={"j": N}, dtype=out_dtype, concatenate=True,
        )  # fmt: skip
    return da.blockwise(
        _block, lead + "ij", x, lead + "ik", y, "kj", *literals, dtype=out_dtype, concatenate=True
    )  # fmt: skip

"""The traffic model beside the ported kernels: AMX 2x2, AMX with six accumulators and ACE.

:func:`ports` runs each port on ``tilegemm.amx`` (``tilegemm.amx.seed``, ``tilegemm.amx.ace_seed``),
counts what it loads, and puts that beside the bytes per MAC that :func:`tilegemm.model.traffic`
gives its output block (``python -m tilegemm model`` prints it). This lives beside
``tilegemm.model``, not in it, because the ports need the tile unit, which needs the dispatch
table, which needs the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from .instructions import DEFAULT_ISA, PROFILES, resolve
from .model import traffic

__all__ = ["ACE_ISA", "Port", "ports", "ace_counterpart"]


#: The profile of the outer-product kernels (``tilegemm.amx.ace_seed``).
ACE_ISA = "ace"


def ace_counterpart(dtype: str) -> str | None:
    """The ACE dtype that multiplies what AMX's ``dtype`` multiplies (the same A and B formats;
    the MX forms with every scale 1.0), or None (FP16, complex FP16 pairs)."""
    instr = resolve(DEFAULT_ISA, dtype)[2]
    ace = PROFILES[ACE_ISA]
    if dtype in ace.names():
        return resolve(ACE_ISA, dtype)[1]
    for name, other in ace.dtypes.items():
        if other.a == instr.a and other.b == instr.b:
            return name
    return None


@dataclass(frozen=True)
class Port:
    """One ported kernel side by side with the model: its output block, the modelled bytes per
    MAC of the whole GEMM, and what running the port on ``tilegemm.amx`` counted."""

    kernel: str
    isa: str
    dtype: str
    block: tuple[int, int]  # output elements per block (rows, columns)
    modelled: float  # bytes per MAC of the m x n x k GEMM under the excerpt's accounting
    counted: float  # bytes loaded per MAC, counted on the port's run
    loads: int  # tile loads (AMX) or zmm loads (ACE, BSRMOVF's two included)
    ops: int  # tile multiplies (AMX) or outer products (ACE)
    size: tuple[int, int, int]  # the port's run, m x n x k


def ports(m: int, n: int, k: int, dtype: str = "int8", size: tuple[int, int, int] | None = None) -> list[Port]:
    """AMX 2x2, AMX with six accumulators and ACE (2x2 and the excerpt's 32 x 64), each modelled
    at ``m x n x k`` and counted on a run of its port (``tilegemm.amx.seed``,
    ``tilegemm.amx.ace_seed``) of ``size`` (default 96 x 192 x four AMX K steps, whole blocks for
    every kernel). ``dtype`` is an AMX dtype; ACE runs its counterpart (:func:`ace_counterpart`),
    and has no rows where there is none.

    The AMX six-accumulator port is the seed style with one A and one B tile register, so it
    reloads the B tiles for each row block and counts more than the model (8 loads per 6
    multiplies where the model has 5); the ACE ports keep every zmm they load for all outer
    products of a step, as the model assumes, plus the block scales of the MX forms.
    """
    from .amx import ace_seed, seed

    instr = resolve(DEFAULT_ISA, dtype)[2]
    if size is None:
        size = (96, 192, 4 * instr.k_step)
    sm, sn, sk = size
    cases = [
        ("AMX 2x2", DEFAULT_ISA, dtype, seed.gemm_2x2_resident, (2, 2), {}),
        ("AMX six accumulators (2x3)", DEFAULT_ISA, dtype, seed.gemm_single_buffered, (2, 3), {"R": 2, "C": 3}),
    ]
    ace = ace_counterpart(dtype)
    if ace is not None:
        cases += [
            ("ACE 2x2", ACE_ISA, ace, ace_seed.gemm_2x2, (2, 2), {}),
            ("ACE 2x4 (32 x 64)", ACE_ISA, ace, ace_seed.gemm_2x4, (2, 4), {}),
        ]
    out = []
    for label, isa, name, port, (r, c), kw in cases:
        counter = seed.count if isa == DEFAULT_ISA else ace_seed.count
        got = counter(port, sm, sn, sk, name, **kw)
        block = (16 * r, 16 * c)
        if isa == DEFAULT_ISA:
            loads, ops = got.tile_loads, got.multiplies
        else:
            loads, ops = got.vector_loads, got.outer_products
        modelled = traffic(m, n, k, block, dtype).bytes_per_mac
        out.append(Port(label, isa, name, block, modelled, got.bytes_loaded / got.macs, loads, ops, size))
    return out

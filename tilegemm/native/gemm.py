"""The native GEMM: operands, job tables and threads around the compiled programs.

``run`` takes what ``tilegemm.matmul`` has prepared for the emulation (A as codes, the
``PackedB`` whose blocks ``TILELOADD`` reads with stride 64, C already zeroed or read with DAZ)
and runs the instruction's native program (``program.gemm_ir`` for tile instructions,
``vdp.vdp_ir`` for VDPBF16PS) over a job table:

- A: the codes ``(nA, M, Kg)`` with K padded by zeros to whole pairs or quads (the tail rule
  runs whole groups, and a short last step must not read the next row);
- B: ``PackedB.data`` as packed, block ``(kb, nb)`` of matrix ``bi`` at
  ``((bi * KB + kb) * NB + nb) * 1024``;
- C: the result ``(nC, M, N)`` in place.

Jobs are ordered by column panel (consecutive superblocks share B), cut into one contiguous
range per thread (Numba's static ``prange`` schedule) and run by Python threads made for the
call (``tilegemm.workers.run``; the calling thread runs the first range), each calling the compiled function through
``ctypes``, which releases the GIL. Before any thread runs a job, every thread has asked for
tile permission (``host.request_tile_permission``) and waited for the others, so a refusal in
any thread raises before any job has run.

The compiled code is made for a *target*: :data:`HOST` (this CPU, the real instructions) or the
dry run of ``tilegemm.native.dryrun`` (the same code with each tile instruction a call into the
emulated ``TileUnit``), which exists so that hosts without AMX can execute everything but the
silicon's arithmetic.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import workers
from ..amx.config import TileConfig
from ..instructions import Instruction
from ..reference.amx import wrap32
from . import program, vdp
from .host import request_tile_permission

__all__ = ["Target", "HOST", "run", "kernel", "tile_jobs", "dot_jobs", "k_steps", "padded_a", "generator"]

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@dataclass(frozen=True)
class Target:
    """Where compiled programs run. ``lower`` names the function each tile intrinsic becomes;
    ``features`` are added to the host's when compiling; ``session(buffers)`` brackets one run;
    ``permission`` says whether worker threads must ask for tile data first."""

    name: str
    lower: Callable[[str], str]
    features: str
    permission: bool
    session: Callable = lambda buffers: nullcontext()


#: This CPU, running the real instructions.
HOST = Target("host", lambda n: n, "", True)


def generator(instr: Instruction) -> str | None:
    """Which native program runs ``instr``: ``"tiles"`` (any tile instruction, from its
    ``llvm`` field), ``"dot"`` (one instruction per K group on 16 columns: VDPBF16PS, VPDPBUSD(S),
    VPMADDUBSW, VFMADD231PS; ``vdp.kind``), or None (no native program)."""
    if instr.tile_method is not None and instr.llvm is not None:
        return "tiles"
    if vdp.kind(instr) is not None:
        return "dot"
    return None


@functools.cache
def kernel(target: Target, instr: Instruction, rows: int, cols: int) -> Callable[..., None]:
    """The compiled native GEMM for ``instr`` and an R x C superblock on ``target``."""
    from . import jit

    name = f"tilegemm_{instr.mnemonic.lower()}_{rows}x{cols}_{target.name}"
    kind = generator(instr)
    if kind == "tiles":
        text = program.gemm_ir(instr, program.plan(rows, cols), name, target.lower)
    elif kind == "dot":
        text = vdp.dot_ir(name, vdp.kind(instr))  # type: ignore[arg-type]
    else:
        raise ValueError(f"{instr.mnemonic} has no native program")
    return _FN(jit.compile_host(text, (name,), target.features)[name])


def k_steps(instr: Instruction, K: int) -> tuple[int, int, int]:
    """``(full steps, 1 if a short last step follows else 0, K4 of that step)`` for K > 0:
    the tail rule (``docs/native.md``): K rounded up to whole groups, cut into steps of
    ``k_step``, the last one covering what remains."""
    kg = -(-K // instr.group) * instr.group
    steps = -(-kg // instr.k_step)
    last = (kg - (steps - 1) * instr.k_step) // instr.group
    full_groups = instr.k_step // instr.group
    return (steps, 0, full_groups) if last == full_groups else (steps - 1, 1, last)


def padded_a(instr: Instruction, a_codes: np.ndarray) -> np.ndarray:
    """A's codes ``(nA, M, K)`` contiguous with K padded by zeros to whole groups."""
    nA, M, K = a_codes.shape
    kg = -(-K // instr.group) * instr.group
    if kg == K:
        return np.ascontiguousarray(a_codes)
    out = np.zeros((nA, M, kg), a_codes.dtype)
    out[:, :, :K] = a_codes
    return out


def _tile_config(prog: program.Program, mr: int, nc: int, k4: int) -> bytes:
    """The LDTILECFG block for ``prog`` with every tile ``mr`` x ``nc`` and K4 = ``k4``."""
    rows, colsb = [0] * 8, [0] * 8
    for t in prog.acc:
        rows[t], colsb[t] = mr, 4 * nc
    for t in prog.a:
        rows[t], colsb[t] = mr, 4 * k4
    for t in prog.b:
        rows[t], colsb[t] = k4, 4 * nc
    return TileConfig(rows=tuple(rows), colsb=tuple(colsb)).to_bytes()


def _superblocks(nC, M, N, rows, cols):
    """Every superblock as arrays (ci, m0, n0), column panel first."""
    sm, sn = -(-M // (16 * rows)), -(-N // (16 * cols))
    ci, bn, bm = np.meshgrid(np.arange(nC), np.arange(sn), np.arange(sm), indexing="ij")
    return ci.ravel(), bm.ravel() * 16 * rows, bn.ravel() * 16 * cols


def tile_jobs(instr, prog, nC, M, N, K, ia, ib, lda, kb, nb):
    """The job table ``(n, 6)`` int64 (``program.JOB_FIELDS``) and the configuration table
    ``(n_cfg, 64)`` uint8 of one call.

    A superblock whose R x C tiles all exist in full is one job of ``prog``; every other one
    becomes one edge job per tile that exists (1x1 program, configured with the tile's rows and
    columns). Configurations 0 and 1 are ``prog``'s for full and last steps."""
    _, _, k4 = k_steps(instr, K)
    full = instr.k_step // instr.group
    edge = program.edge_program()
    cfgs = [_tile_config(prog, 16, 16, full), _tile_config(prog, 16, 16, k4)]
    index: dict[tuple[int, int], int] = {}
    ci, m0, n0 = _superblocks(nC, M, N, prog.rows, prog.cols)
    whole = (m0 + 16 * prog.rows <= M) & (n0 + 16 * prog.cols <= N)
    # Rows (superblock number, kind, ci, m0, n0, cfg_main, cfg_tail), sorted by superblock.
    sb = np.flatnonzero(whole)
    rows = [np.stack([sb, 0 * sb, ci[sb], m0[sb], n0[sb], 0 * sb, 0 * sb + 1], 1)]
    edges = []  # edge superblocks are few: one row and one column of them per matrix
    for j in np.flatnonzero(~whole).tolist():
        c, m, n = int(ci[j]), int(m0[j]), int(n0[j])
        for r in range(prog.rows):
            for cc in range(prog.cols):
                mm, nn = m + 16 * r, n + 16 * cc
                if mm >= M or nn >= N:
                    continue
                shape = (min(16, M - mm), min(16, N - nn))
                if shape not in index:
                    index[shape] = len(cfgs)
                    cfgs += [_tile_config(edge, *shape, full), _tile_config(edge, *shape, k4)]
                edges.append((j, 1, c, mm, nn, index[shape], index[shape] + 1))
    rows.append(np.array(edges, np.int64).reshape(-1, 7))
    t = np.concatenate(rows)
    t = t[np.argsort(t[:, 0], kind="stable"), 1:]
    c, m, n = t[:, 1], t[:, 2], t[:, 3]
    jobs = np.empty((len(t), len(program.JOB_FIELDS)), np.int64)
    jobs[:, 0] = t[:, 0]
    jobs[:, 1] = (ia[c] * M + m) * lda
    jobs[:, 2] = (ib[c] * kb * nb + n // 16) * program.TILE_BYTES
    jobs[:, 3] = ((c * M + m) * N + n) * 4
    jobs[:, 4:] = t[:, 4:]
    return jobs, np.frombuffer(b"".join(cfgs), np.uint8).reshape(-1, 64).copy()


def dot_jobs(nC, M, N, ia, ib, lda, kb, nb):
    """The dot programs' job table ``(n, 5)`` int64 (``vdp.JOB_FIELDS``): one per 16 x 16 C block."""
    ci, m0, n0 = _superblocks(nC, M, N, 1, 1)
    jobs = np.empty((len(ci), len(vdp.JOB_FIELDS)), np.int64)
    jobs[:, 0] = (ia[ci] * M + m0) * lda
    jobs[:, 1] = (ib[ci] * kb * nb + n0 // 16) * program.TILE_BYTES
    jobs[:, 2] = ((ci * M + m0) * N + n0) * 4
    jobs[:, 3] = np.minimum(16, M - m0)
    jobs[:, 4] = np.minimum(16, N - n0)
    return jobs


def _launch(fn: Callable[..., None], args: np.ndarray, njobs: int, threads: int, permission: bool) -> None:
    """Jobs ``0 .. njobs`` in ``threads`` contiguous ranges, one per thread (the calling thread
    runs the first). Threads are made per call: a shared pool could deadlock two concurrent
    calls at the permission barrier, and a thread costs far less than a job."""
    threads = max(1, min(int(threads), njobs))
    bounds = [njobs * t // threads for t in range(threads + 1)]
    addr = args.ctypes.data
    barrier = threading.Barrier(threads)
    refused: list[BaseException] = []

    def work(t: int, _: int) -> None:
        try:
            if permission:
                request_tile_permission()
        except BaseException as e:  # every thread must still reach the barrier
            refused.append(e)
        barrier.wait()
        if not refused:
            fn(addr, bounds[t], bounds[t + 1])

    workers.run(work, threads)
    if refused:
        raise refused[0]


def run(
    instr: Instruction,
    rows: int,
    cols: int,
    a_codes: np.ndarray,
    packed,
    C3: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    accumulate: bool,
    threads: int,
    target: Target = HOST,
) -> None:
    """``C3[i] += A[ia[i]] @ B[ib[i]]`` through the native program of ``instr`` (module docstring).

    ``a_codes``: ``(nA, M, K)`` codes; ``packed``: the ``PackedB``; ``C3``: ``(nC, M, N)``
    C-contiguous, holding the start values. The caller has checked that ``target`` can run it."""
    nC, M, N = C3.shape
    K = a_codes.shape[2]
    A = padded_a(instr, a_codes)
    lda = A.shape[2] * A.itemsize
    B = np.ascontiguousarray(packed.data)
    kb, nb = B.shape[-4], B.shape[-3]
    bstep = nb * program.TILE_BYTES
    ia = np.asarray(ia, np.int64)
    ib = np.asarray(ib, np.int64)
    fn = kernel(target, instr, rows, cols)
    if generator(instr) == "tiles":
        nfull, tail, _ = k_steps(instr, K)
        jobs, cfgs = tile_jobs(instr, program.plan(rows, cols), nC, M, N, K, ia, ib, lda, kb, nb)
        fields = dict(
            A=A.ctypes.data,
            lda=lda,
            B=B.ctypes.data,
            bstep=bstep,
            C=C3.ctypes.data,
            ldc=N * 4,
            nfull=nfull,
            tail=tail,
            cfgs=cfgs.ctypes.data,
            jobs=jobs.ctypes.data,
            accumulate=int(accumulate),
            astep=instr.k_step * A.itemsize,
        )
        args = np.array([fields[f] for f in program.ARGS], np.int64)
        buffers = {"A": A, "B": B, "C": C3, "configurations": cfgs}
        permission = target.permission
    else:
        if instr.a.storage.kind == "i":  # signed activations: the +128 shift around the instruction
            A = _shift_signed(A, packed, C3, ib)
        jobs = dot_jobs(nC, M, N, ia, ib, lda, kb, nb)
        fields = dict(
            A=A.ctypes.data,
            lda=lda,
            B=B.ctypes.data,
            bstep=bstep,
            C=C3.ctypes.data,
            ldc=N * 4,
            ngroups=-(-K // instr.group),
            jobs=jobs.ctypes.data,
            odd=K % instr.group != 0,
        )
        args = np.array([fields[f] for f in vdp.ARGS], np.int64)
        buffers = {"A": A, "B": B, "C": C3}
        permission = False
    with target.session(buffers):
        _launch(fn, args, len(jobs), threads, permission)


def _shift_signed(A: np.ndarray, packed, C3: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """The ``.S8`` forms (oneDNN's s8s8): A's signed bytes as ``a + 128`` unsigned (``a XOR
    0x80``), and C started from ``wrap32(C - 128 * column sums of B)``, as the emulation does
    (``tilegemm.reference.isa``); the instruction then runs on u8 x s8 as it is defined."""
    el = packed.elements().astype(np.int64)  # (..., KB, NB, 16, 16, 4); padding is zero
    sums = el.sum(axis=(-5, -3, -1))  # (..., NB, 16)
    N = C3.shape[2]
    cols = sums.reshape(-1, sums.shape[-2] * sums.shape[-1])[:, :N]
    comp = -128 * cols[ib]  # (nC, N)
    C3[...] = wrap32(C3.astype(np.int64) + comp[:, None, :])
    return A.view(np.uint8) ^ np.uint8(0x80)

"""From oneDNN's blocking to the order of operations: which tile chains, added how.

:func:`plan` turns the blocking that :mod:`tilegemm.onednn.blocking` computes into what decides
the bits of every output: the brgemm calls (each one chain of tile multiplies over a K range,
starting from +0), the order in which their float32 results are added, the parallel-K
reduction, and the epilogue. It follows oneDNN's execution loop (BMM = ``brgemm_matmul.cpp`` at
commit 80afa71049):

- each thread walks its K chunks in increasing order, and inside a chunk the K blocks in
  increasing order; the first block of the thread initialises the C buffer, every later one adds
  its tile result to it with ``vaddps`` (BMM 665-706, ``jit_brgemm_amx_uker.cpp`` 939-1004);
- one brgemm call covers ``brgemm_batch_size`` blocks of ``K_blk`` and the tiles are zeroed at
  its start (the C buffer is float32 and dst bf16, so ``may_load_accumulators_`` is false:
  ``jit_brgemm_amx_uker.cpp`` 3012-3020); a K tail is one more call (BMM 741-749, 830-882);
- with K split between threads (``nthr_k > 1`` and more than one K chunk, BMM 2284-2286), the
  chunks are shared out by ``balance211`` (BMM 591-595); thread 0's buffer then receives every
  other thread's buffer in thread order (BMM 1150-1157), and a post-op pass adds it to +0
  (``skip_accumulation``, ``jit_brgemm_amx_uker.cpp`` 1449-1466);
- inside a call each block of ``R`` K elements is a row of TDPBF16PS instructions ``rd_block``
  wide (:func:`rd_block`, ``brgemm_utils.cpp`` 648-666): 32 bf16 pairs' worth where it can,
  otherwise the widest even divisor of ``R``, so that a block of 300 is ten instructions of 30,
  not nine of 32 and one of 12; each instruction restarts its two partial sums;
- the sum post-op then adds the bf16 value read back from dst (scaled when not 1), and
  ``vcvtneps2bf16`` rounds to bf16 (``jit_brgemm_amx_uker.cpp`` 1032-1082, 1460-1575).

Where oneDNN does not run (an ``avx2`` host, or a product of at most :data:`MKLDNN_MIN_SIZE`
multiply-adds, which PyTorch keeps for itself), the plan names PyTorch's kernel instead
(:func:`aten_kernel`, ``Plan.kernel``): one dot product per output over all of K.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from .blocking import Blocking, Problem, avx512_blocking, balance211, blocking, div_up

__all__ = [
    "Host",
    "Plan",
    "plan",
    "rd_block",
    "gemm_k_blocks",
    "gemm_pieces",
    "aten_kernel",
    "MKLDNN_MIN_SIZE",
    "RECORDING_HOST",
    "HOSTS",
    "MODELLED_ISAS",
]

#: ISA names under which oneDNN runs the AMX brgemm kernels this model follows: the names of
#: ``dnnl_cpu_isa_t`` for Sapphire Rapids and later (v3.12 calls the family ``avx10_1_512_amx``).
AMX_ISAS = ("avx10_1_512_amx", "avx512_core_amx", "avx10_1_512_amx_fp16", "avx512_core_amx_fp16", "avx10_2_512_amx_2")
#: ISA names under which oneDNN runs its AVX-512 brgemm kernels with VDPBF16PS for bf16 (AMD Zen 4
#: and Zen 5, Intel Cooper Lake; ``ONEDNN_VERBOSE`` prints ``brg_matmul:avx512_core_bf16``).
VDPBF16PS_ISAS = ("avx512_core_bf16",)
#: ISA names where oneDNN declines bf16 and PyTorch runs its own CPU gemm (AVX2 servers: EPYC
#: Rome and Milan, Haswell and Broadwell Xeons; ``ONEDNN_VERBOSE`` prints no primitive).
ATEN_ISAS = ("avx2",)
#: ISA names under which oneDNN runs bf16 through its older gemm (``gemm:jit:bf16``: AVX-512
#: without AVX512_BF16, so VDPBF16PS is emulated with two FMAs; Skylake-SP, Cascade Lake and Ice
#: Lake Xeons, and any CPU under ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``).
GEMM_ISAS = ("avx512_core", "avx512_core_vnni")
#: Every ISA a :class:`Host` may name, with what computes each output's sum there: the chain
#: instruction inside each brgemm call, ``"gemm:jit"`` for oneDNN's gemm, or ``"ATen"`` for
#: PyTorch's own kernels.
MODELLED_ISAS = {
    **{isa: "TDPBF16PS" for isa in AMX_ISAS},
    **{isa: "VDPBF16PS" for isa in VDPBF16PS_ISAS},
    **{isa: "gemm:jit" for isa in GEMM_ISAS},
    **{isa: "ATen" for isa in ATEN_ISAS},
}
#: Server classes whose bf16 path is known but not modelled: what runs there instead.
_NOT_MODELLED: dict[str, str] = {}


@dataclass(frozen=True)
class Host:
    """The machine whose oneDNN is modelled: what its blocking heuristics read.

    The defaults come from the ``onednn`` profile (:data:`tilegemm.instructions.PROFILES`): the
    host the recorded silicon results were measured on (a 2-core KVM guest of an AMX Xeon). The
    machine tilegemm runs on is never consulted.

    Attributes
    ----------
    cores:
        Cores oneDNN sees; PyTorch's default thread count (``torch.get_num_threads()``).
    l1d, l2, l3:
        Per-core L1 data and L2 cache sizes, and the shared L3, in bytes (oneDNN reads them with
        CPUID leaf 4, ``src/cpu/platform.cpp`` 250-268). The heuristics read L1 and L2; L3 is
        recorded for completeness.
    l2_ways, line:
        L2 associativity and line size (CPUID leaf 4); they enter one check of the vertical
        traversal only (``amx_blocking_heuristics.cpp`` 946-968).
    isa:
        oneDNN's ISA name (``ONEDNN_VERBOSE`` prints it after ``brg_matmul:``): an AMX ISA
        (TDPBF16PS chains, the AMX heuristics), ``"avx512_core_bf16"`` (VDPBF16PS chains, the
        AVX-512 heuristic), or ``"avx2"`` (no oneDNN: PyTorch's own kernels, whose bits depend
        on the operands' layout and never on the caches or threads); :data:`MODELLED_ISAS` lists
        them.
    """

    cores: int = 2
    l1d: int = 48 * 1024
    l2: int = 2 * 1024 * 1024
    l3: int = 480 * 1024 * 1024
    l2_ways: int = 16
    line: int = 64
    isa: str = "avx10_1_512_amx"

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "isa":
                if v not in MODELLED_ISAS:
                    what = f": bf16 runs {_NOT_MODELLED[v]} there" if v in _NOT_MODELLED else ""
                    raise ValueError(
                        f"isa {v!r} is not modelled{what}; the onednn profile models oneDNN's brgemm "
                        f"matmul on {', '.join(MODELLED_ISAS)}"
                    )
            elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Host.{f.name} must be a positive integer, got {v!r}")
        if self.l2 % (self.l2_ways * self.line):
            raise ValueError(f"Host.l2 = {self.l2} is not a whole number of sets of {self.l2_ways} x {self.line} bytes")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> Host:
        """A host from a profile's ``parameters`` mapping."""
        return cls(**parameters)  # type: ignore[arg-type]

    @classmethod
    def named(cls, name: str) -> Host:
        """The preset :data:`HOSTS` ``[name]``; ``ValueError`` listing the names otherwise."""
        if not isinstance(name, str) or name not in HOSTS:
            raise ValueError(f"unknown host {name!r}; the named hosts are {', '.join(HOSTS)}")
        return HOSTS[name]

    @property
    def chain(self) -> str:
        """The instruction of every brgemm call's chain on this host (TDPBF16PS or VDPBF16PS), or
        ``"ATen"`` where PyTorch's own kernels run."""
        return MODELLED_ISAS[self.isa]


def _recording_host() -> Host:
    from ..instructions import PROFILES

    for p in PROFILES.values():
        if p.library == "tilegemm.onednn:profile_matmul":
            return Host.from_parameters(p.parameters)
    raise LookupError("no profile runs tilegemm.onednn")  # pragma: no cover - the table has one


#: The host of the recorded silicon results, the default everywhere.
RECORDING_HOST = _recording_host()

_KIB, _MIB = 1024, 1024 * 1024

#: Named hosts for ``host=`` (a name or a :class:`Host`): the two recording hosts and real servers.
#: Core counts and per-core L1d / L2 sizes and L2 ways are the vendors' published figures (Intel
#: ARK and the Xeon Scalable optimization manual; AMD's EPYC 9004 / 7003 product pages and the
#: Zen 4 software optimization guide, #57647); every core is one oneDNN thread (PyTorch's default
#: thread count is the physical core count).
HOSTS: dict[str, Host] = {
    # tests/data/torch-bf16-amx.npz: a 2-core KVM guest of an AMX Xeon
    "recording-amx": RECORDING_HOST,
    # tests/data/torch-bf16-fleet.json: a 2-core AMD EPYC Zen 4 guest
    "recording-zen4": Host(2, 32 * _KIB, 1 * _MIB, 32 * _MIB, 8, 64, "avx512_core_bf16"),
    # Xeon Platinum 8480+ (Sapphire Rapids): 56 cores, 48 KiB L1d, 2 MiB 16-way L2, 105 MiB L3
    "sapphire-rapids-56": Host(56, 48 * _KIB, 2 * _MIB, 105 * _MIB, 16, 64, "avx512_core_amx"),
    # Xeon 6980P (Granite Rapids, the seed article's machine): 128 cores, 48 KiB L1d, 2 MiB L2, 504 MiB L3
    "granite-rapids-128": Host(128, 48 * _KIB, 2 * _MIB, 504 * _MIB, 16, 64, "avx10_1_512_amx"),
    # EPYC 9654 (Genoa, Zen 4): 96 cores, 32 KiB L1d, 1 MiB 8-way L2, 384 MiB L3
    "genoa-96": Host(96, 32 * _KIB, 1 * _MIB, 384 * _MIB, 8, 64, "avx512_core_bf16"),
    # EPYC 9965 (Turin Dense, Zen 5c): 192 cores, 48 KiB L1d, 1 MiB 16-way L2, 384 MiB L3
    "turin-192": Host(192, 48 * _KIB, 1 * _MIB, 384 * _MIB, 16, 64, "avx512_core_bf16"),
    # Xeon Platinum 8380 (Ice Lake-SP): 40 cores, 48 KiB L1d, 1.25 MiB 20-way L2, 60 MiB L3; no AVX512_BF16
    "icelake-40": Host(40, 48 * _KIB, 1280 * _KIB, 60 * _MIB, 20, 64, "avx512_core_vnni"),
    # Xeon Platinum 8280 (Cascade Lake): 28 cores, 32 KiB L1d, 1 MiB 16-way L2, 38.5 MiB L3
    "cascade-lake-28": Host(28, 32 * _KIB, 1 * _MIB, 77 * _MIB // 2, 16, 64, "avx512_core_vnni"),
    # EPYC 7763 (Milan, Zen 3): 64 cores, 32 KiB L1d, 512 KiB 8-way L2, 256 MiB L3; AVX2 only
    "milan-64": Host(64, 32 * _KIB, 512 * _KIB, 256 * _MIB, 8, 64, "avx2"),
    # tests/data/torch-bf16-fleet.json's avx512_core class: the recording Zen 4 under
    # ONEDNN_MAX_CPU_ISA=AVX512_CORE
    "recording-zen4-avx512": Host(2, 32 * _KIB, 1 * _MIB, 32 * _MIB, 8, 64, "avx512_core"),
    # tests/data/torch-bf16-fleet.json's avx2 class: the recording Zen 4 under ONEDNN_MAX_CPU_ISA=AVX2
    "recording-zen4-avx2": Host(2, 32 * _KIB, 1 * _MIB, 32 * _MIB, 8, 64, "avx2"),
}

Call = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Plan:
    """How oneDNN computes one bf16 matmul on a modelled host, in the terms that decide the bits.

    Attributes
    ----------
    M, K, N, batch:
        The problem as oneDNN sees it.
    onednn_threads:
        The thread count it was planned for.
    b_transposed, post_sum:
        Weights stored transposed (``ba``); a sum post-op reads dst back.
    host:
        The modelled machine.
    blocking:
        oneDNN's blocking (:class:`tilegemm.onednn.blocking.Blocking`).
    groups:
        One entry per thread along K, in thread order; each a tuple of brgemm calls in execution
        order; each call a tuple of ``(k0, k1)`` ranges chained in the tiles from +0 (consecutive
        ``K_blk`` blocks of one call, each cut into TDPBF16PS instructions of :func:`rd_block`
        K elements where that is not 32; a range is chained in instructions of 32 from ``k0``).
        Within a group, call results are added in float32 to the C buffer in order
        (``C = call + C``).
    reduce:
        True when the groups' buffers are summed by the parallel-K reduction (then added to +0).
    """

    M: int
    K: int
    N: int
    batch: int
    onednn_threads: int
    b_transposed: bool
    post_sum: bool
    host: Host
    blocking: Blocking
    groups: tuple[tuple[Call, ...], ...]
    reduce: bool
    calls: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "calls", sum(len(g) for g in self.groups))

    @property
    def kernel(self) -> str:
        """``"brgemm"`` where oneDNN's brgemm matmul computes the product, ``"gemm"`` where its
        gemm:jit does; else the PyTorch kernel that does (:func:`aten_kernel`): ``"notrans"``,
        ``"transa"`` or ``"sequential"``."""
        h = self.blocking.heuristic
        return h if h in _ATEN_ORDERS or h == "gemm" else "brgemm"

    def chains(self) -> list[tuple[int, int]]:
        """The K range of every call's chain (its blocks joined), in execution order."""
        return [(call[0][0], call[-1][1]) for g in self.groups for call in g]

    def describe(self) -> str:
        """One line: the heuristic, the K blocking and the calls (``|`` between K threads)."""
        b = self.blocking
        if self.kernel == "gemm":
            blocks = " + ".join(f"{c[0][0]}:{c[0][1]}" for c in self.groups[0])
            rows = [m1 - m0 for _, m0, m1, _, _ in gemm_pieces(self.batch, self.M, self.N, self.onednn_threads)]
            gemv = sum(r == 1 for r in rows)
            return f"{_GEMM_ORDER}: {blocks}" + (f" ({gemv} of {len(rows)} calls one-row gemv)" if gemv else "")
        if self.kernel != "brgemm":
            return f"aten {b.heuristic} ({_ATEN_ORDERS[b.heuristic]}): 0:{self.K}"
        kind = b.heuristic + (f" {b.traversal}" if b.traversal else "")
        parts = []
        for g in self.groups:
            spans = [f"{c[0][0]}:{c[-1][1]}" for c in g]
            if len(spans) > 6:
                spans = spans[:3] + ["..."] + spans[-1:]
            parts.append(" + ".join(spans))
        # where rd_block cuts a block into instructions narrower than 32, say how wide
        cuts = {k1 - k0 for g in self.groups for c in g for k0, k1 in c if k0 % b.K_blk}
        cut = f" (TDPBF16PS over {max(cuts)} K elements)" if cuts else ""
        return f"{kind}, nthr_k={b.nthr_k}, K_blk={b.K_blk}: " + " | ".join(parts) + cut

    def __str__(self) -> str:
        return (
            f"oneDNN plan for {self.batch} x {self.M} x {self.K} x {self.N} on {self.onednn_threads} thread(s): "
            + self.describe()
        )


def as_host(host: Host | str | None) -> Host:
    """``host=`` as given: None is :data:`RECORDING_HOST`, a string a name of :data:`HOSTS`."""
    if host is None:
        return RECORDING_HOST
    if isinstance(host, str):
        return Host.named(host)
    if not isinstance(host, Host):
        raise TypeError(f"host must be a tilegemm.onednn.Host or one of the names {', '.join(HOSTS)}, got {host!r}")
    return host


#: PyTorch's own bf16 kernels on an AVX2 host, by the order of each output's float32 sum
#: (``tilegemm.reference.aten`` writes each out, ``docs/onednn.md`` gives their source).
_ATEN_ORDERS = {
    "notrans": "4 partial sums",
    "transa": "AVX2 dot product, 8 x 8 lanes",
    "sequential": "one sum in K order",
}


#: oneDNN's ``gemm:jit:bf16`` on an AVX-512 host without AVX512_BF16 (``docs/onednn.md``, "The
#: avx512_core host"): K blocks chained from +0 and added as ``C = block + C``; a single row of
#: the output (gemm's n = 1) goes to the gemv kernels instead.
_GEMM_ORDER = "gemm:jit, emulated VDPBF16PS: FMA pairs, odd k first"


def gemm_k_blocks(K: int) -> tuple[tuple[int, int], ...]:
    """The K blocks of oneDNN's bf16 gemm driver (``get_k_padd``, ``gemm_driver.cpp`` 188-211,
    with ``bk = 768`` and ``bk_traditional = 384`` for bf16 on avx512_core, ``gemm_info.cpp``
    304-315): one block up to 384, two halves (the first rounded up) below 1536, else blocks of
    768 with a short last one."""
    kp = K if K <= 384 else (K + 1) // 2 if K < 1536 else 768
    return tuple((k, min(k + kp, K)) for k in range(0, K, kp))


def gemm_pieces(batch: int, M: int, N: int, threads: int):
    """The single-threaded gemm calls of oneDNN's bf16 matmul on a gemm:jit host, as
    ``(b, m0, m1, n0, n1)``: each thread takes ``balance211`` of the ``batch * M * N`` outputs
    and walks them as whole matrices, runs of whole rows, or a piece of one row
    (``gemm_bf16_matmul.cpp`` 279-377); a piece of one row is a gemv call (gemm's n = 1,
    ``gemv_driver.cpp`` 535-561)."""
    for ithr in range(threads):
        w, end = balance211(batch * M * N, threads, ithr)
        while w < end:
            b, r = divmod(w, M * N)
            m, n = divmod(r, N)
            rem = end - w
            if rem >= M * N and m == 0 and n == 0:
                gm, gn = M, N
            elif rem >= N and n == 0:
                gm, gn = min(M - m, rem // N), N
            else:
                gm, gn = 1, min(N - n, rem)
            yield b, m, m + gm, n, n + gn
            w += gm * gn


#: PyTorch hands a bf16 product to oneDNN only when ``batch * M * K * N`` exceeds this (16^3):
#: ``checksize`` in ``aten/src/ATen/native/mkldnn/Matmul.cpp`` (``use_mkldnn_bf16_matmul``),
#: with ``batch`` 1 for ``mm``/``addmm``; a smaller one runs PyTorch's own kernels on every host.
MKLDNN_MIN_SIZE = 16 * 16 * 16


def aten_kernel(M: int, K: int, N: int, batch: int, b_transposed: bool) -> str:
    """Which of PyTorch's own kernels computes a (batch,) M x K x N bf16 product on an AVX2 host.

    A batched product whose ``K * M * N`` is below 400 runs the small-``bmm`` loop
    (``aten/src/ATen/native/LinearAlgebra.cpp``, ``bmm_out_or_baddbmm_``: ``contraction_size *
    res_rows * res_cols < 400``); otherwise ``cpublas::gemm`` runs, and B's layout picks its
    transposition case (``aten/src/ATen/native/cpu/BlasKernel.cpp``): ``gemm_notrans_`` for a
    row-major B, ``gemm_transa_`` (the vectorised dot product) for a B stored transposed."""
    if batch > 1 and K * M * N < 400:
        return "sequential"
    return "transa" if b_transposed else "notrans"


def _aten_plan(M: int, K: int, N: int, batch: int, threads: int, b_transposed: bool, post_sum: bool, host: Host):
    kernel = aten_kernel(M, K, N, batch, b_transposed)
    # No blocking decides a bit: each output is one dot product over all of K, whatever the threads.
    b = Blocking(kernel, None, threads, 1, 1, 1, 1, K, 1, 1, M, N, False, False, False, 0.0)
    return Plan(M, K, N, batch, threads, b_transposed, post_sum, host, b, ((((0, K),),),), False)


def _check_dim(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


def rd_block(R: int, extendable_k: bool, fused_copy_a: bool) -> int:
    """K elements per TDPBF16PS in a brgemm kernel whose blocks hold ``R`` (``brgemm_utils.cpp``
    648-666, ``brgemm_types.hpp`` 564-576; bf16: 32 at most, in steps of 2).

    With ``extendable_k`` (the kernel may read past K, A's tail being padded in the tile) and
    ``R`` odd or past 32 without being a multiple of it: ``min(rnd_up(R, 2), 32)``. With A
    copied by the kernel (``fused_copy_a``): 32. Otherwise the largest even divisor of ``R``
    that is at most 32; an odd ``R`` there is the K tail, which oneDNN rounds up to 2 with a
    zero-padded A buffer (``brgemm_matmul_utils.cpp`` 1814-1819)."""
    if extendable_k and (R % 2 or (R > 32 and R % 32)):
        return min(R + R % 2, 32)
    if fused_copy_a:
        return 32
    R += R % 2
    return next(i for i in range(32, 0, -2) if R % i == 0)


def _tiles(k0: int, k1: int, width: int) -> tuple[tuple[int, int], ...]:
    return tuple((k, min(k + width, k1)) for k in range(k0, k1, width))


def plan(
    M: int,
    K: int,
    N: int,
    *,
    batch: int = 1,
    onednn_threads: int | None = None,
    b_transposed: bool = False,
    post_sum: bool = False,
    host: Host | str | None = None,
) -> Plan:
    """oneDNN's computation of ``dst (batch, M, N) = src (batch, M, K) @ weights (batch, K, N)``.

    Parameters
    ----------
    M, K, N, batch : int
        The problem oneDNN receives (a 2-D problem has batch 1).
    onednn_threads : int, optional
        Threads oneDNN runs with on the modelled host (PyTorch's ``torch.get_num_threads()``
        there); default ``host.cores``.
    b_transposed : bool
        The weights are stored transposed (``F.linear``'s ``weight.t()``, ``x @ w.T``).
    post_sum : bool
        dst is read back and added (``linear``'s bias, ``addmm``'s input).
    host : Host or str, optional
        The modelled machine, or a name of :data:`HOSTS` (default :data:`RECORDING_HOST`).

    Examples
    --------
    >>> from tilegemm import onednn
    >>> print(onednn.plan(32, 11008, 4096, onednn_threads=1).describe())
    macro horizontal, nthr_k=1, K_blk=480: 0:480 + 480:960 + 960:1440 + ... + 10560:11008
    """
    host = as_host(host)
    threads = host.cores if onednn_threads is None else onednn_threads
    for name, v in (("M", M), ("K", K), ("N", N), ("batch", batch), ("onednn_threads", threads)):
        _check_dim(name, v)
    if host.chain == "ATen" or batch * M * K * N <= MKLDNN_MIN_SIZE:
        return _aten_plan(M, K, N, batch, threads, bool(b_transposed), bool(post_sum), host)
    if host.chain == "gemm:jit":
        blocks = gemm_k_blocks(K)
        g = Blocking("gemm", None, threads, 1, 1, 1, 1, blocks[0][1], 1, 1, M, N, False, False, False, 0.0)
        return Plan(
            M, K, N, batch, threads, bool(b_transposed), bool(post_sum), host, g, (tuple((k,) for k in blocks),), False
        )
    problem = Problem(
        M, K, N, batch, threads, bool(b_transposed), bool(post_sum), host.l1d, host.l2, host.l2_ways, host.line
    )
    b = blocking(problem) if host.chain == "TDPBF16PS" else avx512_blocking(problem)
    K_blk, bs, kcs = b.K_blk, b.brgemm_batch_size, b.K_chunk_size
    # UTL 2043-2069 (init_aux_values) and BMM 1561
    K_chunks = div_up(K, K_blk * kcs * bs)
    num_K_blocks = div_up(K, K_blk * bs)
    K_chunk_tail = num_K_blocks % kcs
    # BMM 1727-1739: threads along K, and whether the parallel reduction runs (BMM 2284-2286)
    nthr_k = b.nthr_k if 0 < b.nthr_k <= b.nthr else 1
    parallel_reduction = nthr_k > 1 and K_chunks > 1

    def cut(k0: int, k1: int) -> tuple[tuple[int, int], ...]:
        if host.chain != "TDPBF16PS":
            return ((k0, k1),)
        width = rd_block(k1 - k0, b.extendable_k, b.use_fused_copy_a)
        return ((k0, k1),) if width == 32 else _tiles(k0, k1, width)

    groups = []
    for ithr_k in range(nthr_k if parallel_reduction else 1):
        if ithr_k >= K_chunks:  # BMM 2289-2293: this thread has no K chunk
            continue
        kc_start, kc_end = balance211(K_chunks, nthr_k, ithr_k) if parallel_reduction else (0, K_chunks)
        calls: list[Call] = []
        for kc in range(kc_start, kc_end):
            tail = kc == K_chunks - 1 and K_chunk_tail > 0
            kb_start = kc * kcs
            for kb in range(kb_start, kb_start + (K_chunk_tail if tail else kcs)):
                k0 = kb * K_blk * bs
                gemm_batch = bs if kb != num_K_blocks - 1 else min(bs, (K - k0) // K_blk)
                call = tuple(r for i in range(gemm_batch) for r in cut(k0 + i * K_blk, k0 + (i + 1) * K_blk))
                if call:
                    calls.append(call)
                end = k0 + gemm_batch * K_blk
                if kb == num_K_blocks - 1 and end < K:
                    calls.append(cut(end, K))  # the K tail: its own call, from +0
        groups.append(tuple(calls))
    return Plan(M, K, N, batch, threads, bool(b_transposed), bool(post_sum), host, b, tuple(groups), parallel_reduction)

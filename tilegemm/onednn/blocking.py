"""oneDNN's brgemm matmul blocking heuristics for bf16, on AMX and on AVX-512 without AMX, as oneDNN
v3.12.0 computes them.

This module answers one question: for a bf16 x bf16 -> bf16 matmul problem on a given machine,
which blocking does oneDNN's ``brg_matmul`` choose? (K block, K chunk, brgemm batch, threads
along K, C buffer.) The answer is all that decides how the K sum of every output is cut into
tile-multiply chains and float32 additions (:mod:`tilegemm.onednn`).

It follows the oneDNN sources at commit 80afa71049 (tag v3.12, the version PyTorch 2.14 ships)
statement by statement, with the same names (``bgmmc`` fields, ``m_per_thread``, ``k_blk_`` ...),
so that each decision can be checked against the line it comes from. Abbreviations in comments:

- AMXH: ``src/cpu/x64/matmul/amx_blocking_heuristics.cpp``; AMXHH: its ``.hpp``
- UTL: ``src/cpu/x64/matmul/brgemm_matmul_utils.cpp``; UTLH: its ``.hpp``
- BMM: ``src/cpu/x64/matmul/brgemm_matmul.cpp``
- PLAT: ``src/cpu/platform.cpp``

The heuristics score candidates in binary32 (``float``) arithmetic, and ties decide: scores are
computed here in numpy float32 in the C++ evaluation order, with C++'s integer-to-float
conversion points, and ``int`` products wrap where C++'s would. Everything the heuristics read
from the machine (cache sizes and associativity, thread count) is a parameter: nothing is read
from the machine this runs on.

This module must not import the rest of tilegemm: it is the pure decision procedure.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["Problem", "Blocking", "blocking", "balance211", "div_up", "rnd_up"]

F = np.float32


def div_up(a: int, b: int) -> int:
    return (a + b - 1) // b


def rnd_up(a: int, b: int) -> int:
    return div_up(a, b) * b


def _i32(x: int) -> int:
    """The C++ ``int`` result of an integer expression (two's-complement wrap)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def _u64(x: int) -> int:
    """A sum of ints stored in a ``size_t`` (AMXH ``l2_matrix_usage``): modulo 2^64."""
    return x % (1 << 64)


def balance211(n: int, team: int, tid: int) -> tuple[int, int]:
    """``src/common/dnnl_thread.hpp`` balance211: [start, end) of thread ``tid``'s share of n."""
    if team <= 1 or n == 0:
        return 0, n
    n1 = div_up(n, team)
    n2 = n1 - 1
    t1 = n - n2 * team
    mine = n1 if tid < t1 else n2
    start = tid * n1 if tid <= t1 else t1 * n1 + (tid - t1) * n2
    return start, start + mine


@dataclass(frozen=True)
class Problem:
    """A bf16 matmul as oneDNN sees it, and the machine it runs on.

    Attributes
    ----------
    M, K, N, batch:
        ``dst (batch, M, N) = src (batch, M, K) @ weights (batch, K, N)``; batch 1 for 2-D.
    nthr:
        Threads oneDNN runs with (``dnnl_get_max_threads()``, UTL 1336: PyTorch's
        ``torch.get_num_threads()``).
    b_transposed:
        The weights are stored transposed (format tag ``ba`` / ``acb``: ``W.t()`` of a row-major
        ``W``), UTL 1616-1617.
    with_sum:
        A sum post-op reads dst back (PyTorch's ``beta != 0``: bias of ``linear``, ``addmm``).
    l1, l2, l2_ways, line:
        Per-core L1d and L2 sizes in bytes, L2 associativity and line size (PLAT 188-268).
    """

    M: int
    K: int
    N: int
    batch: int
    nthr: int
    b_transposed: bool
    with_sum: bool
    l1: int
    l2: int
    l2_ways: int
    line: int


@dataclass(frozen=True)
class Blocking:
    """The configuration fields that decide the arithmetic (``update_configuration``, AMXH 33-62)."""

    heuristic: str  # "small_dims", "macro" or "micro"
    traversal: str | None  # "horizontal" / "vertical" (macro), None otherwise
    nthr: int
    nthr_k: int
    nthr_m: int
    nthr_n: int
    nthr_b: int
    K_blk: int
    K_chunk_size: int
    brgemm_batch_size: int
    M_blk: int
    N_blk: int
    use_buffer_c: bool
    use_buffer_a: bool
    extendable_k: bool
    score: float
    #: A is copied by the brgemm kernel itself (the macro heuristic's horizontal traversal,
    #: AMXH 1020-1025); with ``extendable_k`` it decides the tile width along K (:func:`rd_block`).
    use_fused_copy_a: bool = False


class _Conf:
    """``brgemm_matmul_conf_t`` as ``init_brgemm_matmul_conf`` (UTL 1325-1942) leaves it for a
    bf16 x bf16 -> bf16 problem with plain src, plain or transposed weights and plain dst."""

    def __init__(self, p: Problem):
        self.M, self.K, self.N = p.M, p.K, p.N
        self.batch = p.batch
        self.nthr = p.nthr  # UTL 1336
        # bf16 x bf16 -> bf16 with an f32 accumulator (UTL 1431-1434)
        self.a_dt_sz = self.b_dt_sz = self.tr_a_dt_sz = self.tr_b_dt_sz = 2
        self.c_dt_sz = 2
        self.acc_dt_sz = 4
        self.acc_is_dst = False
        self.with_sum = p.with_sum
        # UTL 84-91, 1598-1604: VNNI granularity 2, wei_k_blk = 16 * 2
        self.required_k_granularity = 2
        self.wei_k_blk = 32
        # The src tag (UTL 541-598, set_or_check_tags). memory_desc_matches_tag ignores the strides
        # of size-1 dimensions (src/common/type_helpers.hpp 399-406), so a 1 x K (or b x 1 x K) A
        # matches both the plain and the transposed tag; then UTL 578-593 takes helper.transA(),
        # which is 'T' when M == 1 (src/cpu/matmul/matmul_utils.hpp 50-53). The data is still read
        # as plain (treat_A_as_plain, UTL 1642-1645), but the macro heuristic requires a plain src
        # tag (AMXH 105-106): for M == 1 the micro heuristic runs.
        self.src_tag_plain = p.M != 1
        self.treat_A_as_plain = p.M == 1
        self.macro_supported = self.src_tag_plain  # AMXH 96-122; the other conditions hold
        # UTL 360-371 (get_default_n_block): 32 where the macro heuristic is supported, else 64
        self.wei_n_blk = 32 if self.macro_supported else 64
        self.transposed_B = p.b_transposed  # UTL 1616-1617
        self.use_buffer_b = True  # UTLH 298-312: AMX with non-blocked weights copies B
        self.use_buffer_a = False  # UTL 1722-1732: no copy for plain bf16 A
        self.transposed_A = False
        # postops_estimator.hpp: the sum post-op emits no injector code without a lambda
        self.postops_inst_count = 0
        self.l1, self.l2, self.l2_ways, self.line = p.l1, p.l2, p.l2_ways, p.line
        self.l2_sets = p.l2 // (p.l2_ways * p.line)
        # compute_blocking_heuristic (UTL 1168-1171)
        self.N_blk = min(self.wei_n_blk, p.N)
        self.M_blk = 0
        self.K_blk = 0
        self.brgemm_batch_size = 0

    def L2_threshold(self) -> int:  # AMXH 84-86
        return 3 * self.l2 // 4

    def L2_ways_threshold(self) -> int:  # AMXH 88-90
        return 3 * self.l2_ways // 4

    def L1_threshold(self) -> int:  # AMXH 92-94
        return 5 * self.l1 // 6

    def lda_big_pow2(self) -> bool:  # UTLH 267-271
        K = self.K
        return (not self.transposed_A) and K > 0 and (K & (K - 1)) == 0 and K >= 8192 // self.a_dt_sz


def _determine_tmul_size(num_elements: int, full_tile_size: int) -> int:  # AMXH 145-149
    return div_up(num_elements, div_up(num_elements, full_tile_size))


class _BwMap:
    """``bw_map_t`` (AMXHH 196-245): bandwidths in binary32."""

    l1_load_hit_bw = F(106.41)
    l1_store_hit_bw = F(106.41)
    l1_load_miss_bw = F(106.41 / 2.28)  # a double division, then stored as float
    l1_store_miss_bw = F(106.41 / 2.85)
    llc_bw = F(6.0)
    multicore_bw = ((1, F(2.28)), (2, F(0.9)), (4, F(2.39)), (8, F(2.98)), (16, F(3.31)), (32, F(4.06)))

    def get_bw(self, x) -> np.float32:
        # linear_interpolation over a std::map<int, float>: lower_bound on the truncated key,
        # interpolation in float.
        xf = F(x)
        xi = int(xf)
        keys = [k for k, _ in self.multicore_bw]
        idx = next((i for i, k in enumerate(keys) if k >= xi), None)
        if idx is None:
            return self.multicore_bw[-1][1]
        if idx == 0:
            return self.multicore_bw[0][1]
        x0, y0 = self.multicore_bw[idx - 1]
        x1, y1 = self.multicore_bw[idx]
        return F(y0 + F(F(y1 - y0) * F(xf - F(x0))) / F(x1 - x0))


_BW = _BwMap()


class _Macro:
    """``matmul_amx_blocking_params_macro_t`` (AMXH 96-1104), the "grid" heuristic."""

    def __init__(self, c: _Conf):
        self.c = c
        # matmul_amx_blocking_params_t's constructor (AMXHH 30-60) from the configuration so far
        self.nthr_m_ = self.nthr_n_ = self.nthr_k_ = self.nthr_b_ = 1
        self.nthr_ = c.nthr
        self.nthr_mnb_ = c.nthr
        self.n_blk_ = c.N_blk
        self.n_chunk_size_ = 1
        self.m_blk_ = c.M_blk
        self.m_chunk_size_ = 1
        self.k_blk_ = c.K_blk
        self.k_chunk_size_ = 1
        self.is_a_nt_ = self.is_b_nt_ = self.set_nt_ = False
        self.need_prefetch_a_ = self.need_prefetch_b_ = False
        self.use_fused_copy_a_ = False
        self.brgemm_batch_size_ = c.brgemm_batch_size
        self.need_buf_c_ = False
        self.need_buf_a_ = c.use_buffer_a
        self.extendable_k_ = False
        self.efficiency_score_ = F(0)
        self.small_dims = False
        # the macro constructor (AMXHH 98-112)
        self.gemm_dt_sz = c.tr_a_dt_sz
        self.min_k_elem = 256 // self.gemm_dt_sz
        self.min_mn_elem = 64 // c.c_dt_sz
        self.k_threshold_write_bound_layer_elem = 256 // self.gemm_dt_sz
        self.min_n_dim_write_bound_layer_elem = 256 // self.gemm_dt_sz
        self.n_decomposition = 32
        self.m_decomposition = 32
        self.m_per_thread = self.k_per_thread = self.n_per_thread = self.b_per_thread = 0
        self.is_horizontal = False
        self.m_tmul = self.n_tmul = self.k_tmul = 0

    def set_core_divs(self, nthr_b, nthr_m, nthr_k, nthr_n):  # AMXH 1092-1104
        c = self.c
        self.nthr_b_, self.nthr_m_, self.nthr_k_, self.nthr_n_ = nthr_b, nthr_m, nthr_k, nthr_n
        self.m_per_thread = div_up(c.M, nthr_m)
        self.k_per_thread = div_up(c.K, nthr_k)
        self.n_per_thread = div_up(c.N, nthr_n)
        self.b_per_thread = div_up(c.batch, nthr_b)
        self.nthr_mnb_ = self.nthr_ // self.nthr_k_

    def set_tmul_sizes(self):  # AMXH 790-794
        self.m_tmul = _determine_tmul_size(self.m_per_thread, 16)
        self.n_tmul = 16
        self.k_tmul = min(self.c.wei_k_blk, self.c.K)

    def set_decomposition(self):  # AMXH 796-799
        self.m_decomposition = min(self.c.M, 2 * self.m_tmul)
        self.n_decomposition = min(self.c.N, 2 * self.n_tmul)

    def divs_are_acceptable(self) -> bool:  # AMXH 124-143
        unacceptable_m_div = rnd_up(self.m_per_thread, self.m_tmul) < self.min_mn_elem and self.nthr_m_ > 1
        unacceptable_k_div = self.k_per_thread < self.min_k_elem and self.nthr_k_ > 1
        if self.nthr_k_ == 1 and self.k_per_thread < self.k_threshold_write_bound_layer_elem:
            unacceptable_n_div = (
                rnd_up(self.n_per_thread, self.n_tmul) < self.min_n_dim_write_bound_layer_elem and self.nthr_n_ > 1
            )
        else:
            unacceptable_n_div = rnd_up(self.n_per_thread, self.n_tmul) < self.min_mn_elem and self.nthr_n_ > 1
        unacceptable_b_div = self.nthr_b_ > self.c.batch
        return not (unacceptable_m_div or unacceptable_k_div or unacceptable_n_div or unacceptable_b_div)

    def calc_k_blk(self, l1_dim: int) -> int:  # AMXH 655-672
        c = self.c
        c_tiles = self.m_decomposition * self.n_decomposition * c.acc_dt_sz
        d_tiles = self.m_decomposition * rnd_up(self.n_decomposition * c.c_dt_sz, 64)
        available_space_in_l1 = c.L1_threshold() - (c_tiles * 2 + d_tiles)
        largest_k = available_space_in_l1 // (l1_dim * self.gemm_dt_sz)
        largest_k_tiles = largest_k // self.k_tmul
        if largest_k_tiles <= 0:  # C++ would divide by zero below
            raise ValueError(
                f"an L1 of {c.l1} bytes leaves no room for one K tile beside the C tiles "
                f"({self.m_decomposition} x {self.n_decomposition}): oneDNN's blocking is undefined there"
            )
        k_tiles = div_up(c.K, self.k_tmul)
        k_per_thread_tiles = div_up(k_tiles, self.nthr_k_)
        num_K_blocks = div_up(k_per_thread_tiles, largest_k_tiles)
        return min(div_up(k_per_thread_tiles, num_K_blocks) * self.k_tmul, c.K)

    @staticmethod
    def blk_candidates(dim_per_thread: int, decomposition: int) -> list[int]:  # AMXH 674-684
        num_inner_blocks = div_up(dim_per_thread, decomposition)
        return sorted({div_up(num_inner_blocks, g) for g in range(1, num_inner_blocks + 1)})

    def l2_matrix_usage(self, k_chunk_size, m_or_n_blk, k_blk, is_horizontal, force_transform=False):  # AMXH 686-717
        c = self.c
        decomposition = self.m_decomposition if is_horizontal else self.n_decomposition
        kk = min(k_blk * k_chunk_size, self.k_per_thread)
        l1_matrix_size = _i32(2 * decomposition * kk * self.gemm_dt_sz)
        l2_matrix_size = _i32(m_or_n_blk * kk * self.gemm_dt_sz)
        if force_transform:
            l2_matrix_size = _i32(
                l2_matrix_size + m_or_n_blk * k_blk * k_chunk_size * (c.b_dt_sz if is_horizontal else c.a_dt_sz)
            )
        if is_horizontal:
            c_post_size = _i32(2 * self.m_decomposition * rnd_up(m_or_n_blk * c.c_dt_sz, 64))
        else:
            c_post_size = _i32(2 * rnd_up(self.n_decomposition * c.c_dt_sz, 64) * m_or_n_blk)
        if k_blk == c.K or (c.acc_is_dst and self.nthr_k_ == 1):
            c_tmp_size = 2 * self.m_decomposition * self.n_decomposition * c.acc_dt_sz
        else:
            c_tmp_size = _i32(2 * decomposition * m_or_n_blk * c.acc_dt_sz)
        return _u64(l1_matrix_size + l2_matrix_size + c_tmp_size + c_post_size)

    def l2_matrix_and_c_usage(self, k_chunk_size, m_or_n_blk, k_blk, is_horizontal):  # AMXH 719-733
        c = self.c
        per_thread_for_l1_matrix = self.m_per_thread if is_horizontal else self.n_per_thread
        kk = min(k_blk * k_chunk_size, self.k_per_thread)
        l1_matrix_size = _i32(2 * per_thread_for_l1_matrix * kk * self.gemm_dt_sz)
        l2_matrix_size = _i32(2 * m_or_n_blk * kk * self.gemm_dt_sz)
        c_size = _i32(per_thread_for_l1_matrix * m_or_n_blk * c.acc_dt_sz)
        return _u64(l1_matrix_size + l2_matrix_size + c_size)

    def bw(self, m_blk, k_chunk_size, k_blk, n_blk, is_horizontal):  # AMXH 735-756
        c = self.c
        kk = min(k_blk * k_chunk_size, self.k_per_thread)
        a_bw = _i32(m_blk * kk * self.gemm_dt_sz)
        b_bw = _i32(n_blk * kk * self.gemm_dt_sz)
        usage = self.l2_matrix_and_c_usage(k_chunk_size, n_blk if is_horizontal else m_blk, k_blk, is_horizontal)
        if (usage < c.L2_threshold() or kk == c.K) and self.nthr_k_ == 1:
            c_bw = 0
        else:
            c_bw = _i32(m_blk * n_blk * c.acc_dt_sz)
        return _i32(a_bw + b_bw + c_bw)

    def compute(self, m_blk, k_chunk_size, k_blk, n_blk):  # AMXH 758-762
        return _i32(m_blk * min(k_blk * k_chunk_size, self.k_per_thread) * n_blk)

    def ratio(self, m_blk, k_chunk_size, k_blk, n_blk, is_horizontal):  # AMXH 764-767
        return F(
            F(self.compute(m_blk, k_chunk_size, k_blk, n_blk))
            / F(self.bw(m_blk, k_chunk_size, k_blk, n_blk, is_horizontal))
        )

    def evaluate_single_core_blocking(self, k_chunk_size, m_or_n_blk, k_blk, is_horizontal, force_transform=False):
        # AMXH 769-788
        if (
            self.l2_matrix_usage(k_chunk_size, m_or_n_blk, k_blk, is_horizontal, force_transform)
            <= self.c.L2_threshold()
        ):
            if is_horizontal:
                m_blk, n_blk = self.m_decomposition, m_or_n_blk
            else:
                m_blk, n_blk = m_or_n_blk, self.n_decomposition
            return self.ratio(m_blk, k_chunk_size, k_blk, n_blk, is_horizontal)
        return F(0)

    def is_horizontal_selected(self, horizontal_not_possible, vertical_not_possible) -> bool:  # AMXH 801-826
        if horizontal_not_possible:
            return False
        if vertical_not_possible:
            return True
        if self.m_per_thread < self.m_tmul * 2:
            return True
        if self.n_per_thread < self.n_tmul * 2:
            return False
        return self.m_per_thread >= self.n_per_thread

    def skip_extendable_k(self) -> bool:  # AMXH 1072-1090
        def skip_for_k_blk(k_to_check):
            num_amx_ops_over_k = div_up(k_to_check, 64 // self.gemm_dt_sz)
            common_k_tile_exists = k_to_check % num_amx_ops_over_k == 0
            k_tile = k_to_check // num_amx_ops_over_k
            return common_k_tile_exists and k_tile <= 64 // self.gemm_dt_sz and k_tile % 2 == 0

        k_tail = self.c.K % self.k_blk_
        if k_tail:
            return skip_for_k_blk(self.k_blk_) and skip_for_k_blk(k_tail)
        return skip_for_k_blk(self.k_blk_)

    def get_actual_lda(self) -> int:  # AMXH 65-75
        if not self.need_buf_a_:
            return self.c.K
        lda = rnd_up(self.k_blk_, 32)
        if lda >= 512 and (lda & (lda - 1)) == 0:
            lda += 32
        return lda

    def set_blocking_parameters(self, force_horizontal=False, force_b_transform_to_l2=False) -> bool:
        """AMXH 828-1070: pick the traversal, K block, K chunk and M/N blocks for the current
        thread split; False when neither traversal is possible."""
        c = self.c
        M, N, K = c.M, c.N, c.K
        m_candidates = self.blk_candidates(self.m_per_thread, self.m_decomposition)
        n_candidates = self.blk_candidates(self.n_per_thread, self.n_decomposition)
        st = dict(
            best_k_h=None,
            best_n_h=None,
            best_m_v=None,
            best_k_v=None,
            best_score_h=F(0),
            best_score_v=F(0),
            hnp=False,
            vnp=force_horizontal,
        )

        def calc_horizontal(k_blk_h, min_k_chunk_size=0):  # AMXH 841-883
            if rnd_up(self.m_per_thread, self.m_decomposition) * (self.nthr_m_ - 1) >= M:
                st["hnp"] = True
            elif rnd_up(self.k_per_thread, k_blk_h) * (self.nthr_k_ - 1) >= K:
                st["hnp"] = True
            else:
                k_candidates_h = self.blk_candidates(self.k_per_thread, k_blk_h)
                st["best_n_h"] = 0
                for it_n in reversed(n_candidates):
                    for it_k in reversed(k_candidates_h):
                        cur = self.evaluate_single_core_blocking(
                            it_k, it_n * self.n_decomposition, k_blk_h, True, force_b_transform_to_l2
                        )
                        if cur > st["best_score_h"] and it_k >= min_k_chunk_size:
                            st["best_score_h"] = cur
                            st["best_k_h"] = it_k
                            st["best_n_h"] = it_n
                if st["best_n_h"] == 0:
                    st["hnp"] = True
                    return
                if rnd_up(self.n_per_thread, st["best_n_h"] * self.n_decomposition) * (self.nthr_n_ - 1) >= N:
                    st["hnp"] = True
                if rnd_up(self.k_per_thread, st["best_k_h"] * k_blk_h) * (self.nthr_k_ - 1) >= K:
                    st["hnp"] = True

        k_blk_h = self.calc_k_blk(self.m_decomposition)  # AMXH 885
        calc_horizontal(k_blk_h)

        def calc_vertical(k_blk_v, min_k_chunk_size=0):  # AMXH 888-970
            if rnd_up(self.n_per_thread, self.n_decomposition) * (self.nthr_n_ - 1) >= N:
                st["vnp"] = True
            elif rnd_up(self.k_per_thread, k_blk_v) * (self.nthr_k_ - 1) >= K:
                st["vnp"] = True
            else:
                k_candidates_v = self.blk_candidates(self.k_per_thread, k_blk_v)
                for it_m in reversed(m_candidates):
                    for it_k in reversed(k_candidates_v):
                        cur = self.evaluate_single_core_blocking(it_k, it_m * self.m_decomposition, k_blk_v, False)
                        if cur > st["best_score_v"] and it_k >= min_k_chunk_size:
                            st["best_score_v"] = cur
                            st["best_k_v"] = it_k
                            st["best_m_v"] = it_m
                if not st["best_m_v"]:
                    # C++ reads an uninitialised best_m_v here; taken as "not possible"
                    st["vnp"] = True
                    return
                best_m_v, best_k_v = st["best_m_v"], st["best_k_v"]
                if rnd_up(self.m_per_thread, best_m_v * self.m_decomposition) * (self.nthr_m_ - 1) >= M:
                    st["vnp"] = True
                if rnd_up(self.k_per_thread, best_k_v * k_blk_v) * (self.nthr_k_ - 1) >= K:
                    st["vnp"] = True
                l2_util_v = 0
                if not st["vnp"]:
                    l2_util_v = self.l2_matrix_and_c_usage(best_k_v, best_m_v * self.m_decomposition, k_blk_v, False)
                    if l2_util_v > c.L2_threshold():
                        l2_util_v = self.l2_matrix_usage(best_k_v, best_m_v * self.m_decomposition, k_blk_v, False)
                repeat_loop_over_k = div_up(K, k_blk_v * best_k_v) != 1
                critical_l2_set_issues_a = (
                    div_up(K, k_blk_v * best_k_v) != self.nthr_k_ or l2_util_v * self.nthr_k_ >= c.L2_threshold()
                )
                if repeat_loop_over_k and critical_l2_set_issues_a:
                    st["vnp"] = True
                # AMXH 946-968: the only place the L2 associativity enters
                l2_line_size = c.l2_sets * c.line
                if l2_line_size == 0:
                    st["vnp"] = True
                    return
                cache_stride = N * c.c_dt_sz % 4096
                if cache_stride == 0:
                    cache_stride = 4096
                if l2_line_size % cache_stride == 0:
                    num_ways_c = div_up(cache_stride * self.m_per_thread, l2_line_size)
                    if num_ways_c >= c.L2_ways_threshold():
                        st["vnp"] = True

        k_blk_v = self.calc_k_blk(self.n_decomposition)  # AMXH 972
        calc_vertical(k_blk_v)

        if st["vnp"] and st["hnp"]:
            return False

        self.is_horizontal = self.is_horizontal_selected(st["hnp"], st["vnp"])

        def is_postops_bound(k_blk):  # AMXH 980-985
            return F(c.postops_inst_count) / F(1.2) > F(div_up(k_blk, self.k_tmul))

        if self.is_horizontal:  # AMXH 987-1025
            l1_eff_factor = div_up(K, k_blk_h)
            a_l1 = k_blk_h * self.m_decomposition * self.gemm_dt_sz
            c_l1 = self.n_decomposition * self.m_decomposition * c.acc_dt_sz
            d_post = self.m_decomposition * rnd_up(self.n_decomposition * c.c_dt_sz, 64)
            self.is_a_nt_ = False
            self.is_b_nt_ = True
            l1_set_issues = k_blk_h < K and l1_eff_factor * a_l1 + 2 * c_l1 + d_post > c.L1_threshold()
            if l1_set_issues or is_postops_bound(k_blk_h):
                # L1 blocking given up: the K block becomes wei_k_blk x the best chunk, chunk 1
                st["best_score_h"] = F(0)
                calc_horizontal(c.wei_k_blk, k_blk_h // c.wei_k_blk)
                k_blk_h = min(c.wei_k_blk * st["best_k_h"], K)
                st["best_k_h"] = 1
                self.is_a_nt_ = True
            self.k_blk_ = k_blk_h
            self.k_chunk_size_ = st["best_k_h"]
            self.n_blk_ = min(st["best_n_h"] * self.n_decomposition, N)
            self.n_chunk_size_ = 1
            self.m_blk_ = self.m_decomposition
            self.m_chunk_size_ = div_up(self.m_per_thread, self.m_blk_)
            self.need_prefetch_a_ = (self.m_per_thread // self.m_blk_) >= 2
            self.need_prefetch_b_ = False
            self.use_fused_copy_a_ = (
                (K % c.wei_k_blk != 0)
                and (self.n_blk_ >= self.n_decomposition * 3)
                and (self.k_blk_ >= (64 // self.gemm_dt_sz) * 4)
            )
            self.extendable_k_ = K % c.wei_k_blk != 0 and not self.skip_extendable_k() and not self.use_fused_copy_a_
        else:  # AMXH 1027-1052
            if is_postops_bound(k_blk_v):
                st["best_score_v"] = F(0)
                calc_vertical(c.wei_k_blk, k_blk_v // c.wei_k_blk)
                k_blk_v = min(c.wei_k_blk * st["best_k_v"], K)
                st["best_k_v"] = 1
                self.is_b_nt_ = True
            self.k_blk_ = k_blk_v
            self.k_chunk_size_ = st["best_k_v"]
            self.n_blk_ = self.n_decomposition
            self.n_chunk_size_ = div_up(self.n_per_thread, self.n_blk_)
            self.m_blk_ = min(st["best_m_v"] * self.m_decomposition, M)
            self.m_chunk_size_ = 1
            self.is_a_nt_ = True
            self.is_b_nt_ = False
            self.need_prefetch_a_ = False
            self.need_prefetch_b_ = ((self.n_per_thread // self.n_blk_) >= 2) and not c.use_buffer_b
            self.use_fused_copy_a_ = False
            self.extendable_k_ = K % c.wei_k_blk != 0 and not self.skip_extendable_k()

        self.brgemm_batch_size_ = 1  # AMXH 1054
        self.n_chunk_elems_ = min(self.n_per_thread, self.n_blk_ * self.n_chunk_size_)
        self.m_chunk_elems_ = min(self.m_per_thread, self.m_blk_ * self.m_chunk_size_)
        self.k_chunk_elems_ = min(self.k_per_thread, self.k_blk_ * self.k_chunk_size_)
        self.set_nt_ = True
        self.current_lda_ = self.get_actual_lda()
        # AMXH 1064-1066: a temporary C buffer when a brgemm call leaves partial results
        self.need_buf_c_ = (self.nthr_k_ != 1) or (self.k_blk_ != K and (c.with_sum or not c.acc_is_dst))
        self.efficiency_score_ = self.calculate_blocking_scores()
        return True

    def b_transform_fits_in_l2(self) -> bool:  # AMXH 594-600
        return self.l2_matrix_usage(self.k_chunk_size_, self.n_blk_, self.k_blk_, True, True) < self.c.L2_threshold()

    def calculate_blocking_scores(self) -> np.float32:  # AMXH 377-592, binary32 in C++ order
        c = self.c
        M, N, K = c.M, c.N, c.K
        strip1_b_tranform_h = self.is_horizontal and c.use_buffer_b
        strips_b_tranform_v = (not self.is_horizontal) and c.use_buffer_b
        strip1_b_in_mlc_h = strip1_b_tranform_h and self.b_transform_fits_in_l2()
        g = self.gemm_dt_sz
        a_size = self.m_per_thread * self.k_per_thread * g
        b_size = self.n_per_thread * self.k_per_thread * g
        d_size = self.m_per_thread * self.n_per_thread * c.c_dt_sz
        num_cycles_per_tmul = (self.m_tmul * 64 * 16) // 1024
        md, nd = self.m_decomposition, self.n_decomposition
        out_sz = c.c_dt_sz if self.nthr_k_ == 1 else c.acc_dt_sz
        if self.is_horizontal:
            strip_dst_size = md * self.n_per_thread * out_sz
            num_tmuls_per_strip = F(
                md * self.k_per_thread * self.n_per_thread // (self.m_tmul * self.k_tmul * self.n_tmul)
            )
            num_strip = F(div_up(self.m_per_thread, md))
            nt_mat_l1_miss = F(b_size)
            l1_reuse = F(div_up(self.n_blk_, nd))
            strip_1_size_shared = F(b_size)
            strip_1_size_private = F(md * self.k_per_thread * g + strip_dst_size)
            strip_1_share_coef = F(self.nthr_m_)
            strip_mid_size_shared = F(md * self.k_per_thread * g)
            strip_mid_size_private = F(strip_dst_size)
            strip_mid_share_coef = F(max(1, self.nthr_n_))
            num_postop_cache_lines = F(md * div_up(self.n_per_thread, self.n_tmul))
        else:
            strip_dst_size = nd * self.m_per_thread * out_sz
            num_tmuls_per_strip = F(
                nd * self.k_per_thread * self.m_per_thread // (self.m_tmul * self.k_tmul * self.n_tmul)
            )
            num_strip = F(div_up(self.n_per_thread, nd))
            nt_mat_l1_miss = F(a_size)
            l1_reuse = F(div_up(self.m_blk_, md))
            strip_1_size_shared = F(a_size)
            strip_1_size_private = F(nd * self.k_per_thread * g + strip_dst_size)
            strip_1_share_coef = F(self.nthr_n_)
            strip_mid_size_shared = F(nd * self.k_per_thread * g)
            strip_mid_size_private = F(strip_dst_size)
            strip_mid_share_coef = F(max(1, self.nthr_m_))
            num_postop_cache_lines = F(self.m_per_thread * div_up(nd, self.n_tmul))

        temporal_matrix_l1_miss = F(strip_mid_size_shared * F(2))
        temporal_matrix_l1_hit = F(strip_mid_size_shared * F(l1_reuse - F(1)))
        c_elem_per_strip = F(self.m_blk_ * self.n_blk_)
        c_post_write_miss = F(self.m_blk_ * div_up(self.n_blk_, nd) * rnd_up(nd * c.c_dt_sz, 64))
        c_post_write_total = F(self.m_blk_ * div_up(self.n_blk_, nd) * div_up(nd, 16) * 64)
        c_post_write_hit = F(c_post_write_total - c_post_write_miss)
        c_post_read_c_tmp = F(c_elem_per_strip * F(c.acc_dt_sz))
        c_tmp_bw = _BW.l1_load_hit_bw if self.k_blk_ == K else _BW.l1_store_miss_bw
        c_tmp_l1_cycles = F(F(F(F(c.acc_dt_sz) * c_elem_per_strip) * F(self.k_chunk_size_)) / c_tmp_bw)
        c_l1_cycles = F(
            F(
                F(F(c_post_write_miss / _BW.l1_store_miss_bw) + F(c_post_write_hit / _BW.l1_store_hit_bw))
                + F(c_post_read_c_tmp / _BW.l1_store_hit_bw)
            )
            + c_tmp_l1_cycles
        )
        l1_cycles = F(
            F(
                F(F(temporal_matrix_l1_miss / _BW.l1_load_miss_bw) + F(temporal_matrix_l1_hit / _BW.l1_load_hit_bw))
                + F(nt_mat_l1_miss / _BW.l1_load_miss_bw)
            )
            + c_l1_cycles
        )
        b_transform_cycles_h = F(strip_1_size_shared / _BW.get_bw(strip_1_share_coef)) if strip1_b_tranform_h else F(0)
        b_transform_cycles_v = (
            F(strip_mid_size_shared / _BW.get_bw(strip_mid_share_coef)) if strips_b_tranform_v else F(0)
        )
        if strips_b_tranform_v:
            strip_mid_dram = F(strip_mid_size_private / _BW.get_bw(1))
            strip_mid_llc = F(strip_mid_size_private / _BW.llc_bw)
        else:
            strip_mid_dram = F(
                F(strip_mid_size_shared / _BW.get_bw(strip_mid_share_coef)) + F(strip_mid_size_private / _BW.get_bw(1))
            )
            strip_mid_llc = F(F(strip_mid_size_private + strip_mid_size_shared) / _BW.llc_bw)
        strip_tmul = F(num_tmuls_per_strip * F(num_cycles_per_tmul))
        strip_avx = F(F(F(c.postops_inst_count) * num_postop_cache_lines) / F(1.2))
        strip_mid_cycles = F(
            b_transform_cycles_v + max(strip_mid_dram, strip_mid_llc, l1_cycles, strip_tmul, strip_avx)
        )
        if not strip1_b_tranform_h:
            strip_1_cycles = F(
                F(strip_1_size_shared / _BW.get_bw(strip_1_share_coef)) + F(strip_1_size_private / _BW.get_bw(1))
            )
        elif strip1_b_in_mlc_h:
            strip_1_cycles = strip_mid_cycles
        else:
            strip_1_cycles = F(strip_1_size_shared / _BW.llc_bw)
        gemm_cycles = F(F(b_transform_cycles_h + strip_1_cycles) + F(F(num_strip - F(1)) * strip_mid_cycles))
        c_size_per_core = self.m_per_thread * self.n_per_thread * c.acc_dt_sz
        if self.nthr_k_ != 1:
            if c_size_per_core * 2 < c.L2_threshold() and c.batch == 1:
                reduction_read_bytes = F(
                    (M * rnd_up(N, 16) * c.acc_dt_sz) * (self.nthr_k_ - 1) // (self.nthr_m_ * self.nthr_n_)
                )
                if a_size + b_size + d_size < c.L2_threshold():
                    reduction_read_cycles = F(reduction_read_bytes / _BW.get_bw(2))
                else:
                    reduction_read_cycles = F(reduction_read_bytes / _BW.llc_bw)
                reduction_write_bytes = F((M * N * c.c_dt_sz) // (self.nthr_m_ * self.nthr_n_))
                reduction_write_cycles = F(reduction_write_bytes / _BW.get_bw(1))
                reduction_cycles = F(F(reduction_read_cycles + reduction_write_cycles) + F(25000))
            else:
                return F(0)
        else:
            reduction_cycles = F(0)
        total_macs = F(M * K * N * c.batch)
        total_cycles = F(F(gemm_cycles + reduction_cycles) * F(self.b_per_thread))
        peak_macs_per_cycle = F((1024 // g) * c.nthr)
        peak_cycles = F(total_macs / peak_macs_per_cycle)
        return F(peak_cycles / total_cycles)

    def beats(self, other: _Macro) -> bool:  # operator> (AMXH 611-643)
        c = self.c
        if other.efficiency_score_ > self.efficiency_score_:
            return False
        if other.efficiency_score_ < self.efficiency_score_:
            return True
        if (not self.is_horizontal) and other.is_horizontal:
            if self.m_per_thread * c.K + self.m_per_thread * c.N < c.L2_threshold():
                if other.is_a_nt_:
                    return True
            return False
        if self.is_horizontal and not other.is_horizontal:
            if other.m_per_thread * c.K + other.m_per_thread * c.N < c.L2_threshold():
                if self.is_a_nt_:
                    return False
            return True
        return self.m_chunk_size_ * self.n_chunk_size_ > other.m_chunk_size_ * other.n_chunk_size_

    def maybe_small_dims_heuristics(self) -> bool:  # AMXH 168-310
        """True if a small-dimensions blocking was set: it always has K_blk = K (one chain)."""
        bg = self.c
        core_utilization_threshold = 0.75
        b_is_not_flat = (not bg.use_buffer_b) or bg.transposed_B
        if bg.M <= 32 and b_is_not_flat and bg.batch == 1:
            self.n_decomposition = min(bg.N, bg.wei_n_blk)
            self.m_decomposition = bg.M
            n_per_core = rnd_up(div_up(bg.N, bg.nthr), self.n_decomposition)
            self.set_core_divs(1, 1, 1, div_up(bg.N, n_per_core))
            if self.nthr_n_ < core_utilization_threshold * bg.nthr:
                return False
            if bg.use_buffer_b and bg.M * bg.K > bg.L2_threshold():
                return False
            # the k_chunk_size_ / K_blk computed here are overwritten by set_common
            self._set_common()
            return True
        if bg.K <= bg.wei_k_blk and bg.batch == 1:
            m_per_core = div_up(bg.M, bg.nthr)
            self.set_core_divs(1, div_up(bg.M, m_per_core), 1, 1)
            self.set_tmul_sizes()
            self.set_decomposition()
            if self.nthr_m_ < core_utilization_threshold * bg.nthr:
                return False
            self._set_common()
            return True
        if bg.N <= 32 and bg.batch == 1:
            self.m_per_thread = div_up(bg.M, bg.nthr)
            self.m_decomposition = _determine_tmul_size(self.m_per_thread, 2 * 16)
            m_per_core_actual = rnd_up(self.m_per_thread, self.m_decomposition)
            self.set_core_divs(1, div_up(bg.M, m_per_core_actual), 1, 1)
            if self.nthr_m_ < core_utilization_threshold * bg.nthr:
                return False
            self._set_common()
            return True
        return False

    def _set_common(self):  # the set_common lambda (AMXH 172-193)
        self.k_blk_ = self.c.K
        # AMXH 180-181: skip_extendable_k reads k_blk_, so this follows it
        self.extendable_k_ = self.c.K % self.c.wei_k_blk != 0 and not self.skip_extendable_k()
        self.k_chunk_size_ = 1
        self.brgemm_batch_size_ = 1
        self.need_buf_c_ = False
        self.efficiency_score_ = F(1)
        self.small_dims = True

    @classmethod
    def find_best_blocking(cls, c: _Conf) -> _Macro:  # AMXH 312-375
        best = cls(c)
        cur = cls(c)
        if best.maybe_small_dims_heuristics():
            return best
        for nthr_to_check in range(c.nthr, 0, -1):
            cur.nthr_ = nthr_to_check
            for b_div in range(1, cur.nthr_ + 1):
                if cur.nthr_ % b_div:
                    continue
                for m_div in range(1, cur.nthr_ // b_div + 1):
                    if (cur.nthr_ // b_div) % m_div:
                        continue
                    for k_div in range(1, (cur.nthr_ // b_div) // m_div + 1):
                        if ((cur.nthr_ // b_div) // m_div) % k_div:
                            continue
                        n_div = ((cur.nthr_ // b_div) // m_div) // k_div
                        cur.set_core_divs(b_div, m_div, k_div, n_div)
                        cur.set_tmul_sizes()
                        cur.set_decomposition()
                        if cur.divs_are_acceptable() and cur.set_blocking_parameters() and cur.beats(best):
                            best = copy.copy(cur)
        if c.use_buffer_b and not c.transposed_B and not best.is_horizontal:
            # AMXH 357-373: retry with horizontal traversal forced, on the best thread split.
            # set_core_divs does not refresh the tmul sizes and decompositions: cur keeps those of
            # the loop's last iteration (one thread, all divisors 1), as in C++.
            cur.nthr_ = best.nthr_b_ * best.nthr_m_ * best.nthr_n_ * best.nthr_k_
            cur.set_core_divs(best.nthr_b_, best.nthr_m_, best.nthr_k_, best.nthr_n_)
            if cur.set_blocking_parameters(True) and cur.beats(best):
                best = copy.copy(cur)
            if cur.set_blocking_parameters(True, True) and cur.beats(best):
                best = copy.copy(cur)
        return best


class _Micro:
    """``matmul_amx_blocking_params_micro_t`` (AMXH 1106-1428), after the AMX set-up of
    ``compute_blocking_heuristic`` (UTL 1202-1251)."""

    def __init__(self, c: _Conf):
        self.c = c
        self.nthr_k_ = 1
        self.nthr_mnb_ = c.nthr
        self.nthr_ = c.nthr
        self.n_blk_ = c.N_blk
        self.n_chunk_size_ = 1
        self.m_blk_ = c.M_blk
        self.m_chunk_size_ = 1
        self.k_blk_ = c.K_blk
        self.k_chunk_size_ = 1
        self.brgemm_batch_size_ = c.brgemm_batch_size
        self.k_chunk_elems_ = self.k_blk_ * self.k_chunk_size_ * self.brgemm_batch_size_
        self.n_chunk_elems_ = self.n_blk_ * self.n_chunk_size_
        self.m_chunk_elems_ = self.m_blk_ * self.m_chunk_size_
        self.current_lda_ = 0  # bgmmc.LDA is still 0 at this point for AMX
        self.need_buf_c_ = False
        self.need_buf_a_ = c.use_buffer_a
        self.extendable_k_ = False
        self.blocking_chunk_mem_size_ = 0
        self.efficiency_score_ = F(0)

    def get_actual_lda(self) -> int:  # AMXH 65-75 (A plain, or treated as plain: K)
        if not self.need_buf_a_:
            return self.c.K
        lda = rnd_up(self.k_blk_, 32)
        if lda >= 512 and (lda & (lda - 1)) == 0:
            lda += 32
        return lda

    def is_buffer_c_required(self) -> bool:  # AMXH 77-82
        c = self.c
        if self.nthr_k_ > 1 and c.K > self.k_chunk_elems_:
            return True
        return ((not c.acc_is_dst) or c.with_sum) and (c.K > self.k_chunk_elems_ or c.K % self.k_blk_ > 0)

    def update_k_blocking_dependent_params(self):  # AMXH 1230-1234
        self.k_chunk_elems_ = self.k_blk_ * self.k_chunk_size_ * self.brgemm_batch_size_
        self.current_lda_ = self.get_actual_lda()
        self.need_buf_c_ = self.is_buffer_c_required()

    def calculate_chunk_memory_size(self) -> int:  # AMXH 1407-1422
        c = self.c
        self.update_k_blocking_dependent_params()
        a_chunk = c.a_dt_sz * self.k_chunk_elems_ * self.m_chunk_elems_
        a_buf = (
            c.tr_a_dt_sz * self.current_lda_ * self.brgemm_batch_size_ * self.m_chunk_elems_ if self.need_buf_a_ else 0
        )
        b_chunk = c.b_dt_sz * self.k_chunk_elems_ * self.n_chunk_elems_
        b_buf = c.tr_b_dt_sz * self.n_blk_ * self.k_chunk_elems_ if c.use_buffer_b else 0
        c_chunk = c.c_dt_sz * self.m_chunk_elems_ * self.n_chunk_elems_
        c_buf = c.acc_dt_sz * self.m_chunk_elems_ * self.n_chunk_elems_ if self.need_buf_c_ else 0
        return a_chunk + a_buf + b_chunk + b_buf + c_chunk + c_buf

    def set_blocking_parameters(self, nthr_k, n_blk, n_chunk_size, m_blk, m_chunk_size):  # AMXH 1236-1321
        c = self.c
        K = c.K
        self.nthr_k_ = max(1, nthr_k)
        self.nthr_mnb_ = c.nthr // self.nthr_k_
        self.nthr_ = self.nthr_mnb_ * self.nthr_k_
        self.n_blk_, self.n_chunk_size_ = n_blk, n_chunk_size
        self.m_blk_, self.m_chunk_size_ = m_blk, m_chunk_size
        if 0 in (n_blk, n_chunk_size, m_blk, m_chunk_size):
            self.k_blk_ = self.k_chunk_size_ = self.k_chunk_elems_ = self.brgemm_batch_size_ = 0
            self.efficiency_score_ = F(0)
            return
        self.n_chunk_elems_ = n_blk * n_chunk_size
        self.m_chunk_elems_ = m_blk * m_chunk_size
        if K < c.wei_k_blk:
            self.k_blk_ = rnd_up(K, c.required_k_granularity)
            self.brgemm_batch_size_ = 1
        else:
            k_per_thr = div_up(K, self.nthr_k_)
            self.k_blk_ = min(rnd_up(k_per_thr, c.required_k_granularity), c.wei_k_blk)
            num_k_blk = div_up(K, self.k_blk_)
            num_k_blk_per_thread = div_up(num_k_blk, self.nthr_k_)
            self.brgemm_batch_size_ = num_k_blk_per_thread
            chunk_sz = self.calculate_chunk_memory_size()
            div_min = chunk_sz // c.L2_threshold()
            div_max = div_up(chunk_sz, c.L2_threshold())
            adjust_k_divisor_threshold = 2 if c.lda_big_pow2() else 0
            if div_min > adjust_k_divisor_threshold and self.brgemm_batch_size_ > 1:
                kc1 = max(self.brgemm_batch_size_ // div_min, 1)
                kc2 = div_up(self.brgemm_batch_size_, div_max)
                tail1 = num_k_blk_per_thread % kc1
                tail2 = num_k_blk_per_thread % kc2
                # IMPLICATION(tail1 == 0 || tail2 < tail1, tail2 == 0) ? kc2 : kc1
                self.brgemm_batch_size_ = kc2 if (not (tail1 == 0 or tail2 < tail1) or tail2 == 0) else kc1
            self.k_chunk_elems_ = self.k_blk_ * self.brgemm_batch_size_ * self.k_chunk_size_
            brgemm_k_elems = self.k_blk_ * self.brgemm_batch_size_
            current_k_tail = K % self.k_blk_
            self.extendable_k_ = (
                (K % c.wei_k_blk != 0)
                and (brgemm_k_elems > c.wei_k_blk)
                and not c.use_buffer_a
                and self.current_lda_ == K
            )
            if self.extendable_k_:
                self.k_blk_ = K if brgemm_k_elems >= K else brgemm_k_elems
                self.k_chunk_size_ = 1
                self.brgemm_batch_size_ = 1
            elif current_k_tail == 0 and K % (self.k_blk_ * self.brgemm_batch_size_) == 0:
                self.k_blk_ = brgemm_k_elems
                self.brgemm_batch_size_ = 1
            elif self.nthr_k_ == 1 and K == self.k_blk_ * self.brgemm_batch_size_ + current_k_tail:
                self.k_blk_ = brgemm_k_elems
                self.brgemm_batch_size_ = 2
        self.need_buf_a_ = c.use_buffer_a or (not self.extendable_k_ and K % c.required_k_granularity != 0)
        self.blocking_chunk_mem_size_ = self.calculate_chunk_memory_size()
        self.efficiency_score_ = self.calculate_blocking_scores()

    def get_thread_balance_scores(self) -> np.float32:  # AMXH 1326-1351
        bg = self.c
        num_M_chunks = div_up(bg.M, self.m_chunk_elems_)
        num_N_chunks = div_up(bg.N, self.n_chunk_elems_)
        s = F(F(bg.batch) * F(F(bg.M) / F(self.m_chunk_elems_)))
        s = F(s * F(F(bg.N) / F(self.n_chunk_elems_)))
        s = F(s / F(rnd_up(bg.batch * num_M_chunks * num_N_chunks, self.nthr_mnb_)))
        mnb_parallel_score = F(s * F(self.nthr_mnb_))
        k_parallel_score = F(1.0)
        if self.nthr_k_ > 1:
            num_K_chunks = div_up(bg.K, self.k_chunk_elems_)
            k = F(F(0.8) * F(F(bg.K) / F(self.k_chunk_elems_)))
            k = F(k / F(rnd_up(num_K_chunks, self.nthr_k_)))
            k_parallel_score = F(k * F(self.nthr_k_))
        return F(F(mnb_parallel_score * k_parallel_score) / F(bg.nthr))

    def get_copied_data_reusage_scores(self) -> np.float32:  # AMXH 1354-1370
        bg = self.c
        desired_M_chunk_size = min(bg.M, 64 * 4)
        desired_N_chunk_size = min(bg.N, 64 * (4 if self.need_buf_a_ else 1))
        coef_M = min(F(F(self.m_chunk_elems_) / F(desired_M_chunk_size)), F(1.0))
        coef_N = min(F(F(self.n_chunk_elems_) / F(desired_N_chunk_size)), F(1.0))
        return F(F(0.5) * F(coef_M + coef_N))

    def get_L2_utilization_scores(self) -> np.float32:  # AMXH 1373-1381
        L2 = self.c.L2_threshold()
        rel = F(abs(F(F(L2) - F(self.blocking_chunk_mem_size_))) / F(max(L2, self.blocking_chunk_mem_size_)))
        return F(F(1.0) - rel)

    def calculate_blocking_scores(self) -> np.float32:  # AMXH 1385-1404
        if 0 in (
            self.n_blk_,
            self.n_chunk_size_,
            self.m_blk_,
            self.m_chunk_size_,
            self.k_blk_,
            self.brgemm_batch_size_,
        ):
            return F(0)
        nthr_coeff = F(min(self.c.nthr, 100))
        reusage_factor = F(1.0)
        balance_factor = F(F(nthr_coeff - F(1.0)) / nthr_coeff)
        cache_utilization_factor = F(F(1.0) / nthr_coeff)
        scores = F(
            F(cache_utilization_factor * self.get_L2_utilization_scores())
            + F(reusage_factor * self.get_copied_data_reusage_scores())
        )
        if balance_factor > 0:
            scores = F(scores + F(balance_factor * self.get_thread_balance_scores()))
        return F(scores / F(F(reusage_factor + balance_factor) + cache_utilization_factor))

    @staticmethod
    def unordered_set_order(values: list[int]) -> list[int]:
        """Iteration order of a small ``std::unordered_set<int>`` in libstdc++: identity hash; a
        node whose bucket is empty goes to the front of the list, otherwise after the first node
        of its bucket; rehashing (bucket counts 1, 13, 29, 59 ...) rebuilds in list order. Only
        ties depend on it."""
        order: list[int] = []
        nb = 1
        primes = (1, 13, 29, 59, 127, 257, 541)
        seen: list[int] = []

        def insert(lst, v, buckets):
            for i, w in enumerate(lst):
                if w % buckets == v % buckets:
                    lst.insert(i, v)
                    return
            lst.insert(0, v)

        for v in values:
            if v in seen:
                continue
            seen.append(v)
            if len(seen) > nb:
                nb = next(p for p in primes if p >= len(seen))
                rebuilt: list[int] = []
                for w in order:
                    insert(rebuilt, w, nb)
                order = rebuilt
            insert(order, v, nb)
        return order

    @classmethod
    def find_best_blocking(cls, c: _Conf) -> _Micro:  # AMXH 1106-1228
        best = cls(c)
        cur = cls(c)
        min_k_per_thread = 1024
        max_k_parallel_work = div_up(c.K, min_k_per_thread)
        max_nthr_k = min(max(1, min(7, c.nthr // 8)), max_k_parallel_work) if c.batch == 1 else 1
        disable_skip_config = c.M == 4 and (
            (c.N == 4096 and c.K == 4096) or (c.N == 11008 and c.K == 4096) or (c.N == 4096 and c.K == 11008)
        )
        for nthr_k in range(1, max_nthr_k + 1):
            nthr_bmn = c.nthr // nthr_k
            num_M_blk = div_up(c.M, c.M_blk)
            num_N_blk = div_up(c.N, c.N_blk)
            k_parallel_work = min(max_k_parallel_work, nthr_k)
            num_parallel_work = c.batch * num_M_blk * num_N_blk * k_parallel_work
            a_lot_of_parallel_work_lvl2 = num_parallel_work > 16 * c.nthr
            low_parallelism = F(num_parallel_work) < F(F(1.5) * F(c.nthr))
            min_M_blk = div_up(c.M_blk, 2) if (low_parallelism and c.M_blk > 32) else c.M_blk
            min_N_blk = c.N_blk  # check_n_blk_fixed(): plain weights, blocked layouts allowed
            desired_M_chunk = min(4, num_M_blk)
            desired_N_chunk = min(6 if a_lot_of_parallel_work_lvl2 else 4, num_N_blk)
            cands = []
            m_blk = c.M_blk
            while m_blk >= min_M_blk:
                cands.append(m_blk)
                m_blk = div_up(m_blk, 2) if m_blk > 1 else m_blk - 1
            if c.M > 16:
                m_blk = min((c.M // 16) * 16, 64)
                while m_blk >= rnd_up(min_M_blk, 16):
                    cands.append(m_blk)
                    m_blk -= 16
            found = False
            n_blk = c.N_blk
            while n_blk >= min_N_blk:
                for m_blk in cls.unordered_set_order(cands):
                    for n_ch_sz in range(desired_N_chunk, 0, -1):
                        for m_ch_sz in range(desired_M_chunk, 0, -1):
                            cur.set_blocking_parameters(nthr_k, n_blk, n_ch_sz, m_blk, m_ch_sz)
                            m_chunks = div_up(c.M, m_blk * m_ch_sz)
                            n_chunks = div_up(c.N, n_blk * n_ch_sz)
                            work_amount = c.batch * m_chunks * n_chunks
                            skip_config = work_amount < nthr_bmn * 3 and work_amount % nthr_bmn != 0 and max_nthr_k == 1
                            if skip_config and not disable_skip_config:
                                continue
                            if cur.efficiency_score_ > best.efficiency_score_:
                                best = copy.copy(cur)
                                found = True
                n_blk -= 16
            if not found:
                cur.set_blocking_parameters(nthr_k, min_N_blk, 1, min_M_blk, 1)
                if cur.efficiency_score_ > best.efficiency_score_:
                    best = copy.copy(cur)
        return best


def _amx_fallback_init(c: _Conf) -> None:
    """UTL 1172-1239: the copy-A preference, the M block candidate, the fixed K tail, the initial
    K block and brgemm batch, before the micro heuristic."""
    prefer_copy_a = c.lda_big_pow2() and c.M >= 1024  # bf16 (UTL 1174-1181)
    c.use_buffer_a = c.use_buffer_a or prefer_copy_a
    best = None
    for r in range(16, 12, -1):
        for s in range(4, 1, -1):
            if best is None and c.M % (s * r) == 0:
                best = s * r
    c.M_blk = best if best is not None else min(c.M, 4 * 16)
    fixed_k_tail_size = c.K % c.wei_k_blk > 0 and c.K > c.wei_k_blk
    if c.K < c.wei_k_blk:
        c.K_blk = rnd_up(c.K, c.required_k_granularity)
    else:
        c.K_blk = c.wei_k_blk if fixed_k_tail_size else c.K
    c.brgemm_batch_size = max(c.K // c.K_blk, 1)


@functools.lru_cache(maxsize=4096)
def blocking(p: Problem) -> Blocking:
    """The blocking oneDNN's brgemm matmul chooses for ``p`` (``compute_blocking_heuristic``,
    UTL 1166-1251): the macro ("grid") heuristic where it applies and finds a blocking, else the
    micro heuristic. Remembered per problem: the search takes milliseconds (a model's layers
    repeat their shapes), and oneDNN's primitive cache does the same."""
    if min(p.M, p.K, p.N, p.batch, p.nthr) < 1:
        raise ValueError(f"oneDNN blocking needs M, K, N, batch and threads >= 1, got {p}")
    c = _Conf(p)
    if c.macro_supported:
        best = _Macro.find_best_blocking(c)
        if best.efficiency_score_ != 0:
            return Blocking(
                heuristic="small_dims" if best.small_dims else "macro",
                traversal=None if best.small_dims else ("horizontal" if best.is_horizontal else "vertical"),
                nthr=best.nthr_,
                nthr_k=best.nthr_k_,
                nthr_m=best.nthr_m_,
                nthr_n=best.nthr_n_,
                nthr_b=best.nthr_b_,
                K_blk=best.k_blk_,
                K_chunk_size=best.k_chunk_size_,
                brgemm_batch_size=best.brgemm_batch_size_,
                M_blk=best.m_blk_,
                N_blk=best.n_blk_,
                use_buffer_c=best.need_buf_c_,
                use_buffer_a=best.need_buf_a_,
                extendable_k=best.extendable_k_,
                score=float(best.efficiency_score_),
                use_fused_copy_a=best.use_fused_copy_a_,
            )
    _amx_fallback_init(c)
    micro = _Micro.find_best_blocking(c)
    if micro.efficiency_score_ == 0:  # VCONDCHECK_BG(... VERBOSE_BLOCKING_FAIL)
        raise RuntimeError(f"oneDNN finds no blocking for {p} (it would refuse the problem)")
    return Blocking(
        heuristic="micro",
        traversal=None,
        nthr=micro.nthr_,
        nthr_k=micro.nthr_k_,
        nthr_m=1,
        nthr_n=1,
        nthr_b=1,
        K_blk=micro.k_blk_,
        K_chunk_size=micro.k_chunk_size_,
        brgemm_batch_size=micro.brgemm_batch_size_,
        M_blk=micro.m_blk_,
        N_blk=micro.n_blk_,
        use_buffer_c=micro.need_buf_c_,
        use_buffer_a=micro.need_buf_a_,
        extendable_k=micro.extendable_k_,
        score=float(micro.efficiency_score_),
    )


# -- brgemm matmul on AVX-512 without AMX (avx512_core_bf16: VDPBF16PS) ------------------------


def _spatial_disbalance(work: int, thread_block: int) -> np.float32:
    """``calculate_spatial_disbalance`` (UTL 774-780): size_t arithmetic, one float division."""
    mod = work % thread_block
    scalar = thread_block - mod if work < thread_block else min(thread_block - mod, mod)
    return F(scalar) / F(thread_block)


def _avx512_imbalance(M, N, K, batch, nthr, m_blk, n_chunks, n_blk, k_blk, nthr_k) -> np.float32:
    """``matmul_avx512_blocking_params_t::get_imbalance`` (UTL 782-812), in binary32 in C++ order
    (m_chunks is always 1 for bf16, UTL 991)."""
    cur_nthr = nthr // nthr_k
    parallel_work = div_up(M, m_blk) * div_up(N, n_blk * n_chunks) * batch  # UTL 814-818
    parallel_work_disb = _spatial_disbalance(parallel_work, cur_nthr)
    m_work = (m_blk * div_up(M, m_blk)) % M
    m_blk_disbalance = F(m_work) / F(M)
    num_n_blk = div_up(N, n_blk)
    par_n_chunks = div_up(num_n_blk, n_chunks)
    n_chunk_disbalance = (F(par_n_chunks) * F(n_chunks) - F(num_n_blk)) / F(num_n_blk)
    disbalance_nthr_k = _spatial_disbalance(K, nthr_k * k_blk)
    thread_allocation_disb = (F(nthr) - F(cur_nthr * nthr_k)) / F(nthr) if cur_nthr * nthr_k != nthr else F(0)
    s = parallel_work_disb + m_blk_disbalance
    s = s + n_chunk_disbalance
    s = s + thread_allocation_disb
    s = s + disbalance_nthr_k
    return s / F(5)


@functools.lru_cache(maxsize=4096)
def avx512_blocking(p: Problem) -> Blocking:
    """The blocking of oneDNN's brgemm matmul on AVX-512 without AMX (``brg_matmul:avx512_core_bf16``,
    VDPBF16PS), for bf16 x bf16 -> bf16: ``compute_blocking_heuristic_avx512`` (UTL 860-1024,
    reached from UTL 1251-1298).

    Only a few of its fields decide bits: the K block (512, or 1024 when K > 1024 and the src tag
    is not the transposed one), one block per brgemm call, and the threads along K. The search
    over M blocks and N chunks matters for the bits only where it can choose ``nthr_k > 1``: a
    1 x K src (tagged transposed, below) with a power-of-two K >= 2048 and less parallel work than
    threads (UTL 898-905).
    """
    if min(p.M, p.K, p.N, p.batch, p.nthr) < 1:
        raise ValueError(f"oneDNN blocking needs M, K, N, batch and threads >= 1, got {p}")
    M, N, K, batch, nthr = p.M, p.N, p.K, p.batch, p.nthr
    # A 1 x K src matches both tags and takes the transposed one (helper.transA() is 'T' when
    # M == 1: src/cpu/matmul/matmul_utils.hpp 50-53, UTL 578-593); it is still read as plain
    # (treat_A_as_plain, UTL 1637-1645), so no A copy for that.
    src_transposed = M == 1
    # UTL 1599-1600: the K granularity is 1 without AMX (the kernel masks an odd K tail).
    # UTL 1172-1181, 1289: copy A for a big power-of-two lda with M >= 1024 (bf16).
    lda_big_pow2 = (K & (K - 1)) == 0 and K >= 8192 // 2
    use_buffer_a = lda_big_pow2 and M >= 1024
    max_m_blk = min(256, M)  # need_large_m_blk is f32-only (UTL 866-871)
    min_m_blk = min(32, M)
    min_m_chunks = div_up(M, max_m_blk)
    n_blk = min(64, N)  # UTL 1168-1169: wei_n_blk 64 for plain weights (UTL 360-371)
    n_chunks = div_up(N, n_blk)
    max_n_chunks = 16 if use_buffer_a else 1
    n_chunks_start = min(max_n_chunks, n_chunks)
    use_extended_k_blk = K > 1024 and not src_transposed  # UTL 882-885
    k_blk = min(K, 1024 if use_extended_k_blk else 512)
    start_nthr_k = 1
    max_parallel = batch * n_chunks
    if nthr > max_parallel:  # low_parallel_work (UTL 893-957)
        min_m_blk = min(M, 16)
        # PyTorch gives plain weights, so the N block is fixed (n_blk_fixed, UTL 357): not
        # reduced at UTL 907-909. The K split of UTL 924-957 is f32-only.
        if batch == 1 and src_transposed and (K & (K - 1)) == 0 and K >= 2048:  # UTL 918-925
            start_nthr_k = min(nthr, 4)
    del min_m_chunks  # only the f32 large-M rule reads it (UTL 959-970)
    best: tuple | None = None
    best_imbalance = F(1)
    for nthr_k in range(start_nthr_k, 0, -1):  # UTL 986-1022
        found = False
        for n_chunk_size in range(n_chunks_start, 0, -1):
            for m_blk in range(max_m_blk, min_m_blk - 1, -1):
                imbalance = _avx512_imbalance(M, N, K, batch, nthr, m_blk, n_chunk_size, n_blk, k_blk, nthr_k)
                work_amount = batch * div_up(M, m_blk) * div_up(N, n_blk * n_chunk_size)
                nthr_bmn = nthr // nthr_k
                if work_amount < nthr_bmn * 3 and work_amount % nthr_bmn != 0 and start_nthr_k == 1:
                    continue
                if imbalance < best_imbalance:
                    best_imbalance, best, found = imbalance, (m_blk, n_chunk_size, nthr_k), True
        if not found:
            imbalance = _avx512_imbalance(M, N, K, batch, nthr, min_m_blk, 1, n_blk, k_blk, nthr_k)
            if imbalance < best_imbalance:
                best_imbalance, best = imbalance, (min_m_blk, 1, nthr_k)
    if best is None:  # VCONDCHECK_BG(best_imbalance != 1.f) at UTL 1297: brg_matmul declines
        raise RuntimeError(f"oneDNN's avx512 brgemm matmul finds no blocking for {p} (it would decline the problem)")
    m_blk, n_chunk_size, nthr_k = best
    K_chunk_elems = k_blk  # K_chunk_size and brgemm_batch_size are 1 (UTL 1170, 991)
    # is_buffer_c_required (UTL 831-839): the accumulator is f32 and dst bf16
    use_buffer_c = (nthr_k > 1 and K > K_chunk_elems) or K > K_chunk_elems or K % k_blk > 0
    return Blocking(
        heuristic="avx512",
        traversal=None,
        nthr=nthr,
        nthr_k=nthr_k,
        nthr_m=1,
        nthr_n=1,
        nthr_b=1,
        K_blk=k_blk,
        K_chunk_size=1,
        brgemm_batch_size=1,
        M_blk=m_blk,
        N_blk=n_blk,
        use_buffer_c=use_buffer_c,
        use_buffer_a=use_buffer_a,
        extendable_k=False,
        score=float(best_imbalance),
    )

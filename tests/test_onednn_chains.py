"""tilegemm.onednn.chains: the gemm:jit and ATen orders as batched fp32_fma products give the bits
of the element-by-element kernels (tilegemm.kernels.aten, tilegemm.kernels.gemm_jit), on edge
values and on every K tail, and hand back (None) exactly where they must."""

from __future__ import annotations

import numpy as np
import pytest
import silicon

from tilegemm.formats import kernel_input
from tilegemm.kernels import aten, gemm_jit
from tilegemm.onednn import chains
from tilegemm.onednn.schedule import gemm_k_blocks

KINDS = ("normal", "tiny", "denormal", "huge", "zeros")
# K values that reach every tail: 4-groups, 16- and 64-blocks, odd gemm:jit blocks, two blocks
KS = (1, 3, 4, 17, 63, 64, 65, 130, 141, 385, 777)


def _codes(shape, salt, kind):
    if kind == "normal":
        return silicon.operand(shape, salt, "normal")
    return silicon.edge_operand(shape, salt, kind)


def _elementwise(kernel, A, B):
    nb, M, _ = A.shape
    N = B.shape[1] if kernel == "transa" else B.shape[2]
    out = np.empty((nb, M, N), np.float32)
    A, B = kernel_input(A), kernel_input(B)  # as tilegemm.onednn passes them: one compile each
    if kernel == "gemm":
        gemm_jit.gemm(A, B, aten.VALUES, out, gemm_k_blocks(A.shape[2])[0][1], 0, 0, M, 0, N)
    else:
        getattr(aten, kernel)(A, B, aten.VALUES, out)
    return out.view(np.uint32)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("kernel", ["notrans", "transa", "gemm"])
def test_chains_match_the_element_kernels(kernel, kind):
    rng_salt = {"notrans": 11, "transa": 12, "gemm": 13}[kernel]
    ran = 0
    for K in KS:
        A = _codes((1, 5, K), rng_salt * 1000 + K, kind)
        B = _codes((1, K, 7), rng_salt * 2000 + K, kind)
        W = np.ascontiguousarray(np.swapaxes(B, 1, 2))
        with np.errstate(all="ignore"):
            if kernel == "transa":
                got, want = chains.transa(A, W), _elementwise("transa", A, W)
            elif kernel == "notrans":
                got, want = chains.notrans(A, B), _elementwise("notrans", A, B)
            else:
                got, want = chains.gemm(A, B), _elementwise("gemm", A, B)
                # B prepared once (row-major, and as the transposed view of W), the same bits
                for prepared in (chains.GemmWeights(B), chains.GemmWeights(np.swapaxes(W, 1, 2))):
                    again = chains.gemm(A, B, weights=prepared)
                    assert again is not None and (again == want).all(), (kind, K)
        if got is None:  # handed to the element kernels: only where a tail's product is not normal
            assert kind != "normal" and kernel != "gemm", (kernel, kind, K)
            continue
        ran += 1
        assert (got == want).all(), (kernel, kind, K, int((got != want).sum()))
    # normal values and gemm:jit (no unfused step) always take the batched products; ATen's tails
    # hand over where a product underflows or overflows, and only there: K = 4 and 64 have none
    assert ran == len(KS) if kind == "normal" or kernel == "gemm" else ran >= 1


def test_nan_operands_go_to_the_element_kernels():
    A = silicon.operand((1, 4, 64), 5, "normal")
    B = silicon.operand((1, 64, 3), 6, "normal")
    A[0, 1, 7] = 0x7FC1
    assert chains.notrans(A, B) is None
    assert chains.transa(A, np.ascontiguousarray(np.swapaxes(B, 1, 2))) is None
    assert chains.gemm(A, B) is None
    clean = silicon.operand((1, 4, 64), 5, "normal")
    assert chains.gemm(clean, A.swapaxes(1, 2), weights=chains.GemmWeights(A.swapaxes(1, 2))) is None  # a NaN in B
    A[0, 1, 7] = 0x7F80  # an infinity is fine: the NaNs it makes are all the default one
    assert chains.gemm(A, B) is not None and chains.notrans(A, B) is not None


def test_large_products_are_cut_along_n(monkeypatch):
    A = silicon.operand((2, 3, 200), 7, "normal")
    W = silicon.operand((2, 50, 200), 8, "normal")
    whole = chains.transa(A, W)
    monkeypatch.setattr(chains, "_MAX_OUT", 64 * 2 * 3 * 7)  # seven columns per call
    assert (chains.transa(A, W) == whole).all()
    assert (whole == _elementwise("transa", A, W)).all()

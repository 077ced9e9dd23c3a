"""ATen's bf16 orders in the host's binary32 steps (``tilegemm.kernels.aten.transa_fast`` and
``notrans_fast``, the ``avx2`` server class of ``tilegemm.onednn``) against numpy's float32
matmul of the same sizes, side by side in one process.

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench/aten_kernels.py [--repeat 7]

Each row: the median times of ``--repeat`` runs of each, and the median of ``--repeat`` ratios
of numpy's time over the kernel's timed back to back (above 1: the kernel is faster). The shapes are the GPT-like
model's products (``bench/model_speed.py``) and a matrix-vector product."""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from tilegemm.benchmark import median_time
from tilegemm.formats import kernel_input
from tilegemm.kernels import aten
from tilegemm.perf import median_ratio

SHAPES = {
    "transa": [(1, 256, 1536, 512), (1, 256, 512, 2048), (1, 1, 4096, 4096)],
    "notrans": [(16, 128, 64, 128), (16, 128, 128, 64), (1, 256, 512, 512)],
}


def _codes(rng, shape) -> np.ndarray:
    """bf16 codes of N(0, 1) values: operands the binary32 proof admits."""
    return (rng.standard_normal(shape, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'kernel':8} {'batch x M x N x K':>22} {'kernel ms':>10} {'numpy ms':>9} {'numpy / kernel':>15}")
    for name, shapes in SHAPES.items():
        for nb, M, N, K in shapes:
            A = kernel_input(_codes(rng, (nb, M, K)))
            B = kernel_input(_codes(rng, (nb, N, K) if name == "transa" else (nb, K, N)))
            out = np.empty((nb, M, N), np.float32)
            a32 = (A.astype(np.uint32) << 16).view(np.float32)
            b32 = (B.astype(np.uint32) << 16).view(np.float32)
            b32 = np.swapaxes(b32, -1, -2) if name == "transa" else b32

            if name == "transa":

                def run(A=A, B=B, out=out):
                    aten.transa_fast(A, B, aten.VALUES, out)
            else:

                def run(A=A, B=B, out=out):
                    aten.notrans_fast(A, B, out)

            def numpy(a32=a32, b32=b32):
                return a32 @ b32

            with threadpool_limits(1, user_api="blas"):
                ratio, _ = median_ratio(run, numpy, a.repeat)
                t_kernel, t_numpy = median_time(run, a.repeat, warmup=1), median_time(numpy, a.repeat, warmup=1)
            size = f"{nb} x {M} x {N} x {K}"
            print(f"{name:8} {size:>22} {t_kernel * 1e3:10.2f} {t_numpy * 1e3:9.2f} {ratio:15.2f}")


if __name__ == "__main__":
    main()

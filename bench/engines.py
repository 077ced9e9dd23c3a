"""Exact BF16 on each engine of the blocked kernels against numpy float32: one thread, B prepacked.

    python bench/engines.py [--sizes 1024 2048] [--repeat 7]

Prints, per profile (``amx``: TDPBF16PS, ``avx512``: VDPBF16PS), n and engine (``fma``
everywhere; ``vdpbf16ps`` where the CPU has AVX512_BF16), the median over ``--repeat`` of
time(numpy float32) / time(tilegemm), timed side by side (``tilegemm.perf.median_ratio``) with
numpy's BLAS on one thread, and checks that the engines' bits are identical."""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

import tilegemm
from tilegemm import dispatch, perf, plan
from tilegemm.kernels import targets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"# {perf.host_line()}")
    for isa in ("amx", "avx512"):
        for n in args.sizes:
            rng = np.random.default_rng(0)
            a = rng.standard_normal((n, n)).astype(np.float32)
            b = rng.standard_normal((n, n)).astype(np.float32)
            packed = tilegemm.pack(b, "bf16", isa)
            bits = []
            for engine in ("fma",) + targets.engines():
                with plan.forced_engine(engine), threadpool_limits(1, user_api="blas"):
                    name = dispatch.lookup(isa, "bf16", "2x2").name
                    bits.append(tilegemm.matmul(a, packed, isa=isa, tiling="2x2", threads=1).view(np.uint32))
                    r, samples = perf.median_ratio(
                        lambda: tilegemm.matmul(a, packed, isa=isa, tiling="2x2", threads=1), lambda: a @ b, args.repeat
                    )
                print(f"{isa:6} n={n} {engine:9} {r:.2f}x numpy float32  ({name})", samples)
            assert all(np.array_equal(bits[0], x) for x in bits[1:]), "the engines' bits differ"


if __name__ == "__main__":
    main()

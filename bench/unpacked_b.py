"""The call with B not packed against the prepacked call: BF16, one thread, the packing counted.

    python bench/unpacked_b.py [--sizes 1024 2048] [--repeat 7] [--min-slab-k 1024]

Prints, per n, the median over ``--repeat`` of time(prepacked) / time(not packed), timed side by
side (``tilegemm.perf.median_ratio``): 1.0 means the call that packs B itself is as fast as the
one given a packed B. ``--min-slab-k 1`` runs the slabs of ``plan.SLAB_BYTES`` alone."""

from __future__ import annotations

import argparse

import numpy as np

import tilegemm
from tilegemm import perf, plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--min-slab-k", type=int, default=plan.MIN_SLAB_K)
    args = ap.parse_args()
    plan.MIN_SLAB_K = args.min_slab_k
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        packed = tilegemm.pack(b, "bf16")
        r, samples = perf.median_ratio(
            lambda: tilegemm.matmul(a, b, "bf16", threads=1),
            lambda: tilegemm.matmul(a, packed, threads=1),
            args.repeat,
        )
        slab = plan.slab_steps(1, n, 32) * 32
        print(f"n={n} (slabs {slab} deep along K): not packed at {r:.2f} of the prepacked call's speed", samples)


if __name__ == "__main__":
    main()

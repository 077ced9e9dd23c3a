"""A GPT-like model's bf16 forward pass under ``tilegemm.torch.emulate``, per server class, as a
ratio against plain PyTorch bf16 in the same process.

    python bench/model_speed.py [--layers 4 --d 512 --heads 8 --mlp 2048 --seq 128 --batch 2]

Each figure is the median of ``--repeat`` runs after one warm-up (which compiles the kernels);
plain PyTorch is timed between the classes, and each class's ratio is against the median of all
plain runs, so that a slower phase of a shared machine shows in both."""

from __future__ import annotations

import argparse
import statistics

import torch

import tilegemm.torch as tt
from tilegemm.benchmark import median_time

CLASSES = {
    "avx10_1_512_amx (AMX Xeon)": "recording-amx",
    "avx512_core_bf16 (Zen 4)": "recording-zen4",
    "avx512_core (Xeon without BF16)": "recording-zen4-avx512",
    "avx2 (EPYC Milan)": "milan-64",
}


def _time(fn, repeat: int) -> float:
    return median_time(fn, repeat, warmup=1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 4), ("d", 512), ("heads", 8), ("mlp", 2048), ("seq", 128), ("batch", 2)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--classes", nargs="+", default=list(CLASSES.values()))
    a = p.parse_args(argv)
    model, x = tt.demo_model(layers=a.layers, d=a.d, heads=a.heads, mlp=a.mlp, seq=a.seq, batch=a.batch)

    def plain():
        with torch.no_grad():
            model(x)

    plain_runs = [_time(plain, a.repeat)]
    rows = []
    for label, host in CLASSES.items():
        if host not in a.classes:
            continue

        def emulated(host=host):
            with torch.no_grad(), tt.emulate(host=host):
                model(x)

        rows.append((label, host, _time(emulated, a.repeat)))
        plain_runs.append(_time(plain, a.repeat))
    base = statistics.median(plain_runs)
    print(
        f"GPT-like forward: {a.layers} layers, d = {a.d}, {a.heads} heads, MLP {a.mlp}, seq {a.seq}, batch {a.batch}, "
        f"bf16, torch threads {torch.get_num_threads()}"
    )
    print(f"{'plain PyTorch':34} {base * 1e3:9.1f} ms   1.00x")
    for label, host, t in rows:
        print(f"{label:34} {t * 1e3:9.1f} ms {t / base:6.2f}x   host={host}")


if __name__ == "__main__":
    main()

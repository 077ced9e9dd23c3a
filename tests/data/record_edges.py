"""Record PyTorch's bf16 outputs of the edge cases (``tests/silicon.py``, ``edge_cases``) on this
host under one setting, into ``edges`` of that class in tests/data/torch-bf16-fleet.json.

Usage, from the repository root, one run per class (the environment picks what torch runs):

    python tests/data/record_edges.py avx512_core_bf16
    ONEDNN_MAX_CPU_ISA=AVX512_CORE python tests/data/record_edges.py avx512_core
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python tests/data/record_edges.py avx2

The ops are the fleet recording's: ``matmul`` A @ B; ``matmul_wt`` A @ W.t(); ``linear_bias``
F.linear(A, W, bias); ``addmm_beta`` torch.addmm(C, A, B, beta=0.5); ``bmm``; ``attn_kt``
Q @ Kt.transpose(-1, -2). Record on a host of the class (for the oneDNN classes, a CPU with the
ISA), and check ``ONEDNN_VERBOSE=1`` says what ran.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import silicon  # noqa: E402


def tensor(bits):
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16).copy()).view(torch.bfloat16)


def run(case) -> np.ndarray:
    A, B, C = (None if x is None else tensor(x) for x in silicon.edge_inputs(case))
    op = case["op"]
    if op in ("matmul", "bmm"):
        y = torch.matmul(A, B) if op == "matmul" else torch.bmm(A, B)
    elif op == "matmul_wt":
        y = torch.matmul(A, B.t())
    elif op == "linear_bias":
        y = torch.nn.functional.linear(A, B, C)
    elif op == "addmm_beta":
        y = torch.addmm(C, A, B, beta=0.5)
    else:
        y = torch.matmul(A, B.transpose(-1, -2))
    return y.contiguous().view(torch.int16).numpy().view(np.uint16)


def main(cls: str) -> None:
    torch.set_num_threads(1)
    cases = silicon.edge_cases()
    digests = {c["key"]: silicon.digest(run(c)) for c in cases}
    path = HERE / "torch-bf16-fleet.json"
    data = json.loads(path.read_text())
    setting = " ".join(f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if k in os.environ)
    data["classes"][cls]["edges"] = {
        "torch": torch.__version__,
        "setting": setting or "default",
        "sha256": digests,  # the cases are silicon.edge_cases(), rebuilt from the code
    }
    path.write_text(json.dumps(data, indent=0) + "\n")
    print(f"{cls}: {len(cases)} edge cases recorded with torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])

"""AMX and ACE side by side in the traffic model: modelled bytes per MAC against the counted loads
of the ported kernels (tilegemm.amx.seed, tilegemm.amx.ace_seed)."""

from __future__ import annotations

from tilegemm import model_ports as model
from tilegemm.__main__ import main

N = 32768


def test_ace_counterparts():
    got = {d: model.ace_counterpart(d) for d in ("int8", "u8s8", "bf16", "hf8", "bf8", "hf8bf8", "bf8hf8", "fp16")}
    assert got == {
        "int8": "s8s8",
        "u8s8": "u8s8",
        "bf16": "bf16",
        "hf8": "mxfp8_e4m3",
        "bf8": "mxfp8_e5m2",
        "hf8bf8": "mxfp8_e4m3_e5m2",
        "bf8hf8": "mxfp8_e5m2_e4m3",
        "fp16": None,
    }


def test_int8_ports_side_by_side():
    rows = {p.kernel: p for p in model.ports(N, N, N, "int8")}
    # The excerpt's figures: AMX 2x2 (32 x 32) 0.0625, six accumulators 0.0521, ACE 0.0469.
    assert [round(rows[k].modelled, 4) for k in rows] == [0.0625, 0.0521, 0.0625, 0.0469]
    amx22, six, ace22, ace24 = rows.values()
    # 96 x 192 x 256: 3 x 6 tiles of C, 4 K steps of 64 (AMX) or 64 steps of 4 (ACE).
    assert (amx22.loads, amx22.ops, amx22.counted) == (288, 288, 1024 / 16384)
    # One A and one B tile register: 8 loads per 6 multiplies, where the model has 5.
    assert (six.loads, six.ops) == (384, 288) and six.counted == 8 * 1024 / (6 * 16384)
    # ACE: R + C zmm loads of 64 bytes per step, for R * C outer products of 16 x 16 x 4 MACs.
    assert (ace22.loads, ace22.ops, ace22.counted) == (4608, 4608, 4 * 64 / (4 * 1024))
    assert (ace24.loads, ace24.ops, ace24.counted) == (3456, 4608, 6 * 64 / (8 * 1024))
    assert ace24.counted == ace24.modelled  # whole blocks: the port loads what the model counts


def test_mx_ports_count_the_block_scales():
    rows = {p.kernel: p for p in model.ports(N, N, N, "hf8")}
    assert [p.dtype for p in rows.values()] == ["hf8", "hf8", "mxfp8_e4m3", "mxfp8_e4m3"]
    ace24 = rows["ACE 2x4 (32 x 64)"]
    # One BSRMOVF (two zmm loads) per 32-element block (4 / max(2, 4) = 1 block per load) and
    # superblock: 8 blocks x 9 superblocks x 2 loads beyond the data's 3456.
    assert ace24.loads == 3456 + 8 * 9 * 2 and ace24.counted > ace24.modelled
    assert [p.kernel for p in model.ports(N, N, N, "fp16")] == ["AMX 2x2", "AMX six accumulators (2x3)"]


def test_cli_model_shows_amx_and_ace(capsys):
    assert main(["model", "--measure", "0", "--m", "4096", "--n", "4096", "--k", "4096"]) == 0
    out = capsys.readouterr().out
    assert "side by side: AMX and ACE (int8" in out
    line = next(x for x in out.splitlines() if x.startswith("ACE 2x4"))
    assert line.split()[-4:] == ["0.0469", "0.0469", "3456", "4608"]

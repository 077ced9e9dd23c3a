"""The native tile programs as data and as machine code: registers, K steps, job tables, and the
assembly LLVM makes of them for Sapphire Rapids and Granite Rapids (compiled, never run)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilegemm import dispatch, inspect, instructions
from tilegemm.native import gemm, jit, program

I = instructions.INSTRUCTIONS
TILE_INSTRUCTIONS = [i for i in I.values() if i.tile_method is not None]
AMX = "+amx-tile,+amx-int8,+amx-bf16,+amx-fp16"


@pytest.mark.parametrize("tiling", dispatch.TILINGS)
def test_plan_registers_and_loads(tiling):
    rows, cols = dispatch.parse_tiling(tiling)
    p = program.plan(rows, cols)
    assert len(set(p.acc)) == rows * cols
    operand_regs = set(p.a) | set(p.b)
    assert not operand_regs & set(p.acc) and max(set(p.acc) | operand_regs) < 8
    # Every multiply reads the A row block and B column block of its accumulator, loaded in this
    # step and not overwritten since.
    held: dict[int, tuple[str, int]] = {}
    done = set()
    for s in p.steps:
        if s[0] == "load":
            held[s[1]] = (s[2], s[3])
        else:
            _, c, a, b = s
            r, cc = divmod(p.acc.index(c), cols)
            assert held[a] == ("A", r) and held[b] == ("B", cc), (tiling, s)
            done.add((r, cc))
    assert done == {(r, c) for r in range(rows) for c in range(cols)}
    resident = rows * cols + rows + cols <= 8
    want = rows + cols if resident else rows * cols + min(rows, cols)
    assert p.loads_per_step == want


def test_plan_of_the_seed_tilings():
    two = program.plan(2, 2)  # the seed's 2x2 with both B tiles resident: TMM4/5 = A, TMM6/7 = B
    assert (two.acc, two.a, two.b, two.loads_per_step) == ((0, 1, 2, 3), (4, 5), (6, 7), 4)
    one = program.plan(1, 1)
    assert one.steps == program.edge_program().steps == (("load", 1, "A", 0), ("load", 2, "B", 0), ("dp", 0, 1, 2))
    assert program.plan(2, 3).loads_per_step == 8 and program.plan(3, 2).loads_per_step == 8
    with pytest.raises(ValueError, match="3x3 needs 11 tile registers"):
        program.plan(3, 3)


@pytest.mark.parametrize(
    "mnemonic,K,want",
    [
        ("TDPBF16PS", 1, (0, 1, 1)),
        ("TDPBF16PS", 2, (0, 1, 1)),
        ("TDPBF16PS", 31, (1, 0, 16)),
        ("TDPBF16PS", 32, (1, 0, 16)),
        ("TDPBF16PS", 33, (1, 1, 1)),
        ("TDPBF16PS", 4100, (128, 1, 2)),
        ("TDPBSSD", 63, (1, 0, 16)),
        ("TDPBSSD", 65, (1, 1, 1)),
        ("TDPBSSD", 130, (2, 1, 1)),
    ],
)
def test_k_steps_follow_the_tail_rule(mnemonic, K, want):
    assert gemm.k_steps(I[mnemonic], K) == want


def test_padded_a():
    a = np.arange(2 * 3 * 5, dtype=np.uint16).reshape(2, 3, 5)
    p = gemm.padded_a(I["TDPBF16PS"], a)
    assert p.shape == (2, 3, 6) and (p[:, :, :5] == a).all() and not p[:, :, 5].any()
    q = gemm.padded_a(I["TDPBSSD"], a[:, :, :4].astype(np.int8))
    assert q.shape == (2, 3, 4) and q.flags.c_contiguous


@pytest.mark.parametrize("tiling", ["1x1", "2x2", "2x3", "3x2", "1x6"])
@pytest.mark.parametrize("M,N,K", [(40, 70, 33), (32, 96, 64), (1, 1, 1), (96, 33, 100)])
def test_job_table_covers_every_output_once(tiling, M, N, K):
    """Each C element belongs to exactly one job tile, every job's offsets point at its tiles,
    and every configuration is valid with the shapes its tiles need."""
    from tilegemm.amx import TileConfig

    instr = I["TDPBF16PS"]
    rows, cols = dispatch.parse_tiling(tiling)
    prog = program.plan(rows, cols)
    nC, kb, nb = 2, -(-K // 32), -(-N // 16)
    ia, ib = np.array([1, 0]), np.array([0, 0])
    lda = (K + K % 2) * 2
    jobs, cfgs = gemm.tile_jobs(instr, prog, nC, M, N, K, ia, ib, lda, kb, nb)
    _, _, k4 = gemm.k_steps(instr, K)
    seen = np.zeros((nC, M, N), int)
    for kind, a_off, b_off, c_off, cm, ct in jobs.tolist():
        ci, rest = divmod(c_off // 4, M * N)
        m0, n0 = divmod(rest, N)
        assert a_off == (ia[ci] * M + m0) * lda and b_off == (ib[ci] * kb * nb + n0 // 16) * 1024
        main, tail = TileConfig.from_bytes(cfgs[cm]), TileConfig.from_bytes(cfgs[ct])
        main.validate(), tail.validate()
        p = prog if kind == 0 else program.edge_program()
        for r in range(p.rows):
            for c in range(p.cols):
                acc = p.acc[r * p.cols + c]
                mr, nc = main.rows[acc], main.colsb[acc] // 4
                assert (mr, nc) == (16, 16) or kind == 1
                assert (tail.rows[p.a[r]], tail.colsb[p.a[r]], tail.rows[p.b[c]]) == (mr, 4 * k4, k4)
                assert main.colsb[p.a[r]] == 64 and main.rows[p.b[c]] == 16
                seen[ci, m0 + 16 * r : m0 + 16 * r + mr, n0 + 16 * c : n0 + 16 * c + nc] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("instr", TILE_INSTRUCTIONS, ids=lambda i: i.mnemonic)
@pytest.mark.parametrize("tiling", ["1x1", "2x2", "2x3", "3x2"])
def test_native_gemm_assembly(instr, tiling):
    """Granite Rapids code of the native GEMM: the superblock program's multiplies with the
    planned registers, the edge tile's 1x1, two configurations per program, one release."""
    rows, cols = dispatch.parse_tiling(tiling)
    prog = program.plan(rows, cols)
    text = jit.assembly(program.gemm_ir(instr, prog, "g"), instr.llvm_cpu, inspect.TARGETS[instr.llvm_cpu])
    name = instr.tile_method
    dps = re.findall(rf"\b{name}\t%tmm(\d), %tmm(\d), %tmm(\d)", text)
    want = {(b, a, c) for _, c, a, b in (s for s in prog.steps if s[0] == "dp")} | {(2, 1, 0)}
    assert {tuple(map(int, d)) for d in dps} == want
    # The superblock's step appears in the K loop and as the last step (LLVM may merge the
    # superblock's and the edge tile's code where they are the same, as for 1x1).
    assert sum(1 for d in dps if d != ("2", "1", "0")) >= (2 * rows * cols if (rows, cols) != (1, 1) else 0)
    assert text.count("ldtilecfg") >= 2 and text.count("tilerelease") == 1 and "tilestored" in text


@pytest.mark.parametrize(
    "instr", [i for i in TILE_INSTRUCTIONS if i.cpu_flag in ("amx_bf16", "amx_int8")], ids=lambda i: i.mnemonic
)
def test_sapphire_rapids_code(instr):
    """Sapphire Rapids (AMX-BF16 and AMX-INT8, no AMX-FP16) gets the same program."""
    spr = "+amx-tile,+amx-int8,+amx-bf16"
    text = jit.assembly(program.gemm_ir(instr, program.plan(2, 2), "g"), "sapphirerapids", spr)
    assert f"{instr.tile_method}\t%tmm6, %tmm4, %tmm0" in text and f"{instr.tile_method}\t%tmm7, %tmm5, %tmm3" in text


def test_no_tile_form_is_refused():
    with pytest.raises(ValueError, match="VDPBF16PS has no tile form"):
        program.gemm_ir(I["VDPBF16PS"], program.plan(1, 1), "g")


def test_jit_compiles_tile_code_for_this_host_without_calling_it():
    """The native GEMM JIT-compiled for this host's triple with AMX features added: LLVM links
    it and hands back an address. (Calling it needs AMX; nothing here does.) The machine code
    holds TILERELEASE's encoding, VEX C4 E2 78 49 C0 (Intel SDM)."""
    import llvmlite.binding as llvm

    ir = program.gemm_ir(I["TDPBF16PS"], program.plan(2, 2), "tilegemm_test_jit_only")
    addr = jit.compile_host(ir, ("tilegemm_test_jit_only",), AMX)["tilegemm_test_jit_only"]
    assert addr > 0
    tm = llvm.Target.from_triple(jit.TRIPLE).create_target_machine(cpu="graniterapids", features=AMX)
    mod = llvm.parse_assembly(ir)
    assert bytes.fromhex("c4e27849c0") in tm.emit_object(mod)
    assert jit.with_features("+a,-amx-tile,+b", "+amx-tile,-b") == "+a,+amx-tile,-b"


def test_inspect_shows_the_native_gemm(capsys):
    from tilegemm import inspect
    from tilegemm.__main__ import main

    text = inspect.native_asm("s8u8", "2x2")
    assert "tdpbsud\t%tmm7, %tmm5, %tmm3" in text and "tilerelease" in text
    assert "vdpbf16ps" in inspect.native_asm("bf16", isa="avx512", cpu="sapphirerapids")
    with pytest.raises(ValueError, match="unknown cpu 'pentium'"):
        inspect.native_asm(cpu="pentium")
    assert main(["ir", "--native", "--dtype", "fp16", "--tiling", "1x1"]) == 0
    assert "tdpfp16ps\t%tmm2, %tmm1, %tmm0" in capsys.readouterr().out

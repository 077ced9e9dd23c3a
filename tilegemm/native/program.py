"""Tile programs: the seed's loops as data, and the LLVM IR made from them.

A K step of a superblock is a list of operations, ``("load", tmm, "A" | "B", index)`` and
``("dp", c, a, b)``, with the tile numbers fixed (AMX takes them as immediates).
:func:`seed_steps` gives the seed's listings (what ``tilegemm.inspect.amx_asm`` prints);
:func:`plan` gives the register allocation the native kernels run: every operand tile resident
where the 8 registers allow (1x1, 1x2, 2x1, 1x3, 3x1, 2x2: the seed's 2x2 with both B tiles
resident, 4 loads per 4 multiplies), otherwise one A and one B register, walking the side that
loads less (2x3 row by row: 8 loads per 6 multiplies; 3x2 column by column).

:func:`gemm_ir` turns a program into the native GEMM: ``void f(i64* args, i64 j0, i64 j1)`` runs
jobs ``j0 .. j1`` of a job table (``tilegemm.native.gemm`` builds it): a whole superblock of 16 x
16 tiles through :func:`plan`, or one edge tile (fewer rows or columns) through the 1x1 program.
Each job runs the K steps exactly as the emulation defines them (``docs/native.md``): full
steps under one configuration, then, where K is not a whole number of steps, the accumulators
are stored, the tail configuration (A colsb = B rows x 4 = 4 * K4) is loaded, the accumulators
are loaded back and the last step runs. A configuration is loaded only when it differs from the
one loaded last in this call. The tile instructions are called through ``lower``: the
LLVM intrinsics for real machine code, or other functions of the same arguments (the dry run).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..instructions import Instruction

__all__ = [
    "Program",
    "Emitter",
    "seed_steps",
    "plan",
    "edge_program",
    "emit_step",
    "declarations",
    "gemm_ir",
    "ARGS",
    "JOB_FIELDS",
    "INTRINSICS",
]

#: Fields of the ``args`` block, in order (each an i64; pointers as addresses).
ARGS = ("A", "lda", "B", "bstep", "C", "ldc", "nfull", "tail", "cfgs", "jobs", "accumulate", "astep")
#: Fields of one job row: kind (0 superblock, 1 edge tile), byte offsets into A, B, C, and the
#: indices of its main and tail configuration in the configuration table.
JOB_FIELDS = ("kind", "a_off", "b_off", "c_off", "cfg_main", "cfg_tail")
TILE_BYTES = 1024  # one packed B block: 16 rows of 64 bytes
TILE_ROWS = 16
TILE_REGISTERS = 8

#: The tile intrinsics besides the multiplies, with their LLVM signatures (tile numbers first).
INTRINSICS = {
    "llvm.x86.ldtilecfg": "void (ptr)",
    "llvm.x86.sttilecfg": "void (ptr)",
    "llvm.x86.tileloadd64": "void (i8 immarg, ptr, i64)",
    "llvm.x86.tilestored64": "void (i8 immarg, ptr, i64)",
    "llvm.x86.tilezero": "void (i8 immarg)",
    "llvm.x86.tilerelease": "void ()",
}
_MULTIPLY = "void (i8 immarg, i8 immarg, i8 immarg)"


@dataclass(frozen=True)
class Program:
    """A superblock's registers and one K step's operations.

    ``acc[r * cols + c]``: the accumulator of C tile (r, c); ``a[r]`` / ``b[c]``: the register A
    row block r / B column block c is loaded into (shared when single-buffered)."""

    rows: int
    cols: int
    acc: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...]
    steps: tuple[tuple, ...]

    @property
    def loads_per_step(self) -> int:
        return sum(1 for s in self.steps if s[0] == "load")


def seed_steps(tiling: str) -> list[tuple]:
    """The seed-style K step for a tiling, as ``tilegemm.inspect.amx_asm`` prints it.

    1x1 and 2x2 are the seed's listings (tile numbers as printed; the 2x2 listing reloads TMM6
    and TMM7). Every other tiling is the seed's style with one A and one B register (the port
    ``tilegemm.amx.seed.gemm_single_buffered``): accumulators TMM0..TMM(R*C-1), A in TMM(R*C),
    B in TMM(R*C+1).
    """
    from ..dispatch import parse_tiling

    if tiling == "1x1":
        return [("load", 1, "A", 0), ("load", 2, "B", 0), ("dp", 0, 1, 2)]
    if tiling == "2x2":  # the listing as printed in the seed
        return [
            ("load", 4, "A", 0),
            ("load", 6, "B", 0),
            ("dp", 0, 4, 6),
            ("load", 7, "B", 1),
            ("dp", 1, 4, 7),
            ("load", 5, "A", 1),
            ("load", 6, "B", 0),
            ("dp", 2, 5, 6),
            ("load", 7, "B", 1),
            ("dp", 3, 5, 7),
        ]
    rows, cols = parse_tiling(tiling)
    ta, tb = rows * cols, rows * cols + 1
    out: list[tuple] = []
    for r in range(rows):
        out.append(("load", ta, "A", r))
        for c in range(cols):
            out += [("load", tb, "B", c), ("dp", r * cols + c, ta, tb)]
    return out


def plan(rows: int, cols: int) -> Program:
    """The native kernels' registers for an R x C superblock (see the module's docstring)."""
    n_acc = rows * cols
    if n_acc + 2 > TILE_REGISTERS:
        raise ValueError(f"{rows}x{cols} needs {n_acc + 2} tile registers, more than {TILE_REGISTERS}")
    acc = tuple(range(n_acc))
    if n_acc + rows + cols <= TILE_REGISTERS:  # everything resident
        a = tuple(n_acc + r for r in range(rows))
        b = tuple(n_acc + rows + c for c in range(cols))
        steps: list[tuple] = [("load", a[r], "A", r) for r in range(rows)]
        steps += [("load", b[c], "B", c) for c in range(cols)]
        steps += [("dp", acc[r * cols + c], a[r], b[c]) for r in range(rows) for c in range(cols)]
        return Program(rows, cols, acc, a, b, tuple(steps))
    ta, tb = n_acc, n_acc + 1
    steps = []
    if rows + n_acc <= cols + n_acc:  # row by row: each A once, every B once per row
        for r in range(rows):
            steps.append(("load", ta, "A", r))
            for c in range(cols):
                steps += [("load", tb, "B", c), ("dp", acc[r * cols + c], ta, tb)]
    else:  # column by column: each B once, every A once per column
        for c in range(cols):
            steps.append(("load", tb, "B", c))
            for r in range(rows):
                steps += [("load", ta, "A", r), ("dp", acc[r * cols + c], ta, tb)]
    return Program(rows, cols, acc, (ta,) * rows, (tb,) * cols, tuple(steps))


def edge_program() -> Program:
    """One tile of any shape: the seed's 1x1 (TMM0 = C, TMM1 = A, TMM2 = B)."""
    return Program(1, 1, (0,), (1,), (2,), (("load", 1, "A", 0), ("load", 2, "B", 0), ("dp", 0, 1, 2)))


class Emitter:
    """Text IR with fresh value names."""

    def __init__(self, lower):
        self.lines: list[str] = []
        self.n = 0
        self.lower = lower

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"%{stem}{self.n}"

    def __call__(self, line: str) -> None:
        self.lines.append(line if line.endswith(":") else "  " + line)

    def val(self, stem: str, expr: str) -> str:
        name = self.fresh(stem)
        self(f"{name} = {expr}")
        return name

    def gep(self, base: str, offset: str | int) -> str:
        return self.val("p", f"getelementptr i8, ptr {base}, i64 {offset}")

    def call(self, intrinsic: str, *args: str) -> None:
        self(f"call void @{self.lower(intrinsic)}({', '.join(args)})")


def emit_step(em: Emitter, prog: Program, tdp: str, pa: str, pb: str, lda: str, arow: list[str]) -> None:
    """One K step's loads and multiplies: A row block r at ``pa + arow[r]`` (stride ``lda``),
    B column block c at ``pb + 1024 c`` (stride 64)."""
    for s in prog.steps:
        if s[0] == "load":
            _, t, which, i = s
            if which == "A":
                ptr, stride = (em.gep(pa, arow[i]) if i else pa), lda
            else:
                ptr, stride = (em.gep(pb, TILE_BYTES * i) if i else pb), "64"
            em.call("llvm.x86.tileloadd64", f"i8 {t}", f"ptr {ptr}", f"i64 {stride}")
        else:
            em.call(tdp, f"i8 {s[1]}", f"i8 {s[2]}", f"i8 {s[3]}")


def declarations(tdp: str, lower) -> list[str]:
    """``declare`` lines for the tile intrinsics and the multiply ``tdp``, through ``lower``."""
    sigs = dict(INTRINSICS, **{tdp: _MULTIPLY})
    out = []
    for name, sig in sigs.items():
        ret, _, params = sig.partition(" ")
        if lower(name) != name:
            params = params.replace(" immarg", "")
        out.append(f"declare {ret} @{lower(name)}{params}")
    return out


def _accumulators(em, prog: Program, op: str, pc: str, ldc: str, crow: list[str]) -> None:
    """Load, store or zero every accumulator of ``prog``; C tile (r, c) at ``pc + crow[r] + 64 c``."""
    for r in range(prog.rows):
        for c in range(prog.cols):
            t = prog.acc[r * prog.cols + c]
            if op == "zero":
                em.call("llvm.x86.tilezero", f"i8 {t}")
                continue
            off = em.val("o", f"add i64 {crow[r]}, {64 * c}")
            ptr = em.gep(pc, off)
            name = "llvm.x86.tileloadd64" if op == "load" else "llvm.x86.tilestored64"
            em.call(name, f"i8 {t}", f"ptr {ptr}", f"i64 {ldc}")


def _configure(em: Emitter, label: str, cfg: str) -> None:
    """LDTILECFG ``cfg`` unless it is the configuration loaded last (``%current``): the
    instruction is slow, and consecutive jobs mostly share one. Skipping it leaves stale
    register contents, which is harmless: every job zeroes or loads its accumulators and loads
    its operands before it reads a register."""
    cur = em.val("cur", "load ptr, ptr %current")
    same = em.val("same", f"icmp eq ptr {cur}, {cfg}")
    em(f"br i1 {same}, label %{label}.configured, label %{label}.configure")
    em(f"{label}.configure:")
    em.call("llvm.x86.ldtilecfg", f"ptr {cfg}")
    em(f"store ptr {cfg}, ptr %current")
    em(f"br label %{label}.configured")
    em(f"{label}.configured:")


def _program_body(em: Emitter, label: str, prog: Program, tdp: str, v: dict, done: str) -> None:
    """The phases of one job under ``prog`` (see the module's docstring), ending in ``done``."""
    arow = [em.val("ar", f"mul i64 {v['lda']}, {TILE_ROWS * r}") for r in range(prog.rows)]
    crow = [em.val("cr", f"mul i64 {v['ldc']}, {TILE_ROWS * r}") for r in range(prog.rows)]
    em(f"br i1 {v['has_main']}, label %{label}.main, label %{label}.tailcheck")
    # -- full steps under the main configuration ----------------------------------------------
    em(f"{label}.main:")
    _configure(em, f"{label}.main", v["cfg_main"])
    em(f"br i1 {v['accumulate']}, label %{label}.main.load, label %{label}.main.zero")
    for how in ("load", "zero"):
        em(f"{label}.main.{how}:")
        _accumulators(em, prog, how, v["pc"], v["ldc"], crow)
        em(f"br label %{label}.loop")
    em(f"{label}.loop:")
    s = em.fresh("s")
    em(f"{s} = phi i64 [ 0, %{label}.main.load ], [ 0, %{label}.main.zero ], [ %{label}.s1, %{label}.loop ]")
    pa = em.gep(v["pa"], em.val("ka", f"mul i64 {s}, {v['astep']}"))
    pb = em.gep(v["pb"], em.val("kb", f"mul i64 {s}, {v['bstep']}"))
    emit_step(em, prog, tdp, pa, pb, v["lda"], arow)
    em(f"%{label}.s1 = add i64 {s}, 1")
    more = em.val("more", f"icmp slt i64 %{label}.s1, {v['nfull']}")
    em(f"br i1 {more}, label %{label}.loop, label %{label}.main.done")
    em(f"{label}.main.done:")
    _accumulators(em, prog, "store", v["pc"], v["ldc"], crow)
    em(f"br label %{label}.tailcheck")
    # -- the last, short step under the tail configuration ------------------------------------
    em(f"{label}.tailcheck:")
    em(f"br i1 {v['has_tail']}, label %{label}.tail, label %{done}")
    em(f"{label}.tail:")
    _configure(em, f"{label}.tail", v["cfg_tail"])
    em(f"br i1 {v['reload']}, label %{label}.tail.load, label %{label}.tail.zero")
    for how in ("load", "zero"):
        em(f"{label}.tail.{how}:")
        _accumulators(em, prog, how, v["pc"], v["ldc"], crow)
        em(f"br label %{label}.tail.step")
    em(f"{label}.tail.step:")
    pa = em.gep(v["pa"], em.val("ka", f"mul i64 {v['nfull']}, {v['astep']}"))
    pb = em.gep(v["pb"], em.val("kb", f"mul i64 {v['nfull']}, {v['bstep']}"))
    emit_step(em, prog, tdp, pa, pb, v["lda"], arow)
    _accumulators(em, prog, "store", v["pc"], v["ldc"], crow)
    em(f"br label %{done}")


def gemm_ir(instr: Instruction, prog: Program, name: str, lower=lambda n: n) -> str:
    """LLVM IR of the native GEMM ``void name(i64* args, i64 j0, i64 j1)`` for a tile
    instruction and a superblock program (edge tiles run :func:`edge_program`).

    ``args`` holds :data:`ARGS`; the job table :data:`JOB_FIELDS` rows; the configuration table
    64-byte LDTILECFG blocks. ``lower`` maps each intrinsic name to the function called.
    """
    if instr.tile_method is None or instr.llvm is None:
        raise ValueError(f"{instr.mnemonic} has no tile form; gemm_ir needs a tile instruction")
    tdp = instr.llvm
    em = Emitter(lower)
    em(f"define void @{name}(ptr %args, i64 %j0, i64 %j1) {{")
    em("entry:")
    em("%current = alloca ptr")
    em("store ptr null, ptr %current")
    v: dict[str, str] = {}
    for i, field in enumerate(ARGS):
        p = em.val("ap", f"getelementptr i64, ptr %args, i64 {i}")
        v[field] = em.val(field, f"load i64, ptr {p}")
    for field in ("A", "B", "C", "cfgs", "jobs"):
        v[field] = em.val(field, f"inttoptr i64 {v[field]} to ptr")
    v["has_main"] = em.val("hm", f"icmp sgt i64 {v['nfull']}, 0")
    v["has_tail"] = em.val("ht", f"icmp ne i64 {v['tail']}, 0")
    v["accumulate"] = em.val("acc", f"icmp ne i64 {v['accumulate']}, 0")
    v["reload"] = em.val("rl", f"or i1 {v['has_main']}, {v['accumulate']}")
    em("br label %job.head")
    em("job.head:")
    em("%j = phi i64 [ %j0, %entry ], [ %j.next, %job.next ]")
    em("%more.jobs = icmp slt i64 %j, %j1")
    em("br i1 %more.jobs, label %job.body, label %exit")
    em("job.body:")
    row = em.gep(v["jobs"], em.val("jo", f"mul i64 %j, {8 * len(JOB_FIELDS)}"))
    f = {}
    for i, field in enumerate(JOB_FIELDS):
        f[field] = em.val(field, f"load i64, ptr {em.gep(row, 8 * i)}")
    v["pa"], v["pb"], v["pc"] = (em.gep(v[x], f[o]) for x, o in (("A", "a_off"), ("B", "b_off"), ("C", "c_off")))
    v["cfg_main"] = em.gep(v["cfgs"], em.val("cm", f"mul i64 {f['cfg_main']}, 64"))
    v["cfg_tail"] = em.gep(v["cfgs"], em.val("ct", f"mul i64 {f['cfg_tail']}, 64"))
    whole = em.val("whole", f"icmp eq i64 {f['kind']}, 0")
    em(f"br i1 {whole}, label %sb.start, label %edge.start")
    for label, program in (("sb", prog), ("edge", edge_program())):
        em(f"{label}.start:")
        _program_body(em, label, program, tdp, v, "job.next")
    em("job.next:")
    em("%j.next = add i64 %j, 1")
    em("br label %job.head")
    em("exit:")
    em.call("llvm.x86.tilerelease")
    em("ret void")
    em("}")
    return "\n".join(declarations(tdp, lower) + em.lines) + "\n"

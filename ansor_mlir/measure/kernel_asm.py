"""What a built kernel's hot loop does, read from the x86-64 assembly IREE emits for a dispatch.

A register-blocked micro-kernel is good when its innermost loop is vector
FMAs fed by vector loads and broadcasts, with every accumulator in a
register: no stores to the stack and no reloads from it (spills), no
accumulators written back to the output each iteration, no gathers.
This reads the AT&T assembly IREE writes with
`--iree-hal-dump-executable-files-to=DIR` (`*.s`), finds the innermost loops
(a backward branch to a label of the same function with no other loop inside)
and counts, in the loop with the most FMAs, what each instruction is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line

FMA_PREFIXES = ("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")
GATHER_PREFIXES = ("vgather", "vpgather")
SHUFFLE_PREFIXES = ("vperm", "vshuf", "vinsert", "vextract", "vunpck", "vblend", "vpblend", "vpshuf", "vmovshdup",
                    "vmovsldup", "vmovhlps", "vmovlhps")
LOAD_MNEMONICS = ("vmovups", "vmovaps", "vmovdqu", "vmovdqa", "vmovss", "vmovsd", "vbroadcast", "vpbroadcast")
# Spill slots: a fixed offset from the stack or frame pointer, no index register (`-120(%rsp)`).
SPILL_SLOTS = ("(%rsp)", "(%rbp)")
# What names a dispatch's function in IREE's executables (`grp_dispatch_1_conv_...`).
DISPATCH_MARK = "_dispatch_"


@dataclass(frozen=True)
class LoopReport:
    """Counts over one innermost loop's instructions (one iteration of its body)."""

    label: str
    instructions: int
    fmas: int
    fmas_with_memory: int
    vector_loads: int
    broadcasts: int
    stack_loads: int
    stack_stores: int
    gathers: int
    shuffles: int
    # Vector stores to memory that is not a spill slot: in a micro-kernel's loop, accumulators written back to
    # the output on every iteration (C2D's direct convolution stored each of its 8 per 24 FMAs).
    vector_stores: int = 0

    @property
    def spills(self) -> int:
        return self.stack_loads + self.stack_stores

    @property
    def is_micro_kernel(self) -> bool:
        """FMAs, no spill or reload, no store, no gather: the accumulators live in registers across the loop."""
        return self.fmas > 0 and self.spills == 0 and self.vector_stores == 0 and self.gathers == 0

    def to_dict(self) -> dict:
        return {**asdict(self), "spills": self.spills, "micro_kernel": self.is_micro_kernel}


def _instruction(line: str) -> tuple[str, list[str]] | None:
    """(mnemonic, operands) of an instruction line, None for labels, directives and comments."""
    text = line.split("#", 1)[0].strip()
    if not text or text.endswith(":") or text.startswith("."):
        return None
    mnemonic, *rest = text.split(None, 1)
    return mnemonic, _operands(rest[0] if rest else "")


def _operands(text: str) -> list[str]:
    """Operands split at top-level commas (`-8(%rax,%rcx,4)` is one operand)."""
    out, depth, current = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        current.append(ch)
    if current:
        out.append("".join(current).strip())
    return [op for op in out if op]


def _is_memory(operand: str) -> bool:
    return "(" in operand and not operand.startswith("{")


def innermost_loops(assembly: str) -> list[tuple[str, list[str]]]:
    """(label, body lines) of every innermost loop: a label, then a later branch back to it with no other
    backward branch in between."""
    lines = assembly.splitlines()
    labels: dict[str, int] = {}
    loops = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.endswith(":") and not stripped.startswith("#"):
            labels[stripped[:-1]] = i
            continue
        parsed = _instruction(line)
        if parsed is None or not parsed[0].startswith("j") or not parsed[1]:
            continue
        start = labels.get(parsed[1][-1])
        if start is not None and start < i:
            loops.append((parsed[1][-1], start, i))
    inner = [loop for loop in loops
             if not any(other is not loop and loop[1] <= other[1] and other[2] < loop[2] for other in loops)]
    return [(label, lines[start + 1:end + 1]) for label, start, end in inner]


def analyze_loop(label: str, body: list[str]) -> LoopReport:
    counts = dict.fromkeys(("instructions", "fmas", "fmas_with_memory", "vector_loads", "broadcasts",
                            "stack_loads", "stack_stores", "gathers", "shuffles", "vector_stores"), 0)
    for line in body:
        parsed = _instruction(line)
        if parsed is None:
            continue
        mnemonic, operands = parsed
        counts["instructions"] += 1
        sources, dest = operands[:-1], operands[-1:] or [""]
        if any(_stack(op) for op in sources):
            counts["stack_loads"] += 1
        if _stack(dest[0]):
            counts["stack_stores"] += 1
        elif mnemonic.startswith(LOAD_MNEMONICS) and _is_memory(dest[0]) and "mm" in "".join(sources):
            counts["vector_stores"] += 1
        if mnemonic.startswith(FMA_PREFIXES):
            counts["fmas"] += 1
            counts["fmas_with_memory"] += any(_is_memory(op) for op in sources)
        if mnemonic.startswith(GATHER_PREFIXES):
            counts["gathers"] += 1
        # A broadcast of a register is a shuffle too: it takes a vector pipe, where one from memory is a load.
        register_broadcast = "broadcast" in mnemonic and bool(sources) and not _is_memory(sources[0])
        if mnemonic.startswith(SHUFFLE_PREFIXES) or register_broadcast:
            counts["shuffles"] += 1
        if "broadcast" in mnemonic or any("{1to" in op for op in operands):
            counts["broadcasts"] += 1
        elif mnemonic.startswith(LOAD_MNEMONICS) and sources and _is_memory(sources[0]) and not _is_memory(dest[0]):
            counts["vector_loads"] += 1
    return LoopReport(label=label, **counts)


def _stack(operand: str) -> bool:
    """A spill slot: memory at a fixed offset from the stack or frame pointer (a stack buffer walked with an
    index register is data, a packed panel say, not a spill)."""
    return operand.endswith(SPILL_SLOTS)


def dispatch_code(assembly: str) -> str:
    """The lines of the dispatch functions (`..._dispatch_N_...:`), or all of it if it names none. IREE links
    library code into the executable (libm's `log` has a 10-FMA loop), which must not pass for the kernel."""
    kept, keep, found = [], True, False
    for line in assembly.splitlines():
        if line and not line[0].isspace() and not line.startswith(".") and line.rstrip().endswith(":"):
            keep = DISPATCH_MARK in line
            found = found or keep
        kept.append(line if keep else "")
    return "\n".join(kept) if found else assembly


def loop_reports(assembly: str) -> list[LoopReport]:
    """Every innermost loop of the dispatch functions, counted."""
    return [analyze_loop(label, body) for label, body in innermost_loops(dispatch_code(assembly))]


def hot_loop(assembly: str) -> LoopReport | None:
    """The innermost loop of a dispatch function with the most FMAs (the micro-kernel, when there is one)."""
    return max(loop_reports(assembly), key=lambda r: (r.fmas, r.instructions), default=None)


def hot_and_spilling(assemblies: Sequence[str]) -> tuple[LoopReport | None, list[str]]:
    """Over every dispatch of a module's assembly files: the hot loop (`hot_loop`'s rule) and the labels of the
    other innermost loops that spill or reload. The hot loop can be clean while another is not (TBS's panel
    packing spilled 225 times per transpose block beside a clean micro-kernel)."""
    loops = [loop for text in assemblies for loop in loop_reports(text)]
    hot = max(loops, key=lambda r: (r.fmas, r.instructions), default=None)
    return hot, [loop.label for loop in loops if loop.spills and loop is not hot]


def dump_assembly(module_text: str, workdir: Path, flags: list[str] | None = None) -> list[Path]:
    """Compile a module (IREE's flow-level or input IR, configurations attached) and return the assembly
    files of its dispatches. A module whose target is baked in needs no target flags."""
    dump = workdir / "executables"
    result = compile_vmfb(module_text, [*(flags or []), f"--iree-hal-dump-executable-files-to={dump}"],
                          workdir / "program.vmfb")
    if not result.ok:
        raise RuntimeError(f"iree-compile failed: {first_error_line(result.stderr)}")
    return sorted(dump.glob("*.s"))

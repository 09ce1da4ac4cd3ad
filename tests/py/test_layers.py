"""The package's import graph points one way: no cycle, no module importing from a layer above it.

Layers, bottom to top (docs/concepts/architecture.md). A module may import from its
own layer and the ones below. Any import counts, including those inside
functions: a lazy import upwards is still an upward arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "ansor_mlir"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "core"),
    ("mlir",),
    ("frontend",),
    ("space", "steps"),
    ("codegen",),
    ("model",),
    ("search",),
    ("measure",),
    ("database",),
    ("tuning",),
    ("api", "cli", "measure_cli", "log_cli", "run_commands", "passes", "dialect"),
)


def layer_of(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else ""
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    raise AssertionError(f"{module}: not in any layer; add its package to LAYERS and docs/concepts/architecture.md")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ansor_mlir"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ansor_mlir")}
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; use absolute `ansor_mlir.` imports")
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_every_module_belongs_to_a_layer():
    for name in graph():
        if name != "ansor_mlir":
            layer_of(name)


def test_no_import_points_upwards():
    upward = [
        f"{name} (layer {layer_of(name)}) imports {dep} (layer {layer_of(dep)})"
        for name, deps in graph().items() if name != "ansor_mlir"
        for dep in deps if dep != "ansor_mlir" and layer_of(dep) > layer_of(name)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep] if dep in stack else [node, dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])

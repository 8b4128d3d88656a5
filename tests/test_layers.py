"""No import runs back up the engine's layers (docs/design.md, "Layers").

From the bottom: the store; media files; analysis, compute placement and the report; adapter
math; datasets; the family registry (the interface, `tunesmith/families/__init__.py`); training
(config, the loop, state); the families themselves; rendering; the examples. A module may
import its own layer and the ones below it, never one above.
"""

import ast
from pathlib import Path

import tunesmith

LAYERS = [
    {"store", "config"},
    {"media"},
    {"analysis", "backends", "report"},
    {"adapters"},
    {"dataset"},
    {"families"},  # the registry and the Family interface
    {"train"},
    {"family:*"},  # tunesmith/families/<name>/
    {"render"},
    {"examples"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}
ROOT = Path(tunesmith.__file__).parent


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "families" and parts[2] not in ("__init__",):
        return "family:*"
    return parts[1] if len(parts) > 1 else "store"


def imported(path: Path, module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tunesmith.")}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tunesmith":
                found |= {f"tunesmith.{a.name}" for a in node.names}
            elif node.module.startswith("tunesmith."):
                found.add(node.module)
    return found


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__")
        if module == "tunesmith":
            continue
        for target in imported(path, module):
            if layer_of(target) == layer_of(module):
                continue
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                upward.append(f"{module} -> {target}")
    assert upward == []

"""No import runs back up the layers (docs/design.md, "Layers").

Inside the engine, from the bottom: the store; media files; analysis, compute placement and
the report; adapter math and the foreign file formats; datasets; the family interface and
registry (`tunesmith/family.py`); training (config, the loop, state); the families
themselves (`tunesmith/families/<name>/`); rendering; the examples. Above the engine:
`resources/`, then `assets/`, then `pipelines/`. A module may import its own layer and the
ones below it, never one above, wherever the import stands (a function's body too).
"""

import ast
from pathlib import Path

import pytest

import tunesmith

REPO = Path(tunesmith.__file__).parent.parent
ENGINE = [
    {"store", "config", "progress"},
    {"media"},
    {"analysis", "backends", "report"},
    {"adapters", "formats"},
    {"dataset", "encoding"},
    {"family"},  # the Family interface and the registry
    {"train"},
    {"family:*"},  # tunesmith/families/<name>/
    {"render", "quality"},  # quality: measures on renders, with embedding models
    {"examples"},
]
RANK = {name: i for i, layer in enumerate(ENGINE) for name in layer}
TOP = ["tunesmith", "resources", "assets", "pipelines"]  # each may import those before it


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "families":
        return "family:*"
    if parts[1:] == ["families"]:
        return "family:*"  # the package of the families, which holds no code
    return parts[1] if len(parts) > 1 else "store"


def imported(path: Path) -> set[str]:
    """Every module `path` imports (at the top or inside a function), of the project's own."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in TOP}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if node.module in TOP:
                found |= {f"{node.module}.{a.name}" for a in node.names}
            elif top in TOP:
                found.add(node.module)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def upward_imports() -> list[str]:
    upward = []
    for package in TOP:
        for path in sorted((REPO / package).rglob("*.py")):
            module = module_name(path)
            for target in imported(path):
                here, there = TOP.index(module.split(".")[0]), TOP.index(target.split(".")[0])
                if there > here:
                    upward.append(f"{module} -> {target}")
                elif there == here == 0 and module != "tunesmith" and target != "tunesmith":
                    if RANK[layer_of(target)] > RANK[layer_of(module)]:
                        upward.append(f"{module} -> {target}")
    return upward


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


@pytest.mark.parametrize(
    ("module", "target", "upward"),
    [
        ("tunesmith.train.loop", "tunesmith.families.sdxl.trainer", True),
        ("tunesmith.family", "tunesmith.train.config", True),
        ("tunesmith.train.config", "tunesmith.family", False),
        ("tunesmith.families.sdxl.files", "tunesmith.train.state", False),
    ],
)
def test_the_rank_of_a_pair(module, target, upward):
    assert (RANK[layer_of(target)] > RANK[layer_of(module)]) is upward


def test_the_engine_imports_neither_dagster_code_nor_the_layers_above(tmp_path):
    """A function-level import of `pipelines` from the engine counts as much as a top one."""
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from pipelines import cli\n    import assets.common\n")
    assert imported(bad) == {"pipelines.cli", "assets.common"}

"""The repository stands alone: every path the README, docs/ and the module docstrings name
exists, and none of them points outside the repository or to an issue tracker's numbers."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("tunesmith", "assets", "pipelines", "resources", "tests", "bench", "docs", "deploy", ".ci")
PATH = re.compile(r"(?<![\w/.<*-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|toml|yaml|yml|json|sh|txt))\b")
# a parent folder's notes, or a tracker's numbered tickets (spelled in pieces, so that this
# file does not match itself)
OUTSIDE = re.compile(
    "|".join([r"\.\./" + "shared", "shared/" + "reference", "[Ii]ss" + r"ue #?\d+\b"])
)


def _documents():
    yield ROOT / "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "docs").rglob("*.md")):
        yield path, path.read_text(encoding="utf-8")
    for top in ("tunesmith", "assets", "pipelines", "resources", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            if doc:
                yield path, doc


def test_every_path_a_document_names_exists():
    missing = []
    for path, text in _documents():
        for name in PATH.findall(text):
            if name.startswith(("data/", "http")) or "<" in name:
                continue  # generated outputs and placeholders
            candidates = [ROOT / name, path.parent / name]
            if name.split("/")[0] in TOPS or any(c.exists() for c in candidates):
                if not any(c.exists() for c in candidates):
                    missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert missing == []


def test_nothing_points_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path, text in _documents()
        for m in OUTSIDE.finditer(text)
    ]
    assert found == []

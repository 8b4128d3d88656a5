"""Example datasets made by code (nothing downloaded): `loops` (audio) and `rings` (images)."""

from __future__ import annotations

from pathlib import Path


def make_examples(root: Path) -> dict[str, Path]:
    """Write every example dataset under `root`; returns name → folder."""
    from tunesmith.examples.loops import make_loops
    from tunesmith.examples.rings import make_rings

    folders = {"loops": root / "loops", "rings": root / "rings"}
    make_loops(folders["loops"])
    make_rings(folders["rings"])
    return folders

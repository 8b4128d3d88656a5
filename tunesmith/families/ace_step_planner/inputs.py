"""What a planner run needs before it trains, found without loading a model library.

The `adapters` and `renders` stages key a planner run by its planner folder's fingerprint and
refuse a folder that is not a planner. They run on every build, trained or not, so this module
imports neither transformers nor PEFT: the tokenizer check loads `transformers` (seconds), and
its verdict on a folder is remembered by the folder's fingerprint beside the fingerprint cache,
so a build where nothing changed does not load it again (a changed file changes the
fingerprint, and the folder is checked again).
"""

from __future__ import annotations

import math
from pathlib import Path

from tunesmith.store import verdicts
from tunesmith.store.fingerprints import model_fingerprint


def resolve_planner(run, base_model: Path) -> Path:
    """The run's planner folder: absolute as given; relative, beside the base model folder
    (`<models>/<planner>`), else inside it (the published ACE-Step 1.5 repository keeps
    `acestep-5Hz-lm-*` in its base model folder). ValueError naming both places when neither
    holds it."""
    given = Path(str(run.adapter.planner)).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [Path(base_model).parent / given, Path(base_model) / given]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise ValueError(
        f"run {run.name!r}: no planner folder {str(given)!r} (looked in "
        f"{' and '.join(str(c) for c in candidates)}); set adapter.planner to an "
        "acestep-5Hz-lm-* folder"
    )


def rows_with_codes(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """(rows whose item has audio codes, one message per row without)."""
    kept, left = [], []
    for row in rows:
        count = row.get("codes")
        if count is None or (isinstance(count, float) and math.isnan(count)) or int(count) < 1:
            left.append(row["path"])
        else:
            kept.append(row)
    return kept, left


def no_codes_message(run_name: str, count: int, total: int) -> str:
    return (
        f"run {run_name}: {count} of {total} items have no audio codes (the base model has no "
        "audio_tokenizer/ or audio_token_detokenizer/), so the planner cannot train on them"
    )


def checked_planner(folder: Path, fingerprint_cache: Path | None = None) -> str:
    """The planner folder's fingerprint, after checking that it is a planner (its files, and a
    vocabulary with audio codes; ValueError naming each problem). A folder that passed before
    with the same fingerprint is not checked again (`fingerprint_cache` given)."""
    fingerprint = model_fingerprint(folder, fingerprint_cache)
    record = None
    if fingerprint_cache is not None:
        record = Path(fingerprint_cache).with_name("planners-checked.json")
    if verdicts.passed(record, fingerprint):
        return fingerprint
    from tunesmith.families.ace_step_planner.model import (
        check_planner,
        load_tokenizer,
        planner_vocab,
    )

    check_planner(folder)  # its files, each problem named
    planner_vocab(load_tokenizer(folder), folder)  # a Qwen3 without audio codes is refused
    verdicts.remember(record, fingerprint)
    return fingerprint

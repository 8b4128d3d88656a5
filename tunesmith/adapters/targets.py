"""Which layers get an adapter: underfit's include/exclude patterns.

underfit (stable-audio-3 `models/lora/model.py`: `_expand`, `_matches_any`, `add_lora`) selects
a layer when its name *contains* one of the include patterns (no include patterns: every layer)
and none of the exclude patterns. A pattern may hold numeric ranges `[i-j]`, expanded before
matching: `transformer.layers.[0-3].self_attn` stands for the four patterns
`transformer.layers.0.self_attn` … `transformer.layers.3.self_attn`; a descending range
`[3-0]` counts down; several ranges in one pattern expand to every combination. Patterns are
stripped of surrounding blanks and matched case-sensitively, as `add_lora` does.

Names are the checkpoint-convention names (`model.transformer.layers.3.self_attn.to_qkv`,
`conditioners.seconds_total.embedder.embedding.1`), so a filter string copied from underfit's
dashboard selects the same layers here.

Where this is stricter than underfit, on purpose:
- a bracket that is not a well-formed `[i-j]` raises (underfit would match it literally,
  and since no layer name holds a bracket, silently select nothing);
- a selection that comes out empty raises, naming a few of the available layers.

One difference in meaning to keep in mind when writing a file: underfit's `add_lora` reads an
*empty list* of include patterns as "include nothing" and only `None` as "include everything".
Here both mean "everything", and `underfit_format` writes `null` for an empty list for that
reason. Not handled here: which module types are eligible (the caller passes the candidates;
underfit's are every `nn.Linear` and `nn.Conv1d`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

_RANGE = re.compile(r"\[(\d+)-(\d+)\]")


class TargetSelectionError(ValueError):
    """A malformed include/exclude pattern, or a selection that matches no layer."""


def expand_pattern(pattern: str) -> list[str]:
    """`layers.[0-2].ff` → [`layers.0.ff`, `layers.1.ff`, `layers.2.ff`]; no range → [pattern]."""
    pattern = pattern.strip()
    pieces = _RANGE.split(pattern)  # literal, start, end, literal, start, end, ..., literal
    literals = pieces[0::3]
    for literal in literals:
        if "[" in literal or "]" in literal:
            raise TargetSelectionError(
                f"malformed range in layer pattern {pattern!r}: a range is written [i-j] with "
                f"two non-negative integers, e.g. 'transformer.layers.[0-3].self_attn'"
            )
    if len(pieces) == 1:
        return [pattern]
    pools = []
    for start, end in zip(pieces[1::3], pieces[2::3], strict=True):
        first, last = int(start), int(end)
        step = 1 if last >= first else -1
        pools.append([str(n) for n in range(first, last + step, step)])
    expanded = []
    for numbers in itertools.product(*pools):
        parts = [literals[0]]
        for number, literal in zip(numbers, literals[1:], strict=True):
            parts += [number, literal]
        expanded.append("".join(parts))
    return expanded


def expand_patterns(patterns: Sequence[str] | None) -> list[str]:
    """Every pattern expanded, in order; blank patterns dropped."""
    return [e for p in (patterns or ()) if p.strip() for e in expand_pattern(p)]


def matches_any(name: str, expanded_patterns: Sequence[str]) -> bool:
    """Whether `name` contains one of the (already expanded) patterns as a substring."""
    return any(p in name for p in expanded_patterns)


def select_targets(
    candidates: Iterable[tuple[str, T]],
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> list[tuple[str, T]]:
    """The (checkpoint_name, item) pairs that underfit's include/exclude rules select, in order.

    `include` empty or None selects every candidate; `exclude` wins over `include`.
    Raises TargetSelectionError for a malformed range or when nothing is selected.
    """
    candidates = list(candidates)
    wanted, unwanted = expand_patterns(include), expand_patterns(exclude)
    selected = [
        (name, item)
        for name, item in candidates
        if (not wanted or matches_any(name, wanted)) and not matches_any(name, unwanted)
    ]
    if not selected:
        names = [name for name, _ in candidates]
        sample = ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
        raise TargetSelectionError(
            f"no layer selected by include={list(include or [])} exclude={list(exclude or [])}; "
            f"patterns are substrings of checkpoint names such as: {sample or '(no candidates)'}"
        )
    return selected

"""Which items train and which are held out to measure the validation loss on.

A tenth of the items (1 to 4) is held out, or `holdout` of them when the run says; with fewer
than 5 items none are, and the validation loss is measured on the training items (the note
says so: it then tells how well they are fitted, not how well others would be). The held-out
items are the first by a hash of their path, so adding a file to a dataset rarely changes
which items are held out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Split(Generic[T]):
    train: list[T]
    validation: list[T]
    on_training_items: bool  # too few items to hold any out: validation reuses training items

    def note(self, what: str = "item") -> str:
        if self.on_training_items:
            return f"validation on training {what}s: fewer than 5 {what}s, none held out"
        return f"validation on {len(self.validation)} held-out {what}(s)"


def split_holdout(
    items: Sequence[T], holdout: int | None = None, path: Callable[[T], str] = lambda i: i.path
) -> Split[T]:
    """Hold out a tenth of the items (1 to 4), or `holdout`; under 5 items, hold none out."""
    if holdout is None and len(items) < 5:
        return Split(list(items), list(items), on_training_items=True)
    count = holdout if holdout is not None else min(4, max(1, round(len(items) / 10)))
    if count < 1 or count >= len(items):
        raise ValueError(f"holdout {count} leaves no training items out of {len(items)}")
    ranked = sorted(items, key=lambda item: hashlib.sha256(path(item).encode()).hexdigest())
    held = {path(item) for item in ranked[:count]}
    return Split(
        [i for i in items if path(i) not in held], [i for i in items if path(i) in held], False
    )

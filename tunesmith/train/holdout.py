"""Which items train and which are held out to measure the validation loss on.

One split for every family, with two policies for which items a run holds out when it does
not say how many:

- `BY_PATH_HASH` (Stable Audio 3, ACE-Step): a tenth of the items, rounded, 1 to 4, the
  first by a hash of their path, so adding a file to a dataset rarely changes which items
  are held out.
- `LAST_OF_SORTED` (SDXL: the kvad trainer's fixed validation set): a tenth, rounded down,
  1 to 4, the last items of the set sorted by path.

With fewer than 5 items none are held out, and with `train.holdout = 0` in every family: the
validation loss is then measured on the training items, and the note says so (it tells how
well they are fitted, not how well others would be). `holdout` = N holds out N items, by the
policy's choice; a holdout that leaves no item to train on is refused with one line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tunesmith.train.config import ConfigError

T = TypeVar("T")
MIN_ITEMS = 5  # fewer items than this: none held out unless the run says how many


@dataclass(frozen=True)
class HoldoutPolicy:
    """How many items a run holds out by default, and which."""

    tenth: Callable[[int], int]  # a tenth of n, rounded the policy's way (before 1 to 4)
    by_hash: bool  # the first by a hash of the path; else the last of the sorted items


BY_PATH_HASH = HoldoutPolicy(tenth=lambda n: round(n / 10), by_hash=True)
LAST_OF_SORTED = HoldoutPolicy(tenth=lambda n: n // 10, by_hash=False)


@dataclass(frozen=True)
class Split(Generic[T]):
    train: list[T]
    validation: list[T]
    on_training_items: bool  # none held out: validation reuses the training items
    asked: bool = False  # none held out because the run said `holdout = 0`

    def note(self, what: str = "item") -> str:
        if self.on_training_items:
            return f"validation on training {what}s: {_why(self.asked, what)}, none held out"
        return f"validation on {len(self.validation)} held-out {what}(s)"


def on_training_items_note(holdout: int | None, what: str = "item") -> str:
    """The line `tunesmith check` says for a run that asks for no held-out items, else ""."""
    if holdout != 0:
        return ""
    return f"validation on training {what}s: {_why(True, what)}, none held out"


def split_holdout(
    items: Sequence[T],
    holdout: int | None = None,
    path: Callable[[T], str] = lambda i: i.path,
    policy: HoldoutPolicy = BY_PATH_HASH,
    what: str = "item",
) -> Split[T]:
    """Hold out `holdout` items, or by default the policy's tenth (1 to 4; under 5 items
    none); 0 holds none out. A count that leaves no training item raises ConfigError."""
    n = len(items)
    if holdout is None:
        count = 0 if n < MIN_ITEMS else min(4, max(1, policy.tenth(n)))
    else:
        count = holdout
    if count > 0 and count >= n:
        raise ConfigError(
            f"train.holdout {count} leaves no training {what}s out of {n}: at most {n - 1}"
        )
    if count == 0:
        return Split(list(items), list(items), on_training_items=True, asked=holdout == 0)
    if not policy.by_hash:
        ordered = sorted(items, key=path)
        return Split(ordered[:-count], ordered[-count:], on_training_items=False)
    ranked = sorted(items, key=lambda item: hashlib.sha256(path(item).encode()).hexdigest())
    held = {path(item) for item in ranked[:count]}
    return Split(
        [i for i in items if path(i) not in held], [i for i in items if path(i) in held], False
    )


def _why(asked: bool, what: str) -> str:
    return "train.holdout = 0" if asked else f"fewer than {MIN_ITEMS} {what}s"

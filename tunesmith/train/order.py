"""The order a run draws its training items in: passes over them, resumable bit for bit.

One class for every family; the family's `OrderPolicy` says what it does differently:

- how a step that reaches the end of a pass ends: `WRAP` fills it from the next pass (kohya's
  and diffusers' loaders, SDXL), `DROP` starts the next pass and drops the partial step
  (underfit's `drop_last`, Stable Audio 3), `SHORT` takes fewer items (HOT-Step's last window
  of an epoch, ACE-Step);
- `oversample`: with fewer items than a step takes, a pass is that many steps of draws with
  replacement instead of a shuffle (underfit: 100);
- `first_epoch`: the number of the first pass (underfit counts from 0, the others from 1).

A pass is a new `torch.randperm` from the order's generator, drawn when the step that needs
it is taken. The generator is the family's to seed (Stable Audio 3 draws its crops from it
too); its state and `state_dict()` together resume the order exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

WRAP, DROP, SHORT = "wrap", "drop", "short"


@dataclass(frozen=True)
class OrderPolicy:
    end: str = WRAP  # what a step that reaches the end of a pass does (module docstring)
    oversample: int = 0  # > 0: fewer items than a step: passes of this many steps of draws
    first_epoch: int = 1


class Order:
    """Item indices, `take` a step, from passes over `count` items (module docstring)."""

    def __init__(self, count: int, take: int, seed: int, policy: OrderPolicy) -> None:
        if policy.end not in (WRAP, DROP, SHORT):
            raise ValueError(f"order policy end {policy.end!r}: expected wrap, drop or short")
        self.count, self.take, self.policy = count, take, policy
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch, self.position, self.order = policy.first_epoch - 1, 0, []

    def next(self) -> list[int]:
        """The next step's item indices."""
        if self.policy.end == WRAP:
            picks = []
            while len(picks) < self.take:
                if self.position >= len(self.order):
                    self._new_pass()
                picks.append(self.order[self.position])
                self.position += 1
            return picks
        if self.policy.end == DROP:
            if self.position + self.take > len(self.order):
                self._new_pass()
        elif self.position >= len(self.order):
            self._new_pass()
        picks = self.order[self.position : self.position + self.take]
        self.position += len(picks)
        return picks

    @property
    def ends_pass(self) -> bool:
        """Whether the last step took the last items of its pass."""
        return self.position >= len(self.order)

    def steps_per_epoch(self) -> int:
        """Steps of one pass under `SHORT` (the last one takes what is left)."""
        return math.ceil(self.count / self.take)

    def _new_pass(self) -> None:
        if self.policy.oversample and self.count < self.take:
            draws = self.take * self.policy.oversample
            self.order = torch.randint(self.count, (draws,), generator=self.generator).tolist()
        else:
            self.order = torch.randperm(self.count, generator=self.generator).tolist()
        self.epoch, self.position = self.epoch + 1, 0

    def state(self, key: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The order's part of a trainer's state: the generator as the tensor `rng.<key>`, and
        `state_dict()` as `<key>` beside the `epoch` the loop resumes its count from."""
        document = {key: self.state_dict(), "epoch": self.epoch}
        return {f"rng.{key}": self.generator.get_state()}, document

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict, key: str) -> None:
        """Continue from `state(key)`'s tensors and document, saved by an earlier process."""
        self.load_state_dict(document[key], tensors[f"rng.{key}"])

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "order": self.order}

    def load_state_dict(self, state: dict[str, Any], generator_state: torch.Tensor) -> None:
        self.epoch, self.position, self.order = state["epoch"], state["position"], state["order"]
        self.generator.set_state(generator_state)

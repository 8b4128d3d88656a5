"""Training items from pre-encoded latents: crops, padding, the draw order.

underfit's pre-encoded dataset (docs/conventions/stable-audio-3.md, "Pre-encoded data"):
every item is cropped or padded to `latent_crop_length`; the crop starts at a random frame
of the valid region; a short item is padded with zeros (the padding mask says which frames
are audio); `seconds_total` stays the full duration. A dataset with fewer items than the
batch is drawn with replacement, batch × 100 draws an epoch (~100 steps); otherwise each
epoch is a shuffled pass whose last partial batch is dropped (`ORDER`, a policy of
`tunesmith.train.order`). The order and the crops draw from one generator whose state is part
of a resumable run. Which items are held out for validation: `tunesmith.train.holdout`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tunesmith.train.order import DROP, OrderPolicy

ORDER = OrderPolicy(end=DROP, oversample=100, first_epoch=0)  # underfit's loader


@dataclass(frozen=True)
class Item:
    path: str  # in the dataset
    latents: torch.Tensor  # [D, T] float32, unscaled
    padding_mask: torch.Tensor  # [T] bool, True where there is audio
    seconds_total: float  # the full file's duration, whatever the crop
    pieces: tuple[str, ...]  # the item's `Key: value` prompt pieces


@dataclass
class Batch:
    latents: torch.Tensor  # [B, D, L]
    mask: torch.Tensor  # [B, L] bool
    seconds_total: torch.Tensor  # [B] float32
    pieces: list[tuple[str, ...]]
    paths: list[str]


def load_items(frame: pd.DataFrame) -> list[Item]:
    """Items of one base model's encoded table (`latents` and `sidecar` paths per row)."""
    items = []
    for row in frame.to_dict("records"):
        meta = json.loads(Path(row["sidecar"]).read_text(encoding="utf-8"))
        items.append(
            Item(
                path=row["path"],
                latents=torch.from_numpy(np.load(row["latents"], allow_pickle=False)).float(),
                padding_mask=torch.tensor(meta["padding_mask"], dtype=torch.bool),
                seconds_total=float(meta["seconds_total"]),
                pieces=tuple(json.loads(row["pieces"])),
            )
        )
    return items


def crop(item: Item, length: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`length` frames from `start`, zero-padded past the end (mask False there)."""
    latents = torch.zeros(item.latents.shape[0], length)
    mask = torch.zeros(length, dtype=torch.bool)
    piece = item.latents[:, start : start + length]
    latents[:, : piece.shape[1]] = piece
    mask[: piece.shape[1]] = item.padding_mask[start : start + length]
    return latents, mask


def collate(items: list[Item], crops: list[tuple[torch.Tensor, torch.Tensor]]) -> Batch:
    return Batch(
        latents=torch.stack([c[0] for c in crops]),
        mask=torch.stack([c[1] for c in crops]),
        seconds_total=torch.tensor([i.seconds_total for i in items], dtype=torch.float32),
        pieces=[i.pieces for i in items],
        paths=[i.path for i in items],
    )


def draw_batch(
    items: list[Item], indices: list[int], crop_length: int, generator: torch.Generator
) -> Batch:
    """The items at `indices`, each cropped at a random frame of its valid region, the starts
    drawn from `generator` (the order's) in the batch's order."""
    chosen = [items[i] for i in indices]
    crops = []
    for item in chosen:
        valid = int(item.padding_mask.sum())
        room = max(0, valid - crop_length)
        start = int(torch.randint(room + 1, (1,), generator=generator)) if room else 0
        crops.append(crop(item, crop_length, start))
    return collate(chosen, crops)

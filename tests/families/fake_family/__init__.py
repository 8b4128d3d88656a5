"""A minimal model family, to show that adding one is this folder and nothing else.

`volume` trains one number, the level a dataset's clips are loud at, from an identity
"encoder" (each clip's RMS level) and renders a tone at the learned level. It declares what
every family declares (tunesmith/family.py) and is loaded through the
`TUNESMITH_FAMILIES` environment variable, as a plugin would be.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch

from tunesmith.encoding import ItemEncoder, encode
from tunesmith.family import ConfigSections, Family
from tunesmith.media.audio import decode
from tunesmith.store import canonical_json, content_key
from tunesmith.store.tensors import write_safetensors
from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig
from tunesmith.train.trainer import StepReport

RATE = 8000


@dataclass(frozen=True)
class VolumeDemo(DemoConfig):
    duration: float = 1.0


class Volume(Family):
    name, title, media, default_base_model = "volume", "Volume", "audio", "volume-model"
    item_keys, files_check = ("path", "entry"), "volume_files"
    backends = MappingProxyType(
        {s: frozenset({"torch"}) for s in ("encoded", "adapters", "renders")}
    )
    config = ConfigSections(AdapterConfig, TrainConfig, VolumeDemo)

    def check_base_model(self, folder: Path) -> None:
        if not (Path(folder) / "volume.json").is_file():
            raise ValueError(f"{folder}: no volume.json; expected a volume model folder")

    def encode(self, request):
        return encode(request, Levels)

    def trainer(self, backend: str) -> type:
        return VolumeTrainer

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        return Tone(adapter)

    def validate_files(self, path) -> dict[str, str]:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            if list(f.keys()) != ["level"] or "tunesmith.run_key" not in f.metadata():
                raise ValueError(f"{path}: expected one tensor `level` and the lineage")
            return f.metadata()


class Levels(ItemEncoder):
    """The item encoder: each clip's RMS level, one clip at a time, with no model."""

    family, media, columns, max_items = "volume", "audio", ("model", "path", "entry", "level"), 1

    def load(self, device: str) -> None:
        return None

    def key(self, item: dict, setting) -> str:
        return content_key(stage="encoded", family=self.family, content=item["sha256"])

    def decode(self, model, unit) -> np.ndarray:
        return decode(self.folder / unit.item["path"])[0]

    def encode(self, model, decoded: list) -> list:
        [samples] = decoded
        return [functools.partial(_write_level, float(np.sqrt(np.mean(samples**2))))]

    def row(self, unit, value, run, prepared, texts) -> dict:
        return {
            "model": self.base_model.name,
            "path": unit.item["path"],
            "entry": unit.key,
            "level": float(value["level"]),
        }


def _write_level(level: float, tmp: Path) -> None:
    (tmp / "value.json").write_text(canonical_json({"level": level}), encoding="utf-8")


@dataclass(frozen=True)
class Names:
    folder: Path
    run: str

    def best(self, step: int) -> Path:
        return self.folder / f"{self.run}.safetensors"

    def checkpoint(self, step: int, epoch: int) -> None:
        return None

    def last(self, step: int, epoch: int) -> Path:
        return self.folder / f"{self.run}.last.safetensors"


class VolumeTrainer:
    def __init__(self, run, base_model, items, run_dir, placement, metadata) -> None:
        self.run, self.metadata, self.device = run, metadata, "cpu"
        self.levels = torch.tensor(list(items["level"]), dtype=torch.float32)
        self.level = torch.nn.Parameter(torch.zeros(()))
        self.optimizer = torch.optim.Adam([self.level], lr=run.train.lr)
        self.names, self.identity = Names(run_dir, run.name), {"targets": ["level"]}
        self.validation_note, self.epoch = "validation on every clip", 0

    def step(self) -> StepReport:
        loss = ((self.level - self.levels) ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return StepReport(loss.item(), 0.0, 0)

    def validation_loss(self) -> float:
        return ((self.level.detach() - self.levels) ** 2).mean().item()

    def render_samples(self, folder: Path, step: int) -> None:
        pass

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        return write_safetensors(path, {"level": self.level.detach()}, self.metadata)

    def adapter_files(self, path: Path) -> list[Path]:
        return [path]

    def remove_adapter(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def state(self):
        return {"level": self.level.detach().clone()}, {"epoch": 0}

    def load_state(self, tensors, document) -> None:
        with torch.no_grad():
            self.level.copy_(tensors["level"])


class Tone:
    sample_rate = RATE

    def __init__(self, adapter: Path) -> None:
        from safetensors.torch import load_file

        self.level = float(load_file(adapter)["level"]) if adapter else 0.0

    def render(self, demo, strength: float) -> np.ndarray:
        t = np.arange(int(demo.duration * RATE)) / RATE
        tone = (0.1 + self.level * strength) * np.sin(2 * np.pi * 440 * t)
        return np.stack([tone, tone]).astype(np.float32)


FAMILY = Volume()

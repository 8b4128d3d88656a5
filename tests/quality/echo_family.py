"""A family whose validation loss and renders disagree on the best step, by construction.

`echo` is the `volume` family of `tests/families/fake_family/` (one trained number, the
level of the dataset's clips; its loss falls at every step of a short run) whose trainer
also draws its demos at every validation, as every real family does: its model folder's
`echo.wav` at the step `echo.json` names (`clear_at`), the same noise at every other step.
A test puts the dataset's held-out clip there as `echo.wav`, so the renders sound like the
held-out item at that step alone, while the lowest validation loss is the last step's. It is
loaded through `TUNESMITH_FAMILIES`, as a plugin is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import soundfile as sf

from tests.families.fake_family import Levels, Volume, VolumeTrainer
from tunesmith.encoding import encode


class Echo(Volume):
    name, title, default_base_model = "echo", "Echo", "echo-model"
    files_check = "echo_files"

    def check_base_model(self, folder: Path) -> None:
        missing = [n for n in ("echo.json", "echo.wav") if not (Path(folder) / n).is_file()]
        if missing:
            raise ValueError(f"{folder}: no {', '.join(missing)}; expected an echo model folder")

    def encode(self, request):
        return encode(request, EchoLevels)

    def trainer(self, backend: str) -> type:
        return EchoTrainer


class EchoLevels(Levels):
    family = "echo"


class EchoTrainer(VolumeTrainer):
    def __init__(self, run, base_model, items, run_dir, placement, metadata) -> None:
        super().__init__(run, base_model, items, run_dir, placement, metadata)
        self.echo = Path(base_model) / "echo.wav"
        self.clear_at = json.loads((Path(base_model) / "echo.json").read_text())["clear_at"]

    def render_samples(self, folder: Path, step: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for index, demo in enumerate(self.run.demos):
            path = folder / f"{index}-{step}.wav"
            if step == self.clear_at:
                shutil.copyfile(self.echo, path)
                continue
            info = sf.info(self.echo)
            noise = np.random.default_rng(demo.seed).standard_normal((info.frames, 2)) * 0.1
            sf.write(path, noise.astype(np.float32), info.samplerate, subtype="FLOAT")


FAMILY = Echo()

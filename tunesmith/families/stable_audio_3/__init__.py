"""The `stable-audio-3` family: Stable Audio 3 as diffusers ships it, trained as underfit does.

model.py        the base model folder: check, load; encode audio and prompts
encoded.py      stage `encoded`: underfit's pre-encoded layout (<stem>.npy + <stem>.json)
data.py         training items: crops, padding, underfit's draw order
prompts.py      underfit's prompt templates and trigger
timesteps.py    the five timestep samplers and the model's shift
draws.py        what one step draws (shared by the torch and MLX trainers)
validation.py   the validation loss at fixed levels and noise
trainer.py      the objective and the torch trainer; underfit's file names
files.py        the adapter as underfit's file (tunesmith/formats/underfit.py), by names.py
names.py        underfit's layer names against diffusers', and the fused QKV rows
sample.py       renders and training samples through the diffusers pipeline
tiny.py         a tiny Stable Audio 3 from the real classes
full_size.py    the published models' component configs; the real classes built from them
memory.py       a run's peak memory, its training step traced on the meta device
mlx/            the DiT in MLX, its weight conversion, and the MLX trainer

The conventions and their sources: docs/conventions/stable-audio-3.md.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from tunesmith.families.stable_audio_3 import config as settings
from tunesmith.families.stable_audio_3.prompts import prompt_problems
from tunesmith.family import ConfigSections, Family


class StableAudio3(Family):
    name, title, media = "stable-audio-3", "Stable Audio 3", "audio"
    default_base_model = "stable-audio-3"
    default_for_media = True
    data_parallel = True  # torch: DistributedDataParallel; MLX: ranks under mlx.launch
    item_keys = ("path", "entry", "pieces")  # its latents and its prompt pieces
    config = ConfigSections(
        settings.Sa3Adapter,
        settings.Sa3Train,
        settings.Sa3Demo,
        check=prompt_problems,
        later=settings.LATER,
    )
    files_check = "underfit_contract"
    backends = MappingProxyType(
        {
            "encoded": frozenset({"torch"}),
            "adapters": frozenset({"torch", "mlx"}),
            "renders": frozenset({"torch"}),
        }
    )

    def warnings(self, run) -> list[str]:
        return settings.warmup_warnings(run.train)

    def check_base_model(self, folder: Path) -> None:
        from tunesmith.families.stable_audio_3.base_model import check_base_model

        check_base_model(folder)

    def encode(self, request):
        from tunesmith.encoding import encode
        from tunesmith.families.stable_audio_3.encoded import Clips

        return encode(request, Clips)

    def trainer(self, backend: str) -> type:
        if backend == "mlx":
            from tunesmith.families.stable_audio_3.mlx.trainer import MlxTrainer

            return MlxTrainer
        from tunesmith.families.stable_audio_3.trainer import TorchTrainer

        return TorchTrainer

    def memory(self, run, base_model: Path, dtype, items=None):
        from tunesmith.families.stable_audio_3.memory import memory_model  # shapes: settings

        return memory_model(run, base_model, dtype)

    def trained_settings(self, run) -> dict:
        from tunesmith.families.stable_audio_3.config import include_and_exclude

        settings = super().trained_settings(run)
        adapter = settings["adapter"]
        adapter["alpha"] = run.adapter.scale_alpha  # None: alpha = rank (underfit's lora.py)
        include, exclude = include_and_exclude(run.adapter)
        adapter["include"], adapter["exclude"] = list(include), list(exclude)
        return settings

    def files_for_tools(self, run, best: Path) -> list[tuple[str, Path]]:
        return [("underfit (its dashboard, a seed), stable-audio-3's LoRA loader", best)]

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        from tunesmith.families.stable_audio_3.sample import Renderer

        return Renderer(base_model, placement, adapter, arc_model=run.train.arc_model)

    def validate_files(self, path) -> dict[str, str]:
        from tunesmith.families.stable_audio_3.files import validate_files

        return validate_files(path)


FAMILY = StableAudio3()

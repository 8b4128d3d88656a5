"""The `sdxl` family: Stable Diffusion XL as diffusers ships it, trained as kohya and diffusers do.

model.py        the base model folder: check, load; encode pictures (VAE posterior) and captions
encoded.py      stage `encoded`: per picture its posterior, per distinct caption both text
                encoders' outputs, cached in the store; with kohya's data options
                (data_options.py) each picture at its bucket (buckets.py), flipped, with its
                mask (masks.py), and its caption's variants (captions.py)
objective.py    the objective: the UNet (and text encoders) with adapters, its loss, the
                validation loss
adapters.py     the adapter types (lora, dora, locon, lokr, loha): their layers, names, files
options.py      kohya's loss, noise, schedule, optimizer and EMA options, as kohya computes them
trainer.py      one run as a trainer of the one loop: passes, holdout, files, state
files.py        the PEFT and kohya files, and their check
memory.py       what a run holds at its peak, estimated on the meta device before it trains
kohya_names.py  kohya's (Stability's) UNet module names for the kohya file
sample.py       renders and training samples: the pipeline with an adapter
tiny.py         a tiny SDXL from the real classes
full_size.py    the published configs, the real classes built from them, a random-weight folder

The conventions and their sources: docs/conventions/sdxl.md.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from tunesmith.families.sdxl import config as settings
from tunesmith.families.sdxl.adapter_spec import PEFT_FILE_TYPES
from tunesmith.family import ConfigSections, Family


class Sdxl(Family):
    name, title, media = "sdxl", "SDXL", "image"
    default_base_model = "sdxl"
    default_for_media = True
    data_parallel = True  # DistributedDataParallel over the adapter (trainer.py)
    item_keys = ("path", "entry", "caption_entry")  # its posterior and its caption's encoding
    config = ConfigSections(
        settings.SdxlAdapter,
        settings.SdxlTrain,
        settings.SdxlDemo,
        check=settings.problems,
        later=settings.LATER,
    )
    files_check = "sdxl_files"
    backends = MappingProxyType(
        {
            "encoded": frozenset({"torch"}),
            "adapters": frozenset({"torch"}),
            "renders": frozenset({"torch"}),
        }
    )

    def check_base_model(self, folder: Path) -> None:
        from tunesmith.families.sdxl.base_model import check_base_model

        check_base_model(folder)

    def encode(self, request):
        from tunesmith.families.sdxl.encoded import encode  # Pictures, or Shaped with options

        return encode(request)

    def trainer(self, backend: str) -> type:
        from tunesmith.families.sdxl.trainer import SdxlTrainer

        return SdxlTrainer

    def files_for_tools(self, run, best: Path) -> list[tuple[str, Path]]:
        if run.adapter.type in PEFT_FILE_TYPES:
            return [
                ("diffusers (StableDiffusionXLPipeline.load_lora_weights), PEFT", best),
                ("ComfyUI, A1111/Forge, kohya's scripts", best.with_suffix(".kohya.safetensors")),
            ]
        return [("ComfyUI, A1111/Forge, kohya's scripts with LyCORIS, LyCORIS", best)]

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        if run.adapter.type == "dora":  # strength 0: the adapter off (PEFT keeps m/‖W‖)
            from tunesmith.families.sdxl.adapters import DoraRenderer as Renderer
        elif run.adapter.type in PEFT_FILE_TYPES:
            from tunesmith.families.sdxl.sample import Renderer
        else:  # lokr, loha: the kohya-layout file through LyCORIS's loader
            from tunesmith.families.sdxl.adapters import LycorisRenderer as Renderer

        return Renderer(base_model, placement, run.train.size, adapter)

    def memory(self, run, base_model: Path, dtype, items=None):
        from tunesmith.families.sdxl.memory import memory  # its shapes are the run's settings

        return memory(run, base_model, dtype)

    def picture_size(self, run) -> int:
        return run.train.size  # renders at the size it trains at

    def validate_files(self, path) -> dict[str, str]:
        from tunesmith.families.sdxl.files import validate_files

        return validate_files(path)


FAMILY = Sdxl()

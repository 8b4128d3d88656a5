"""The `ace-step` family: ACE-Step 1.5 as diffusers ships it, trained as HOT-Step and Side-Step do.

model.py     the base model folder: parts, check (audio codes optional), load; audio -> 48 kHz
             stereo -> Oobleck latents (25 Hz) -> FSQ codes (5 Hz); texts -> hidden states;
             what the DiT reads; one item's files (safetensors + JSON sidecar)
tiny.py      a tiny ACE-Step 1.5 with the real classes, in the published layout
text.py      the text encoder's inputs as ACE-Step 1.5 formats them; the trigger rules
config.py    a run's settings: HOT-Step's DiT defaults per adapter type, and their checks
captions.py  which caption and lyrics strings each item trains on in a run
encoded.py   stage `encoded`: per file latents + codes, per distinct text its encoding
objective.py the DiT loss: flow matching in ACE-Step's convention, its timesteps, CFG dropout,
             the loss weightings, normalised per crop and per optimizer window
data.py      training items, crops, the epoch order, the fixed validation draws
trainer.py   one run as a trainer of the one loop: adapters, optimizer, schedule, state
files.py     the PEFT folders (own names, diffusers' twin; LoKr's LyCORIS file); their check
sample.py    renders and training samples through AceStepPipeline
full_size.py the release's config.json of every component; the real classes built from them
memory.py    a run's peak memory, estimated on the meta device before it trains

The planner LM is the `ace-step-planner` family (`tunesmith/families/ace_step_planner/`); its
runs train on this family's encoded rows. The conventions and their sources:
docs/conventions/ace-step.md.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from tunesmith.families.ace_step import config as settings
from tunesmith.family import ConfigSections, Family


class AceStep(Family):
    name, title, media = "ace-step", "ACE-Step 1.5", "audio"
    default_base_model = "ace-step-1.5"
    # A run's texts are its own (trigger, genre ratio), so its rows name it; the entries are
    # content keys: a caption edit changes `caption_entry`, new audio changes `entry`.
    item_keys = ("run", "path", "entry", "caption_entry", "lyrics_entry")
    data_parallel = True  # the crops of a window shared over the ranks (trainer.py)
    shared_batch = "accumulation"
    config = ConfigSections(
        settings.AceStepAdapter,
        settings.AceStepTrain,
        settings.AceStepDemo,
        default_demos=({"prompt": "", "seed": 42}, {"prompt": "{trigger}", "seed": 43}),
        check=settings.problems,
        fill=settings.fill,
    )
    files_check = "ace_step_files"
    # torch on CUDA, MPS or the CPU.
    backends = MappingProxyType(
        {
            "encoded": frozenset({"torch"}),
            "adapters": frozenset({"torch"}),
            "renders": frozenset({"torch"}),
        }
    )

    def check_base_model(self, folder: Path) -> None:
        from tunesmith.families.ace_step.base_model import check_base_model

        check_base_model(folder)

    def encode(self, request):
        from tunesmith.encoding import encode
        from tunesmith.families.ace_step.encoded import Songs

        return encode(request, Songs)

    def trainer(self, backend: str):
        from tunesmith.families.ace_step.trainer import AceStepTrainer

        return AceStepTrainer

    def memory(self, run, base_model: Path, dtype, items=None):
        from tunesmith.families.ace_step.memory import memory  # a crop's shapes: the settings

        return memory(run, base_model, dtype)

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        from tunesmith.families.ace_step.sample import Renderer

        return Renderer(base_model, placement, adapter)

    def files_for_tools(self, run, best: Path) -> list[tuple[str, Path]]:
        folder = best.parent  # <run>/adapter_model.safetensors, its diffusers twin beside it
        twin = folder.with_name(folder.name + ".diffusers")
        lokr = folder / "lokr_weights.safetensors"
        own = "PEFT on ACE-Step's own decoder (PeftModel.from_pretrained), Side-Step"
        on_diffusers = "PEFT on diffusers' DiT (PeftModel.from_pretrained(pipe.transformer, …))"
        if lokr.exists():  # diffusers refuses LoKr ("all LoRA param names must contain 'lora'")
            return [
                ("LyCORIS (create_lycoris_from_weights), ComfyUI", lokr),
                (own, folder),
                (on_diffusers, twin),
            ]
        return [
            ("diffusers (AceStepPipeline.load_lora_weights)", folder),
            ("ComfyUI (a file in models/loras)", best),
            (own, folder),
            (on_diffusers, twin),
        ]

    def validate_files(self, path) -> dict[str, str]:
        from tunesmith.families.ace_step.files import validate_files

        return validate_files(path)


FAMILY = AceStep()

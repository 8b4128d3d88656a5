"""The `ace-step` family: ACE-Step 1.5 as diffusers ships it, trained as HOT-Step and Side-Step do.

model.py     the checkpoint folder: parts, check (audio codes optional), load
tiny.py      a tiny ACE-Step 1.5 with the real classes, in the published layout
text.py      the text encoder's inputs as ACE-Step 1.5 formats them; the trigger rules
encode.py    audio -> 48 kHz stereo -> Oobleck latents (25 Hz) -> FSQ codes (5 Hz); texts ->
             hidden states; what the DiT reads; one item's files (safetensors + JSON sidecar)
config.py    a run's settings: HOT-Step's DiT defaults per adapter type, and their checks
captions.py  which caption and lyrics strings each item trains on in a run
encoded.py   stage `encoded`: per file latents + codes, per distinct text its encoding
objective.py the DiT loss: flow matching in ACE-Step's convention, its timesteps, CFG dropout,
             the loss weightings, normalised per crop and per optimizer window
data.py      training items, crops, the epoch order, the fixed validation draws
trainer.py   one run as a trainer of the one loop: adapters, optimizer, schedule, state
files.py     the PEFT folder (and LoKr's LyCORIS twin) every tool loads; its check
sample.py    renders and training samples through AceStepPipeline
planner/     the planner LM's pieces

The conventions and their sources: docs/conventions/ace-step.md.
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
    # torch on CUDA, MPS or the CPU; a planner run also trains on MLX (backends_for_run).
    backends = MappingProxyType(
        {
            "encoded": frozenset({"torch"}),
            "adapters": frozenset({"torch"}),
            "renders": frozenset({"torch"}),
        }  # fmt: skip
    )

    def check_base_model(self, folder: Path) -> None:
        from tunesmith.families.ace_step.checkpoint import check_checkpoint

        check_checkpoint(folder)

    def encode(self, request):
        from tunesmith.families.ace_step.encoded import build_encoded

        return build_encoded(request)

    def backends_for_run(self, stage: str, run) -> frozenset[str]:
        """A planner run trains on torch or MLX (mlx-lm); the DiT on torch only."""
        if stage == "adapters" and run.adapter.target == "planner":
            return frozenset({"torch", "mlx"})
        return self.backends_for(stage)

    def trainer(self, backend: str):
        return _make_trainer  # the DiT's or the planner's, by the run's adapter.target

    def trains_on_ranks(self, run, backend: str) -> bool:
        """The DiT's trainer shares a step over ranks, and so does the planner's on MLX; the
        planner's torch trainer trains on one process."""
        return not (run.adapter.target == "planner" and backend == "torch")

    def plan_inputs(self, run, checkpoint: Path, items, fingerprint_cache=None) -> dict:
        """A planner run's planner folder fingerprint (it keys the run); ValueError when the
        folder is missing or not a planner, or no item has audio codes (the run is skipped,
        said once)."""
        if run.adapter.target != "planner":
            return {}
        from tunesmith.families.ace_step_planner.inputs import (
            checked_planner,
            no_codes_message,
            resolve_planner,
            rows_with_codes,
        )

        folder = resolve_planner(run, checkpoint)
        fingerprint = checked_planner(folder, fingerprint_cache)
        rows = items.to_dict("records")
        usable, _ = rows_with_codes(rows)
        if not usable:
            raise ValueError(no_codes_message(run.name, len(rows), len(rows)))
        return {"planner": fingerprint}

    def render_inputs(self, run, base_model: Path, fingerprint_cache=None) -> dict:
        """A planner run's base side is the planner's plan: its fingerprint keys the render."""
        if run.adapter.target != "planner":
            return {}
        from tunesmith.families.ace_step_planner.inputs import resolve_planner
        from tunesmith.store.fingerprints import model_fingerprint

        return {"planner": model_fingerprint(resolve_planner(run, base_model), fingerprint_cache)}

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        if run.adapter.target == "planner":
            from tunesmith.families.ace_step_planner.render import PlannerRenderer

            return PlannerRenderer(run, base_model, placement, adapter)
        from tunesmith.families.ace_step.sample import Renderer

        return Renderer(base_model, placement, adapter)

    def validate_files(self, path) -> dict[str, str]:
        from tunesmith.families.ace_step.files import validate_files

        return validate_files(path)


def _make_trainer(run, base_model, items, run_dir, placement, metadata):
    if run.adapter.target == "planner" and placement.backend == "mlx":
        from tunesmith.families.ace_step_planner.mlx_trainer import MlxPlannerTrainer

        return MlxPlannerTrainer(run, base_model, items, run_dir, placement, metadata)
    if run.adapter.target == "planner":
        from tunesmith.families.ace_step_planner.trainer import PlannerTrainer

        return PlannerTrainer(run, base_model, items, run_dir, placement, metadata)
    from tunesmith.families.ace_step.trainer import AceStepTrainer

    return AceStepTrainer(run, base_model, items, run_dir, placement, metadata)


FAMILY = AceStep()

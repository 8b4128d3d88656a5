"""The `ace-step-planner` family: ACE-Step 1.5's planner LM ("5 Hz LM"), adapters trained on a
dataset's audio codes as HOT-Step and Side-Step train it.

A run names the ACE-Step base model as its `base_model` (its audio codes, its detokenizer and
VAE for the auditions) and the planner folder as `adapter.planner`; its items are the
`ace-step` family's encoded rows (`encoded_by`).

config.py          a run's settings: HOT-Step's LM defaults, their checks, the older form
inputs.py          the planner folder of a run, checked without a model library
tiny.py            a tiny planner (Qwen3ForCausalLM + a tokenizer with the code tokens)
model.py           a planner folder: checks, loading, its code vocabulary, codes that fit
data.py            an item's labels and codes as a prompt and a masked answer
torch_lm.py        the LoRA objective on PyTorch (PEFT)
mlx_lm_backend.py  the same objective on MLX (mlx-lm's Qwen3, LoRA layers and loss)
adapter_files.py   the two adapter folders (PEFT, mlx-lm), their trigger and lineage metadata
audition.py        plans with and without an adapter, decoded without the DiT or through it
trainer.py         a planner run as a trainer of the one loop on PyTorch (PEFT); its files
mlx_trainer.py     the same run on MLX (mlx-lm), chosen by placement
render.py          the renders stage's pure-LM audition pairs, with each plan's details
full_size.py       the three releases' config.json, the planner built from them, a folder of it
memory.py          a run's training step on `meta`, for the estimate of its peak memory

The conventions and their sources: docs/conventions/ace-step-planner.md.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from tunesmith.families.ace_step import FAMILY as ACE_STEP
from tunesmith.families.ace_step.config import AceStepDemo
from tunesmith.families.ace_step_planner import config as settings
from tunesmith.family import ConfigSections, Family


class AceStepPlanner(Family):
    name, title, media = settings.NAME, "ACE-Step 1.5 planner", "audio"
    default_base_model = ACE_STEP.default_base_model
    item_keys = ACE_STEP.item_keys  # the ACE-Step rows it trains on
    encoded_by = ACE_STEP.name
    # On MLX the ranks share a window's items (mlx_trainer.py); the torch trainer takes one.
    data_parallel, one_process = True, frozenset({"torch"})
    shared_batch = "accumulation"
    config = ConfigSections(
        settings.PlannerAdapter,
        settings.PlannerTrain,
        AceStepDemo,  # its plans are heard through the base model, as the DiT's demos are
        check=settings.problems,
        fill=settings.fill,
        moved=settings.moved,
    )
    files_check = "ace_step_planner_files"
    prompts_heading = "Planner plans: the 5 Hz LM alone (codes → detokenizer → VAE, no DiT)"
    # torch on CUDA, MPS or the CPU (PEFT); MLX through mlx-lm.
    backends = MappingProxyType(
        {"adapters": frozenset({"torch", "mlx"}), "renders": frozenset({"torch"})}
    )

    def check_base_model(self, folder: Path) -> None:
        ACE_STEP.check_base_model(folder)

    def trainer(self, backend: str):
        if backend == "mlx":
            from tunesmith.families.ace_step_planner.mlx_trainer import MlxPlannerTrainer

            return MlxPlannerTrainer
        from tunesmith.families.ace_step_planner.trainer import PlannerTrainer

        return PlannerTrainer

    def other_models(self, run, base_model: Path, fingerprint_cache=None, items=None) -> dict:
        """The planner folder's fingerprint; ValueError when the folder is missing or not a
        planner, or (given the items) no item has audio codes: the run is skipped, said once."""
        from tunesmith.families.ace_step_planner.inputs import (
            checked_planner,
            no_codes_message,
            resolve_planner,
            rows_with_codes,
        )

        fingerprint = checked_planner(resolve_planner(run, base_model), fingerprint_cache)
        if items is not None:
            rows = items.to_dict("records")
            if not rows_with_codes(rows)[0]:
                raise ValueError(no_codes_message(run.name, len(rows), len(rows)))
        return {"planner": fingerprint}

    def memory(self, run, base_model: Path, dtype, items=None):
        """The planner on `meta` with the run's LoRA, and its step at the length of the run's
        longest song: of `items` (its encoded rows) when given, else of the longest song
        ACE-Step 1.5 makes (memory.py); no knobs."""
        from tunesmith.families.ace_step_planner.memory import memory

        return memory(run, base_model, dtype, items)

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        from tunesmith.families.ace_step_planner.render import PlannerRenderer

        return PlannerRenderer(run, base_model, placement, adapter)

    def files_for_tools(self, run, best: Path) -> list[tuple[str, Path]]:
        folder = best.parent  # <run>/adapter_model.safetensors, its mlx-lm twin beside it
        return [
            ("transformers + PEFT (PeftModel.from_pretrained on the planner)", folder),
            (
                "mlx-lm (mlx_lm.load(planner, adapter_path=…))",
                folder.with_name(folder.name + ".mlx-lm"),
            ),
        ]

    def validate_files(self, path) -> dict[str, str]:
        """ACE-Step's check of a PEFT folder, which reads a causal-LM LoRA as a planner's
        (`adapter_files.validate_folder`, its mlx-lm twin and the lineage included)."""
        return ACE_STEP.validate_files(path)


FAMILY = AceStepPlanner()

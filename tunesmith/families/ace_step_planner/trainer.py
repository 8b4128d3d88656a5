"""Training one planner run: a PEFT LoRA on the planner LM, as a trainer of the one loop.

A planner run (`family = "ace-step-planner"`) trains on the audio codes the `encoded`
stage wrote beside each item's latents: per item, ACE-Step's planner prompt (caption and
lyrics) and the answer it should write (`<think>` metas, one code token per 0.2 s,
`<|im_end|>`), the prompt masked (`data.py`); in the epochs `train.caption_dropout` draws for
it, the same with the trigger alone as its caption (`window_examples`). Items without codes
(a base model without its audio tokenizer) or with codes outside the planner's codebook are
left out, each named once in the run's start line.

Per step (one optimizer update): the next window of the epoch order (`accumulation` items,
in the DiT trainer's order, `data.ORDER`), forward and backward one item at a time with its
token-mean cross-entropy weighted by its share of the window's answer tokens (so the
gradients add up to the window's token mean, what one batch of them would give), the global
gradient norm clipped at `grad_clip`, the optimizer (Muon beside AdamW, or AdamW; a run whose
LoRA rank is below `muon_min_dim` has no Muon parameter and trains on AdamW, which the start
line says), then the warmup-cosine schedule. At the end of an epoch its mean loss joins the
5-epoch moving average the target loss (HOT-Step's 4.0) is tested on.

With `train.gradient_checkpointing = true` every decoder layer is recomputed in the backward
instead of keeping its activations (`torch_lm.py`; on MLX `mlx_lm_backend.py`).

Validation: the token cross-entropy of the held-out items' answers, always the same items
and tokens (no random draw). Random sources, each seeded from the run's seed and saved with
the state: the order generator and the LoRA's initial A factors. Nothing else draws.

Files: the best adapter is `<run>/` (PEFT, bf16: `adapter_model.safetensors` +
`adapter_config.json`) with its mlx-lm twin `<run>.mlx-lm/` beside it; the last step's, where
it is not the best, `<run>.last/` and `<run>.last.mlx-lm/` (`adapter_files.py`). Both carry
the trigger and the lineage in their safetensors metadata.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from tunesmith.families.ace_step import data as dit_data
from tunesmith.families.ace_step.trainer import epoch_end, schedule_lr
from tunesmith.families.ace_step_planner import adapter_files
from tunesmith.families.ace_step_planner.data import build_example, caption_dropped
from tunesmith.families.ace_step_planner.inputs import (
    no_codes_message,
    resolve_planner,
    rows_with_codes,
)
from tunesmith.families.ace_step_planner.model import check_codes, load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora
from tunesmith.train.config import ConfigError
from tunesmith.train.holdout import split_holdout
from tunesmith.train.optimizers import OptimizerError, OptimizerSettings, build_optimizer
from tunesmith.train.order import Order
from tunesmith.train.schedules import horizon_steps, lr_scheduler, warmup_cosine
from tunesmith.train.state import load_trainer_state, trainer_state
from tunesmith.train.trainer import PeftNames, StepReport

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
MLX_SUFFIX = ".mlx-lm"


def mlx_folder(path: Path) -> Path:
    """The mlx-lm twin of the PEFT folder holding `path`."""
    peft = Path(path).parent
    return peft.parent / f"{peft.name}{MLX_SUFFIX}"


class PlannerTrainer:
    """One planner run on PyTorch through PEFT (module docstring)."""

    def __init__(self, run, base_model: Path, encoded, run_dir: Path, placement, metadata) -> None:
        cfg = run.train
        self.run, self.metadata, self.device = run, dict(metadata), placement.device
        # Anything but `true` is off here: the fit resolves "auto" before a trainer is built.
        self.checkpointing = cfg.gradient_checkpointing is True
        self.planner_folder = resolve_planner(run, base_model)
        try:
            self._load(placement)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        examples, notes = self._examples(encoded)
        split = split_holdout(examples, cfg.holdout, path=lambda e: e.item, what="song")
        self.train_items, self.validation = split.train, split.validation
        self.validation_note = (
            f"answer-token cross-entropy, {split.note('song')}, "
            f"{sum(e.answer_tokens for e in split.validation)} tokens"
        )
        self._attach(run.adapter, cfg.seed)
        self.optimizer, summary = self._optimizer(cfg)
        seed = cfg.seed + dit_data.ORDER_SEED
        self.order = Order(len(self.train_items), cfg.accumulation, seed, dit_data.ORDER)
        self.horizon = horizon_steps(cfg.epochs, len(self.train_items), cfg.accumulation)
        self.schedule = warmup_cosine(max(2, self.horizon), cfg.warmup, cfg.lr_floor)
        self.scheduler = self._scheduler(0)
        self.steps = cfg.steps or self.horizon
        self.updates, self.epoch_losses, self.epoch_sum = 0, [], [0.0, 0]
        self.names = PeftNames(run_dir, run.name, adapter_files.PEFT_WEIGHTS)
        self.start_note = "; ".join(
            [
                f"planner {self.planner_folder.name} ({self.backend})",
                *(["gradient checkpointing on"] if self.checkpointing else []),
                summary,
                f"{len(self.train_items)} training songs, {self.order.steps_per_epoch()} steps an "
                f"epoch, horizon {cfg.epochs} epochs = {self.horizon} steps, training {self.steps}",
                *notes,
            ]
        )
        self.identity = {
            "base_model": metadata.get("tunesmith.base_model_fingerprint", str(base_model)),
            "adapter_type": "planner-lora",
            "rank": run.adapter.rank,
            "alpha": run.adapter.scale_alpha,
            "targets": sorted(self.lora.factors().factors),
        }

    # --- setup ---------------------------------------------------------------------------------

    backend = "torch"

    def _load(self, placement) -> None:
        """The planner on the placement's device; its tokenizer, vocabulary and context."""
        self.planner = load_planner(self.planner_folder, DTYPES[placement.dtype], placement.device)
        self.tokenizer, self.vocab = self.planner.tokenizer, self.planner.vocab
        self.context = self.planner.context

    def _attach(self, adapter, seed: int) -> None:
        self.lora = TorchPlannerLora(
            self.planner, adapter.rank, adapter.scale_alpha, seed, self.checkpointing
        )
        self.named = list(self.lora.parameters().items())
        self.params = [p for _, p in self.named]

    def _examples(self, encoded) -> tuple[list, list[str]]:
        """The run's items as planner examples, and what was left out, in words."""
        rows = encoded.sort_values("path").to_dict("records")
        self.trigger = (
            (str(rows[0].get("trigger") or ""), str(rows[0].get("tag_position") or "prepend"))
            if rows
            else ("", "prepend")
        )
        usable, without = rows_with_codes(rows)
        notes = [no_codes_message(self.run.name, len(without), len(rows))] if without else []
        codes = {row["path"]: load_file(row["latents"])["audio_codes"] for row in usable}
        good, problems = check_codes(codes, self.vocab)
        notes += problems
        examples, self.trigger_only = [], {}
        for row in usable:
            if row["path"] not in good:
                continue
            labels = json.loads(row["planner_labels"])
            # The caption already carries the run's trigger (captions.item_texts).
            example = build_example(
                self.tokenizer, self.vocab, row["path"], labels, codes[row["path"]], self.context
            )
            notes += list(example.warnings)
            examples.append(example)
            if self.run.train.caption_dropout:  # the item's epochs without its caption
                self.trigger_only[row["path"]] = build_example(
                    self.tokenizer,
                    self.vocab,
                    row["path"],
                    labels,
                    codes[row["path"]],
                    self.context,
                    self.trigger[0],
                    drop_caption=True,
                )
        if not examples:
            raise ConfigError(
                f"run {self.run.name}: no item has audio codes the planner can "
                f"train on ({'; '.join(notes) or 'no items'})"
            )
        return examples, notes

    def _scheduler(self, updates: int):
        return lr_scheduler(self.optimizer, self.schedule, updates)

    def _optimizer(self, cfg):
        """(optimizer, its split in words): Muon where a parameter qualifies, AdamW for the
        rest (all of them at a LoRA rank below muon_min_dim, said so)."""
        settings = OptimizerSettings(
            name=cfg.optimizer, muon_min_dim=cfg.muon_min_dim, muon_lr_scale=cfg.muon_lr_scale
        )
        try:
            optimizer, split = build_optimizer(self.named, cfg.lr, settings)
        except OptimizerError as exc:
            raise ConfigError(str(exc)) from None
        return optimizer, split.summary()

    # --- the step ------------------------------------------------------------------------------

    def window_examples(self, window: list[int], epoch: int) -> list:
        """The window's items as this epoch trains them: on the trigger alone where the seeded
        caption dropout draws them (`data.caption_dropped`), else with their captions."""
        cfg = self.run.train
        return [
            self.trigger_only[self.train_items[i].item]
            if caption_dropped(cfg.caption_dropout, cfg.seed, epoch, i)
            else self.train_items[i]
            for i in window
        ]

    def step(self) -> StepReport:
        cfg = self.run.train
        window, ends_epoch = self.order.next(), self.order.ends_pass
        epoch = self.order.epoch
        batch = self.window_examples(window, epoch)
        tokens = sum(e.answer_tokens for e in batch)
        lr = self._lr()
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for example in batch:
            loss = self.lora.loss([example])
            if not torch.isfinite(loss):
                self.optimizer.zero_grad(set_to_none=True)
                return StepReport(float(loss), 0.0, epoch)
            share = example.answer_tokens / tokens
            (loss * share).backward()
            total += share * float(loss.detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip))
        self.optimizer.step()
        self.scheduler.step()
        self.updates += 1
        fields = {"lr": lr, "grad_norm": grad_norm, "tokens": float(tokens)}
        stop = self._epoch_end(total, ends_epoch, fields)
        return StepReport(total, 0.0, epoch, fields, stop)

    def _lr(self) -> float:
        return schedule_lr(self.optimizer)

    def _epoch_end(self, loss: float, ends_epoch: bool, fields: dict) -> str:
        return epoch_end(self, loss, ends_epoch, fields)

    # --- validation, samples, files ------------------------------------------------------------

    def validation_loss(self) -> float:
        return self.lora.validation_loss(self.validation)

    def render_samples(self, folder: Path, step: int) -> None:
        """No samples during training: generating a plan per demo at every validation costs
        more than a step; the renders stage plays the best adapter's plans."""

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        info = {
            **self.metadata,
            "tunesmith.step": str(step),
            "tunesmith.epoch": str(epoch),
            "tunesmith.adapter_type": "planner-lora",
        }
        if loss is not None:
            info["validation_loss"] = f"{loss:.8g}"
        trigger, position = self.trigger
        # The mlx-lm twin first: a PEFT folder (what the loop names) means both are whole.
        labels = {"trigger": trigger, "trigger_position": position, "lineage": info}
        self.lora.save(mlx_folder(path), "mlx-lm", **labels)
        self.lora.save(Path(path).parent, "peft", **labels)
        return Path(path)

    def adapter_files(self, path: Path) -> list[Path]:
        peft = Path(path).parent
        twin = mlx_folder(path)
        return [
            peft / adapter_files.PEFT_WEIGHTS,
            peft / adapter_files.CONFIG,
            twin / adapter_files.MLX_WEIGHTS,
            twin / adapter_files.CONFIG,
        ]

    def remove_adapter(self, path: Path) -> None:
        for folder in (Path(path).parent, mlx_folder(path)):
            shutil.rmtree(folder, ignore_errors=True)

    # --- state ---------------------------------------------------------------------------------

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        counters = {
            "updates": self.updates,
            "epoch_losses": self.epoch_losses,
            "epoch_sum": self.epoch_sum,
        }
        return trainer_state(self.params, self.optimizer, self.order, "order", **counters)

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        load_trainer_state(self.params, self.optimizer, self.order, "order", tensors, document)
        self.updates = document["updates"]
        self.epoch_losses, self.epoch_sum = document["epoch_losses"], document["epoch_sum"]
        self.scheduler = self._scheduler(self.updates)

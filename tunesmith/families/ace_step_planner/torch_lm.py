"""The planner adapter's objective on PyTorch: a PEFT LoRA on every attention and MLP projection.

Defaults are HOT-Step's planner trainer's (`engine/src/train/lm-export.h`, `LmExportMeta`:
rank 16, alpha 32, no dropout; Side-Step's `sidestep_engine/lm/train_lm.py` has the same rank,
alpha and seven target modules, with dropout 0.05). PEFT's own initialisation (A
Kaiming-uniform, B zero), so a fresh adapter leaves the planner as it was.

The loss is the token cross-entropy of the answer (prompt labels are -100), averaged over the
answer tokens of the whole batch; the optimizer, schedule, accumulation and clipping are the
training loop's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from tunesmith.families.ace_step_planner import adapter_files
from tunesmith.families.ace_step_planner.adapter_files import TARGET_MODULES, LoraFactors
from tunesmith.families.ace_step_planner.data import IGNORE, PlannerExample
from tunesmith.families.ace_step_planner.model import Planner

RANK = 16  # HOT-Step's and Side-Step's planner LoRA rank
ALPHA = 32  # HOT-Step's and Side-Step's planner LoRA alpha (scale alpha / r = 2)


class TorchPlannerLora(adapter_files.AdapterFolders):
    """A planner wrapped in a PEFT LoRA; only the LoRA factors train.

    PEFT puts its layers into `planner.model` in place: load the planner again for a model
    that never had an adapter.
    """

    def __init__(self, planner: Planner, rank: int = RANK, alpha: float = ALPHA, seed: int = 0):
        from peft import LoraConfig, get_peft_model

        self.planner = planner
        self.rank, self.alpha = rank, alpha
        config = LoraConfig(
            r=rank,
            lora_alpha=alpha,
            lora_dropout=0.0,
            target_modules=list(TARGET_MODULES),
            bias="none",
            task_type="CAUSAL_LM",
        )
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            torch.manual_seed(seed)  # seeded A, the caller's RNG untouched
            # PEFT asks the model `is_gradient_checkpointing`, which transformers has renamed
            # and warns about on every wrap: a notice between the two libraries, not ours.
            warnings.filterwarnings(
                "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
            )
            self.model = get_peft_model(planner.model, config)
        for p in self.parameters().values():  # fp32 factors on a bf16 planner, as Side-Step
            p.data = p.data.float()
        self.model.eval()  # no dropout anywhere; gradients still flow

    def parameters(self) -> dict[str, torch.nn.Parameter]:
        """The adapter's trainable parameters by name."""
        return {n: p for n, p in self.model.named_parameters() if p.requires_grad}

    @property
    def device(self) -> torch.device:
        return next(iter(self.parameters().values())).device

    def loss(self, batch: Sequence[PlannerExample]) -> torch.Tensor:
        """Mean cross-entropy of the batch's answer tokens (a scalar with a graph)."""
        ids, labels, mask = collate(batch, self.planner.tokenizer.pad_token_id, self.device)
        hidden = self.model.base_model.model.model(input_ids=ids, attention_mask=mask)[0]
        # Only answer positions go through the LM head: with the releases' 217k-token
        # vocabulary the logits of a whole song would dwarf everything else.
        targets = labels[:, 1:]
        keep = targets != IGNORE
        logits = self.model.base_model.model.lm_head(hidden[:, :-1][keep])
        return F.cross_entropy(logits.float(), targets[keep], reduction="mean")

    @torch.no_grad()
    def validation_loss(self, examples: Sequence[PlannerExample], batch_size: int = 1) -> float:
        """Answer-token cross-entropy over a fixed subset, weighted by tokens."""
        total, tokens = 0.0, 0
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            count = sum(e.answer_tokens for e in batch)
            total += float(self.loss(batch)) * count
            tokens += count
        return total / max(tokens, 1)

    def factors(self) -> LoraFactors:
        """The current factors, detached, float32 on the CPU."""
        named = self.parameters()
        factors = {}
        for name, a in named.items():
            if ".lora_A." in name:
                module = name.split(".lora_A.")[0].removeprefix("base_model.model.")
                b = named[name.replace(".lora_A.", ".lora_B.")]
                factors[module] = (a.detach().float().cpu(), b.detach().float().cpu())
        return LoraFactors(factors, self.rank, self.alpha)

    @torch.no_grad()
    def set_factors(self, lora: LoraFactors) -> None:
        """Copy factors in (from a file or the other backend); every module must match."""
        if lora.rank != self.rank or abs(lora.scale - self.alpha / self.rank) > 1e-9:
            raise ValueError(
                f"adapter r={lora.rank}, scale {lora.scale:g}; this one has r={self.rank}, "
                f"scale {self.alpha / self.rank:g}"
            )
        modules = dict(self.model.base_model.model.named_modules())
        mine = set(self.factors().factors)
        if set(lora.factors) != mine:
            missing, extra = sorted(mine - set(lora.factors)), sorted(set(lora.factors) - mine)
            raise ValueError(f"adapter modules differ: missing {missing[:3]}, extra {extra[:3]}")
        for module, (a, b) in lora.factors.items():
            layer = modules[module]
            layer.lora_A["default"].weight.copy_(a)
            layer.lora_B["default"].weight.copy_(b)

    @property
    def num_layers(self) -> int:
        return self.planner.model.config.num_hidden_layers

    @property
    def base_folder(self) -> Path:
        return self.planner.folder


def collate(
    batch: Sequence[PlannerExample], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, labels, attention_mask), right-padded to the longest example."""
    if not batch:
        raise ValueError("an empty batch")
    length = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), length), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    for row, example in enumerate(batch):
        n = len(example.input_ids)
        ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.tensor(example.labels)
        mask[row, :n] = 1
    return ids.to(device), labels.to(device), mask.to(device)

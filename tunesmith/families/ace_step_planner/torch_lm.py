"""The planner adapter's objective on PyTorch: a PEFT LoRA on every attention and MLP projection.

Defaults are HOT-Step's planner trainer's (`engine/src/train/lm-export.h`, `LmExportMeta`:
rank 16, alpha 32, no dropout; Side-Step's `sidestep_engine/lm/train_lm.py` has the same rank,
alpha and seven target modules, with dropout 0.05). PEFT's own initialisation (A
Kaiming-uniform, B zero), so a fresh adapter leaves the planner as it was.

The loss is the token cross-entropy of the answer (prompt labels are -100), averaged over the
answer tokens of the whole batch; the optimizer, schedule, accumulation and clipping are the
training loop's.

Gradient checkpointing (`checkpointing=True`, the run's `train.gradient_checkpointing = true`):
transformers' own, `gradient_checkpointing_enable` with `use_reentrant=False`, which recomputes
each decoder layer in the backward instead of keeping its activations. transformers checkpoints
a layer only while its `training` flag is set, so the flag of the decoder layers alone is set:
everything below them stays in eval mode (no dropout), and the step computes the same numbers.
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

    def __init__(
        self,
        planner: Planner,
        rank: int = RANK,
        alpha: float = ALPHA,
        seed: int = 0,
        checkpointing: bool = False,
    ):
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
        if checkpointing:
            self.set_checkpointing(True)

    def set_checkpointing(self, on: bool) -> None:
        """transformers' gradient checkpointing on every decoder layer, or off again (module
        docstring)."""
        model = self.planner.model
        with warnings.catch_warnings():
            # The names every transformers 5 has; newer ones call them activation_checkpointing_*
            # and warn about the old names.
            warnings.filterwarnings("ignore", message=".*gradient_checkpointing_.*able")
            if on:
                kwargs = {"use_reentrant": False}
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            else:
                model.gradient_checkpointing_disable()
                model.disable_input_require_grads()  # the hook enabling it added
        for layer in model.model.layers:
            layer.training = on  # the layer's own flag; its modules stay in eval mode

    def parameters(self) -> dict[str, torch.nn.Parameter]:
        """The adapter's trainable parameters by name."""
        return {n: p for n, p in self.model.named_parameters() if p.requires_grad}

    @property
    def device(self) -> torch.device:
        return next(iter(self.parameters().values())).device

    def loss(self, batch: Sequence[PlannerExample]) -> torch.Tensor:
        """Mean cross-entropy of the batch's answer tokens (a scalar with a graph)."""
        ids, labels, mask = collate(batch, self.planner.tokenizer.pad_token_id)
        rows, targets = answer_rows(labels)
        device = self.device
        # Without padding (a batch of one) no mask: the causal attention is all of it. transformers
        # finds the same from a mask of ones by reading its values, which `meta` tensors lack.
        mask = None if bool(mask.all()) else mask.to(device)
        return self.answer_loss(ids.to(device), mask, rows.to(device), targets.to(device))

    def answer_loss(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor | None,
        rows: torch.Tensor,
        targets: torch.Tensor,
    ) -> torch.Tensor:
        """The mean cross-entropy of `targets` [N], the tokens following the positions `rows`
        [N] of the flattened batch (`answer_rows`), for `ids` [B, T]. The memory estimate runs
        this on `meta` tensors of a run's shapes (memory.py)."""
        hidden = self.model.base_model.model.model(input_ids=ids, attention_mask=mask)[0]
        # Only answer positions go through the LM head: with the releases' 217k-token
        # vocabulary the logits of a whole song would dwarf everything else.
        answer = hidden.reshape(-1, hidden.shape[-1]).index_select(0, rows)
        logits = self.model.base_model.model.lm_head(answer)
        return F.cross_entropy(logits.float(), targets, reduction="mean")

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

    def factor_parameters(self) -> dict[str, tuple[torch.nn.Parameter, torch.nn.Parameter]]:
        """The trained factors (A, B) themselves, by the module's path in the causal LM
        (`model.layers.3.self_attn.q_proj`, the key `LoraFactors` and both files use)."""
        named = self.parameters()
        pairs = {}
        for name, a in named.items():
            if ".lora_A." in name:
                module = name.split(".lora_A.")[0].removeprefix("base_model.model.")
                pairs[module] = (a, named[name.replace(".lora_A.", ".lora_B.")])
        return pairs

    def factors(self) -> LoraFactors:
        """The current factors, detached, float32 on the CPU."""
        factors = {
            module: (a.detach().float().cpu(), b.detach().float().cpu())
            for module, (a, b) in self.factor_parameters().items()
        }
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


def answer_rows(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, targets) of a batch's labels [B, T]: the positions of the flattened batch whose
    next token is an answer token (b * T + t), and those tokens, in the batch's order."""
    following = labels[:, 1:]
    batch, time = (following != IGNORE).nonzero(as_tuple=True)
    return batch * labels.shape[1] + time, following[batch, time]

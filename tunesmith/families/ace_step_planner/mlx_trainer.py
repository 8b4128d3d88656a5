"""A planner run on MLX: the torch trainer's items, order, validation split, epochs, target
loss, files and names (`trainer.PlannerTrainer`), with the model, the update and the state in
mlx-lm (`mlx_lm_backend.MlxPlannerLora`: mlx-lm's qwen3 model, LoRA layers and loss).

Per step, as on torch: each item of the window's loss and gradients (`nn.value_and_grad` over
mlx-lm's `default_loss`), weighted by its share of the window's answer tokens and summed;
torch's global-norm clip (`clip_grad_norm_`'s rule, the SA3 MLX trainer's `clip_global_norm`);
MLX's AdamW with torch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01, bias
correction on as torch always corrects) at the warmup-cosine schedule's lr of the update.
Muon is on the torch backend only: an MLX run asked for Muon trains with AdamW, and its start
line says so. The state holds the factors, MLX's optimizer state and the order generator.

`train.gradient_checkpointing = true`: mlx-lm's `grad_checkpoint` on every transformer block
(`mlx_lm_backend.py`).

On several ranks under mlx.launch (`train.devices`, `tunesmith.train.distributed`) every rank
walks the same window order and takes items `rank::world` of each window, each weighted by
its share of the window's tokens times the world size; `nn.average_gradients` averages the
summed gradients over the ranks (one all-reduce) before the clip and the update, and the
window's loss is the sum of the ranks' parts. A rank with no item of a short window (the last
of an epoch) runs the window's first item at weight 0, so it joins the all-reduce.
"""

from __future__ import annotations

import json

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as mlx_optim
import numpy as np
import torch
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from tunesmith.families.ace_step_planner.mlx_lm_backend import MlxPlannerLora
from tunesmith.families.ace_step_planner.model import check_planner, load_tokenizer, planner_vocab
from tunesmith.families.ace_step_planner.trainer import PlannerTrainer
from tunesmith.families.stable_audio_3.mlx.trainer import clip_global_norm
from tunesmith.train import distributed
from tunesmith.train.optimizers import OptimizerSettings
from tunesmith.train.state import ResumeError, load_params, params_state
from tunesmith.train.trainer import StepReport


class MlxPlannerTrainer(PlannerTrainer):
    """One planner run on MLX through mlx-lm (module docstring)."""

    backend = "mlx"
    data_parallel = True  # under mlx.launch: each rank its items of a window (`_shared_step`)

    def _load(self, placement) -> None:
        check_planner(self.planner_folder)
        self.tokenizer = load_tokenizer(self.planner_folder)  # the ids mlx-lm's model reads
        self.vocab = planner_vocab(self.tokenizer, self.planner_folder)
        config = json.loads((self.planner_folder / "config.json").read_text(encoding="utf-8"))
        self.context = int(config.get("max_position_embeddings") or 0)

    def _attach(self, adapter, seed: int) -> None:
        self.lora = MlxPlannerLora(
            self.planner_folder, adapter.rank, adapter.scale_alpha, seed, self.checkpointing
        )
        self.names_order = sorted(self.lora.parameters())
        self.params = []  # the torch list the loop never reads; `state` builds its own

    def _scheduler(self, updates: int) -> None:
        return None  # `_lr` reads the schedule itself

    def _optimizer(self, cfg):
        settings = OptimizerSettings()  # torch AdamW's defaults, as the torch backend's
        notes = []
        if cfg.optimizer == "muon":
            notes.append(
                "optimizer muon: Muon is on the torch backend; on MLX the run trains with AdamW"
            )
        optimizer = mlx_optim.AdamW(
            learning_rate=0.0,
            betas=list(settings.betas),
            eps=settings.eps,
            weight_decay=settings.weight_decay,
            bias_correction=True,
        )
        optimizer.init(self.lora.model.trainable_parameters())
        count = len(self.names_order)
        return optimizer, "; ".join([*notes, f"optimizer adamw: {count} parameters on MLX's AdamW"])

    # --- the step ------------------------------------------------------------------------------

    def step(self) -> StepReport:
        window, ends_epoch = self.order.next(), self.order.ends_pass
        epoch = self.order.epoch
        batch = self.window_examples(window, epoch)
        tokens = sum(e.answer_tokens for e in batch)
        lr = self._lr()
        if distributed.mlx_group() is not None:
            return self._shared_step(batch, tokens, epoch, ends_epoch, lr)
        summed, total = None, 0.0
        for example in batch:
            loss, grads = self.lora.loss_and_grad([example])
            value = loss.item()
            if not np.isfinite(value):
                return StepReport(value, 0.0, epoch)
            share = example.answer_tokens / tokens
            grads = tree_map(lambda g, s=share: g * s, grads)
            summed = grads if summed is None else tree_map(lambda a, b: a + b, summed, grads)
            total += share * value
        return self._update(summed, lr, tokens, total, epoch, ends_epoch)

    def _shared_step(self, batch, tokens: int, epoch: int, ends_epoch: bool, lr: float):
        """`step` on one rank of several: this rank's items of the window (module docstring).
        A non-finite loss on any rank makes the window's loss non-finite on every rank, and
        none of them updates."""
        group = distributed.mlx_group()
        world = group.size()
        mine, weights = distributed.weighted_share(len(batch), group.rank(), world)
        summed, part = None, 0.0
        for index, weight in zip(mine, weights, strict=True):
            example = batch[index]
            loss, grads = self.lora.loss_and_grad([example])
            share = example.answer_tokens / tokens if weight else 0.0  # weight 0: a stand-in
            grads = tree_map(lambda g, s=share * world: g * s, grads)
            summed = grads if summed is None else tree_map(lambda a, b: a + b, summed, grads)
            part += share * loss.item()
        total = mx.distributed.all_sum(mx.array(part, dtype=mx.float32), group=group).item()
        if not np.isfinite(total):
            return StepReport(total, 0.0, epoch)
        summed = nn.average_gradients(summed, group)
        return self._update(summed, lr, tokens, total, epoch, ends_epoch)

    def _update(
        self, grads, lr: float, tokens: int, total: float, epoch: int, ends_epoch: bool
    ) -> StepReport:
        """The window's summed gradients clipped at `grad_clip`, AdamW's update at `lr`."""
        clipped, norm = clip_global_norm(grads, self.run.train.grad_clip)
        self.optimizer.learning_rate = mx.array(lr, dtype=mx.float32)
        self.optimizer.update(self.lora.model, clipped)
        mx.eval(self.lora.model.parameters(), self.optimizer.state)
        self.updates += 1
        fields = {"lr": lr, "grad_norm": float(norm.item()), "tokens": float(tokens)}
        stop = self._epoch_end(total, ends_epoch, fields)
        return StepReport(total, 0.0, epoch, fields, stop)

    def _lr(self) -> float:
        """The schedule's lr of this update (update k runs at lr x multiplier(k), as torch's
        LambdaLR steps it)."""
        return self.run.train.lr * self.schedule(self.updates)

    # --- state ---------------------------------------------------------------------------------

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        named = self.lora.parameters()
        params = [_torch(named[name]) for name in self.names_order]
        # MLX's step counter is uint64, which torch lacks: saved as int64, cast back on loading.
        optimizer = {
            f"mlx.{k}": _torch(v if mx.issubdtype(v.dtype, mx.floating) else v.astype(mx.int64))
            for k, v in tree_flatten(self.optimizer.state)
        }
        order_tensors, order_document = self.order.state("order")
        tensors = {**params_state(params), **optimizer, **order_tensors}
        document = {
            "optimizer": {"backend": "mlx"},
            **order_document,
            "updates": self.updates,
            "epoch_losses": self.epoch_losses,
            "epoch_sum": self.epoch_sum,
        }
        return tensors, document

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        if document["optimizer"] != {"backend": "mlx"}:
            raise ResumeError("the saved optimizer state is not an MLX one")
        named = self.lora.parameters()
        holders = [torch.zeros(tuple(named[n].shape)) for n in self.names_order]
        load_params(holders, tensors)  # checks the count
        weights = [
            (n, mx.array(h.numpy()).astype(named[n].dtype))
            for n, h in zip(self.names_order, holders, strict=True)
        ]
        self.lora.model.load_weights(weights, strict=False)
        self.optimizer.init(self.lora.model.trainable_parameters())
        dtypes = {k: v.dtype for k, v in tree_flatten(self.optimizer.state)}
        saved = {k[len("mlx.") :]: v for k, v in tensors.items() if k.startswith("mlx.")}
        if set(saved) != set(dtypes):
            raise ResumeError("the saved MLX optimizer state does not fit these adapters")
        flat = [(k, mx.array(v.numpy()).astype(dtypes[k])) for k, v in saved.items()]
        self.optimizer.state = tree_unflatten(flat)
        mx.eval(self.lora.model.parameters(), self.optimizer.state)
        self.order.load_state(tensors, document, "order")
        self.updates = document["updates"]
        self.epoch_losses, self.epoch_sum = document["epoch_losses"], document["epoch_sum"]


def _torch(array: mx.array) -> torch.Tensor:
    return torch.from_numpy(np.array(array))

"""Training Stable Audio 3 adapters in MLX: the torch path's objective and loop, step compiled.

The same step as `tunesmith.families.stable_audio_3.trainer` (its docstring has the formulas):
rectified flow, x_t = x0·(1 − t) + ε·t, target ε − x0; context = T5Gemma tokens + duration
token, CFG dropout zeroing a sample's whole context and marking every token valid (so the
padding embedding does not come back), the global conditioning kept; local_add_cond = [ones |
zeros]; squared error over valid frames × channels per sample, then the batch mean, with the
run's loss options (normalisation, the weight of padded frames, attention past the padding:
`normalized_mse`, `masked_loss` and `PaddedValues` there, the self-attention's `padding_mask`
in `mlx/model.py` here); AdamW
with the run's betas, eps and weight decay (underfit's template values by default, `optim.py`)
and bias correction on (MLX's own default is off), the run's lr schedule, and optional
global-norm clipping as torch's clip_grad_norm_. The step's gradient norm and adapter
magnitude are underfit's (`combine_norms` over each tensor's norm), as the torch trainer's.

What runs where. T5Gemma stays in torch (frozen, its outputs cached per prompt and handed
over as arrays); the DiT and the duration embedder run in MLX. Every random number comes from
the torch loop's generators, in the torch loop's order (t, noise, dropout from the training
generator; crops and order from the order's; prompts from the prompt generator), so an MLX
run draws exactly what a torch run of the same config draws, and the initial adapter A is
drawn by `torch_lora.attach` under the run's seed, as the torch path draws it.

The compiled step (mlx-lm's pattern): `mx.compile` with the model, the optimizer and MLX's
random state as captured inputs and outputs; every per-step value (t, noise, dropout, the
batch) is an array argument, so a new value never retraces, only a new shape does. The
learning rate is one more array: the schedule's value for the step (computed in float64 by the
same `tunesmith.train.schedules` function the torch trainer's LambdaLR calls) is written into
the optimizer's state before each call, and the state is a captured input.

On several ranks under mlx.launch (`train.devices`, `tunesmith.train.distributed`): every rank
draws the whole global batch as above and steps on items `rank::world` of it, each weighted
`world / count` (`distributed.weighted_share`); the compiled step averages the gradients over
the ranks (`nn.average_gradients`, one all-reduce) before clipping and the update, so every
rank applies the one-process update of the global batch up to float32 rounding, and the loss
it returns is the global batch's mean. With one process the step is the one above, unchanged.

Gradient checkpointing (`train.gradient_checkpointing = true`): each DiT block under
`mx.checkpoint` (`mlx/model.py`), its activations recomputed in the backward pass.

Not handled: conv adapters (see `mlx_lora`), demos rendered in MLX
(`render_samples` loads the adapter onto the torch pipeline and renders there), loss scaling
(MLX has no GradScaler; a float16 MLX placement trains without one, the automatic placement
picks bfloat16, which needs none).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as mlx_optim
import numpy as np
import torch
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from tunesmith.adapters import mlx_lora, torch_lora
from tunesmith.adapters.targets import select_targets
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import model, optim, published, xs_bases
from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.config import include_and_exclude
from tunesmith.families.stable_audio_3.data import Batch
from tunesmith.families.stable_audio_3.mlx import convert as mlx_convert
from tunesmith.families.stable_audio_3.mlx.model import cross_attention_context
from tunesmith.families.stable_audio_3.timesteps import FullShift
from tunesmith.families.stable_audio_3.trainer import (
    COUNT_EPS,
    NORM_EPS,
    LossOptions,
    Objective,
    UnderfitTrainer,
    combine_norms,
)
from tunesmith.train import distributed
from tunesmith.train.config import RunConfig
from tunesmith.train.state import ResumeError, params_state
from tunesmith.train.trainer import StepReport

MX_DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
CLIP_EPS = 1e-6  # torch's clip_grad_norm_: coef = max_norm / (norm + 1e-6), at most 1


class SA3Modules(nn.Module):
    """The MLX DiT and duration embedder under the pipeline's component names, so adapter
    names are the torch path's (`transformer.…`, `duration_embedder.linear`)."""

    def __init__(self, transformer: nn.Module, duration_embedder: nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.duration_embedder = duration_embedder


def normalized_mse(
    prediction: mx.array, target: mx.array, valid: mx.array, normalization: str
) -> mx.array:
    """The torch trainer's `normalized_mse` in MLX: the squared error [B, C, L], divided at the
    valid frames (`valid` [B, L] bool) by the target's variance without gradient, + 1e-6. The
    masked moments are sums over the valid elements over their count (torch: nanmean)."""
    mse = (prediction - target) ** 2
    if normalization == "none":
        return mse
    keep = valid[:, None, :]
    target = mx.stop_gradient(target)
    if normalization == "timestep":
        centred = target - target.mean(axis=1, keepdims=True)
        variance = (centred**2).mean(axis=1, keepdims=True) + NORM_EPS
    elif normalization in ("sample", "sample_channel"):
        axes = (1, 2) if normalization == "sample" else (2,)
        count = mx.broadcast_to(keep, target.shape).astype(mx.float32).sum(axis=axes, keepdims=True)
        mean = mx.where(keep, target, 0.0).sum(axis=axes, keepdims=True) / count
        spread = mx.where(keep, (target - mean) ** 2, 0.0).sum(axis=axes, keepdims=True) / count
        variance = spread + NORM_EPS
        variance = mx.where(mx.isnan(variance), 1.0, variance)  # no valid frame: 0/0
    else:
        raise ValueError(f"unknown loss normalization {normalization!r}")
    return mx.where(keep, mse / variance, mse)


def masked_loss(
    errors: mx.array, valid: mx.array, padding_attention: bool, mask_weight: float
) -> mx.array:
    """The torch trainer's `masked_loss` in MLX: per-sample losses [B] from errors [B, C, L]."""
    keep = valid[:, None, :]
    channels = errors.shape[1]
    signal = mx.where(keep, errors, 0.0).sum(axis=(1, 2))
    count = valid.astype(mx.float32).sum(axis=1) * channels
    if padding_attention or not mask_weight:
        return signal / (count + COUNT_EPS)
    padding = mx.where(keep, 0.0, errors).sum(axis=(1, 2))
    padded = mx.logical_not(valid).astype(mx.float32).sum(axis=1) * channels
    return (signal + mask_weight * padding) / (count + mask_weight * padded + COUNT_EPS)


def per_sample_loss(
    modules: SA3Modules,
    x0: mx.array,  # [B, D, L] float32 (latents / scale)
    noise: mx.array,  # [B, D, L]
    t: mx.array,  # [B] shifted timesteps
    prompt_embeds: mx.array,  # [B, P, C] T5Gemma output
    prompt_mask: mx.array,  # [B, P] bool
    seconds: mx.array,  # [B] seconds_total
    drop: mx.array,  # [B] bool: CFG dropout
    frame_mask: mx.array,  # [B, L] 1 where there is audio
    options: LossOptions = LossOptions(),  # noqa: B008 (frozen)
) -> mx.array:
    """Per-sample losses [B] (float32), the torch Objective.loss in MLX."""
    dit = modules.transformer
    dtype = dit.prompt_padding_embedding.dtype  # the weights' dtype; never adapted
    noised = x0 * (1 - t)[:, None, None] + noise * t[:, None, None]
    target = noise - x0
    global_states = modules.duration_embedder(seconds)
    context, context_mask = cross_attention_context(prompt_embeds, prompt_mask, global_states)
    context = mx.where(drop[:, None, None], mx.zeros_like(context), context)
    context_mask = mx.where(drop[:, None], True, context_mask)
    b, d, length = x0.shape
    local_add_cond = mx.concatenate([mx.ones((b, 1, length)), mx.zeros((b, d, length))], axis=1)
    valid = frame_mask.astype(mx.bool_)
    prediction = dit(
        noised.astype(dtype),
        t.astype(dtype),
        context.astype(dtype),
        global_states.astype(dtype),
        context_mask,
        local_add_cond.astype(dtype),
        padding_mask=valid if options.padding_attention else None,
    )
    errors = normalized_mse(prediction.astype(mx.float32), target, valid, options.normalization)
    return masked_loss(errors, valid, options.padding_attention, options.mask_weight)


def _mean_loss(modules, *inputs, options: LossOptions) -> mx.array:
    return per_sample_loss(modules, *inputs, options=options).mean()


def _weighted_loss(modules, weights, *inputs, options: LossOptions) -> mx.array:
    """A rank's part of the global batch's loss, times the world size: Σ w_i·loss_i."""
    return (per_sample_loss(modules, *inputs, options=options) * weights).sum()


def loss_and_grads(
    modules: SA3Modules,
    *inputs: mx.array,
    options: LossOptions = LossOptions(),  # noqa: B008 (frozen)
) -> tuple[mx.array, dict]:
    """(batch-mean loss, gradients of the trainable parameters), uncompiled: for checks."""
    loss = partial(_mean_loss, options=options)
    return nn.value_and_grad(modules, loss)(modules, *inputs)


def clip_global_norm(grads: dict, max_norm: float) -> tuple[dict, mx.array]:
    """torch's clip_grad_norm_: scale by min(max_norm / (‖g‖ + 1e-6), 1); the norm before."""
    total = mx.sqrt(sum(mx.sum(g.astype(mx.float32) ** 2) for _, g in tree_flatten(grads)))
    coef = mx.minimum(max_norm / (total + CLIP_EPS), 1.0)
    return tree_map(lambda g: (g * coef).astype(g.dtype), grads), total


def tensor_norms(tree) -> mx.array:
    """Each array's L2 norm in float32 [n], in the tree's order (what `combine_norms` takes)."""
    norms = [mx.sqrt(mx.sum(a.astype(mx.float32) ** 2)) for _, a in tree_flatten(tree)]
    return mx.stack(norms) if norms else mx.zeros((0,))


def adamw(train) -> mlx_optim.AdamW:
    """`optim.torch_adamw` in MLX: the run's lr, betas, eps and weight decay, bias-corrected
    as torch's (MLX's AdamW also decays by lr·wd before the Adam step, as torch's does)."""
    return mlx_optim.AdamW(
        learning_rate=train.lr,
        betas=[float(b) for b in train.betas],
        eps=train.eps,
        weight_decay=train.weight_decay,
        bias_correction=True,
    )


def make_step(
    modules: SA3Modules,
    optimizer: mlx_optim.Optimizer,
    grad_clip: float = 0.0,
    group=None,
    options: LossOptions = LossOptions(),  # noqa: B008 (frozen)
):
    """The compiled training step: (x0, noise, t, embeds, prompt_mask, seconds, drop,
    frame_mask) → (mean loss, each gradient's norm after clipping, each adapter tensor's norm
    before the update), the loss with the run's `options`.

    `grad_clip` (0 = off) is fixed when the step is built. The step draws no random numbers;
    MLX's random state is captured anyway, as mlx's compile docs ask of any step that might.

    With `group` (one rank of several) the first argument is the weights of this rank's items
    (`distributed.weighted_share`); the gradients are averaged over the group before clipping,
    and the loss returned is the global batch's mean (the ranks' weighted sums, summed, over
    the world size).
    """
    loss_fn = partial(_mean_loss if group is None else _weighted_loss, options=options)
    value_and_grad = nn.value_and_grad(modules, loss_fn)
    # Moments made now, outside the trace: made lazily inside it, they would be placeholders.
    optimizer.init(modules.trainable_parameters())
    state = [modules.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(*inputs):
        run.traces += 1  # Python runs here only while MLX traces the step
        magnitudes = tensor_norms(modules.trainable_parameters())
        loss, grads = value_and_grad(modules, *inputs)
        if group is not None:
            grads = nn.average_gradients(grads, group)
            loss = mx.distributed.all_sum(loss, group=group) / group.size()
        if grad_clip > 0:
            grads, _ = clip_global_norm(grads, grad_clip)
        optimizer.update(modules, grads)
        return loss, tensor_norms(grads), magnitudes

    def run(*inputs: mx.array) -> tuple[mx.array, mx.array, mx.array]:
        out = step(*inputs)
        mx.eval(state, out)
        return out

    run.traces = 0
    return run


def _mx(tensor: torch.Tensor, dtype=mx.float32) -> mx.array:
    return mx.array(tensor.detach().cpu().float().numpy()).astype(dtype)


class MLXObjective:
    """The torch Objective's conventions with the DiT in MLX (see the module docstring)."""

    def __init__(
        self, base_model: Path, run: RunConfig, placement: Placement, fingerprint: str | None = None
    ) -> None:
        """`fingerprint`: as the torch Objective's (the store's `-xs` bases)."""
        if placement.backend != "mlx":
            raise ValueError(f"MLXObjective needs an mlx placement, got {placement}")
        if placement.device != "cpu":
            mx.set_default_device(mx.gpu)  # metal or cuda: MLX's gpu device
        self.run, self.placement = run, placement
        self.dtype = MX_DTYPES[placement.dtype]
        # The torch pipeline (float32, CPU) for T5Gemma, the demos and the initial A.
        self.pipe = model.load_pipeline(base_model, torch.float32, "cpu")
        self.base_model, self.device, self.arc = Path(base_model), torch.device("cpu"), None
        self.torch_modules = torch.nn.ModuleDict(  # the demos render in torch
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        self.underfit_model = published.underfit_model_id(base_model)  # as the torch Objective
        transformer, duration_embedder = mlx_convert.from_diffusers(
            self.pipe.transformer, self.pipe.duration_embedder
        )
        transformer.gradient_checkpointing = run.train.gradient_checkpointing is True
        self.modules = SA3Modules(transformer, duration_embedder)
        if self.dtype != mx.float32:  # every weight in the placement dtype, as load_pipeline
            self.modules.update(tree_map(lambda a: a.astype(self.dtype), self.modules.parameters()))
        self.scale, self.shift = 1.0, FullShift()  # as the torch Objective
        candidates = sa3_names.adapter_targets(self.pipe.transformer, self.pipe.duration_embedder)
        include, exclude = include_and_exclude(run.adapter)
        chosen = select_targets(
            [(underfit, name) for name, underfit in candidates.items()], include, exclude
        )
        self.targets = [name for _, name in chosen]
        self.include, self.exclude = include, exclude
        a = run.adapter
        self.bases, self.bases_note = None, ""
        if xs_bases.is_xs(a.type):  # the torch trainer's bases, from the same store entry
            self.bases, self.bases_note = xs_bases.run_bases(
                self.torch_modules, self.targets, a.rank, base_model, fingerprint
            )
        mlx_lora.attach(self.modules, self.targets, a.rank, a.scale_alpha, a.type, bases=self.bases)
        self._adopt_torch_init()
        self._text: dict[str, tuple[mx.array, mx.array]] = {}
        self.optimizer = adamw(run.train)
        self.schedule, self.schedule_step = optim.lr_schedule(run.train), 0
        self.group = distributed.mlx_group()  # None on one process
        self.loss_options = LossOptions.of(run.train)
        self._step = self._make_step()

    def _make_step(self):
        train = self.run.train
        return make_step(
            self.modules, self.optimizer, train.grad_clip, self.group, self.loss_options
        )

    def _adopt_torch_init(self) -> None:
        """A as the torch path draws it (same seed, same order); B zero; m from the MLX
        weights (so the dora factor is exactly 1 at init, as in torch)."""
        torch_modules = self.torch_modules
        a = self.run.adapter
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.run.train.seed)
            torch_lora.attach(
                torch_modules, self.targets, a.rank, a.scale_alpha, a.type, bases=self.bases
            )
        initial = torch_lora.adapter_state(torch_modules)
        state = mlx_lora.adapter_state(self.modules)
        for key in state:
            if key.endswith(".lora_A"):
                state[key] = initial[key]
        mlx_lora.load_adapter_state(self.modules, state)
        # The torch pipeline now holds torch adapters: `render_samples` loads ours into them.

    # --- the loop's protocol ------------------------------------------------------------------

    def parameters(self) -> list[mx.array]:
        """The adapter arrays in the torch path's order (per layer A, B, m)."""
        return [
            p
            for module in mlx_lora.adapter_layers(self.modules).values()
            for p in mlx_lora._tensors(module).values()
        ]

    def _prompts(self, prompts: list[str]) -> tuple[mx.array, mx.array]:
        missing = sorted({p for p in prompts if p not in self._text})
        if missing:
            embeds, mask = model.encode_prompts(self.pipe, missing)
            for prompt, e, m in zip(missing, embeds, mask, strict=True):
                self._text[prompt] = (_mx(e), mx.array(m.bool().numpy()))
        return (
            mx.stack([self._text[p][0] for p in prompts]),
            mx.stack([self._text[p][1] for p in prompts]),
        )

    def inputs(self, batch: Batch, prompts, t, noise, drop) -> tuple[mx.array, ...]:
        """The step's array arguments from the torch loop's batch and draws."""
        embeds, mask = self._prompts(prompts)
        return (
            _mx(batch.latents / self.scale),
            _mx(noise),
            _mx(t),
            embeds,
            mask,
            _mx(batch.seconds_total),
            mx.array(drop.numpy().astype(bool)),
            _mx(batch.mask),
        )

    def loss(self, batch: Batch, prompts: list[str], t, noise, drop) -> torch.Tensor:
        """Per-sample losses [B] as a torch tensor, without gradients (validation)."""
        inputs = self.inputs(batch, prompts, t, noise, drop)
        losses = per_sample_loss(self.modules, *inputs, options=self.loss_options)
        return torch.from_numpy(np.array(losses))

    def lr(self, step: int) -> float:
        """The learning rate of optimizer step `step` (0-based): the peak times the schedule."""
        return self.run.train.lr * self.schedule(step)

    def step(self, batch: Batch, prompts, t, noise, drop, weights=None) -> tuple:
        """One compiled optimizer step: (loss, grad norm after clipping, adapter norm before;
        underfit's, None where it logs none), at the schedule's lr for this step; the schedule
        then moves on, as torch's LambdaLR. `weights`: those of a rank's items, on one rank of
        several."""
        self.optimizer.learning_rate = self.lr(self.schedule_step)  # an array in the state
        inputs = self.inputs(batch, prompts, t, noise, drop)
        if self.group is not None:
            inputs = (mx.array(weights, dtype=mx.float32), *inputs)
        loss, grad_norms, magnitudes = self._step(*inputs)
        self.schedule_step += 1
        grad_norm = combine_norms(np.array(grad_norms).tolist(), skip_nan=True)
        return loss.item(), grad_norm, combine_norms(np.array(magnitudes).tolist())

    def shift_timesteps(self, t: torch.Tensor, length: int) -> torch.Tensor:
        return self.shift(t, length)

    def render_samples(self, folder: Path, step: int) -> list[Path]:
        """The torch path's demos, with this adapter loaded onto the torch pipeline."""
        if not self.run.demos:
            return []
        torch_lora.load_adapter_state(self.torch_modules, mlx_lora.adapter_state(self.modules))
        return Objective.render_samples(self, folder, step)

    adapter_config = Objective.adapter_config

    save = Objective.save  # the same file as the torch path, from this adapter_state

    def adapter_state(self) -> dict[str, torch.Tensor]:
        return mlx_lora.adapter_state(self.modules)

    # --- resumable state ----------------------------------------------------------------------

    def optimizer_state(self) -> dict:
        # The step counter is uint64, which torch lacks: saved as int64, cast back on loading.
        tensors = {
            k: mlx_lora._to_torch(v if mx.issubdtype(v.dtype, mx.floating) else v.astype(mx.int64))
            for k, v in tree_flatten(self.optimizer.state)
        }
        return {"state": {0: tensors}, "param_groups": [{"backend": "mlx"}]}

    def load_optimizer_state(self, saved: dict, params: list[torch.Tensor]) -> None:
        if saved["param_groups"] != [{"backend": "mlx"}]:
            raise ResumeError("the saved optimizer state is not an MLX one")
        state = mlx_lora.adapter_state(self.modules)
        mlx_lora.load_adapter_state(self.modules, dict(zip(state, params, strict=True)))
        self.optimizer.init(self.modules.trainable_parameters())
        dtypes = {k: v.dtype for k, v in tree_flatten(self.optimizer.state)}
        if set(dtypes) != set(saved["state"][0]):
            raise ResumeError("the saved MLX optimizer state does not fit these adapters")
        flat = [(k, mx.array(v.numpy()).astype(dtypes[k])) for k, v in saved["state"][0].items()]
        self.optimizer.state = tree_unflatten(flat)
        mx.eval(self.optimizer.state)
        # The compiled step captured the old state dict: build it again around the new one.
        self._step = self._make_step()


class MlxTrainer(UnderfitTrainer):
    """Stable Audio 3 on MLX: the torch trainer's draws, validation, files and identity
    (`UnderfitTrainer`), the update in MLX's compiled step. On several ranks under mlx.launch
    each takes its share of the global batch's draws (module docstring)."""

    data_parallel = True

    def __init__(self, run, base_model, encoded, run_dir, placement, metadata) -> None:
        super().__init__(run, base_model, encoded, run_dir, metadata)
        self.objective = MLXObjective(base_model, run, placement, fingerprint=self.fingerprint)
        self.start_note = self.objective.bases_note
        self.device = "cpu"  # the memory cap counts MLX's memory as the process's
        self.identity = self.identity_of(self.objective)

    def _update(self) -> StepReport:
        d = self.draws.next()
        if self.objective.group is None:
            value, grad_norm, magnitude = self.objective.step(
                d.batch, d.prompts, d.t, d.noise, d.drop
            )
        else:
            value, grad_norm, magnitude = self._shared_step(d)
        # The lr the next step will use, as the torch trainer (and underfit) logs it.
        lr = self.objective.lr(self.objective.schedule_step)
        fields = {"lr": lr}
        for key, norm in (("grad_norm", grad_norm), ("lora_magnitude", magnitude)):
            if norm is not None:  # underfit logs neither without gradients or parameters
                fields[key] = norm
        return StepReport(value, d.t.float().mean().item(), self.draws.epoch, fields)

    def _shared_step(self, d) -> tuple[float, float, float]:
        """On one rank of several: the step on this rank's items of the global batch's draws
        (the same draws on every rank), weighted so the ranks' average is the global mean."""
        rank, world = distributed.rank_and_world()
        mine, weights = distributed.weighted_share(d.t.shape[0], rank, world)
        batch = Batch(*(_take(getattr(d.batch, f.name), mine) for f in dataclasses.fields(Batch)))
        picked = (_take(x, mine) for x in (d.prompts, d.t, d.noise, d.drop))
        return self.objective.step(batch, *picked, weights=weights)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors, document = self.draws.state()
        params = list(mlx_lora.adapter_state(self.objective.modules).values())
        moments = self.objective.optimizer_state()["state"][0]
        return (
            {**params_state(params), **{f"mlx.{k}": v for k, v in moments.items()}, **tensors},
            {
                **document,
                "optimizer": {"backend": "mlx"},
                "schedule_step": self.objective.schedule_step,
            },
        )

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        if document.get("optimizer") != {"backend": "mlx"}:
            raise ResumeError("the saved optimizer state is not an MLX one")
        if "schedule_step" not in document:
            raise ResumeError("the saved state has no lr schedule step (saved by an older version)")
        self.objective.schedule_step = document["schedule_step"]
        count = sum(1 for key in tensors if key.startswith("param."))
        params = [tensors[f"param.{i}"] for i in range(count)]
        moments = {k[4:]: v for k, v in tensors.items() if k.startswith("mlx.")}
        saved = {"state": {0: moments}, "param_groups": [{"backend": "mlx"}]}
        self.objective.load_optimizer_state(saved, params)
        self.draws.load_state(tensors, document)
        self.train_log.resume(document["schedule_step"])  # one schedule step per step


def _take(items, indices: list[int]):
    """`items` at `indices`: rows of a tensor, elements of a list."""
    if isinstance(items, torch.Tensor):
        return items[indices]
    return [items[i] for i in indices]

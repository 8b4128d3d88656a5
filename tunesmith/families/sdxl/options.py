"""kohya sd-scripts' SDXL training options, computed as kohya computes them.

The loss and its weights (kohya's train_network.py `process_batch` and `post_process_loss`,
library/train_util.py `conditional_loss` and `get_huber_threshold_if_needed`,
library/custom_train_functions.py `apply_snr_weight` and `apply_debiased_estimation`), with
SNR(t) = ᾱ_t / (1 − ᾱ_t) from the scheduler's alphas_cumprod:

    ℓ        per element: l2 (p − y)², l1 |p − y|,
             huber      2c·(√((p − y)² + c²) − c),
             smooth_l1  2·(√((p − y)² + c²) − c)
    c(t)     huber_schedule "snr": (1 − huber_c) / (1 + σ_t)² + huber_c, σ_t = √((1 − ᾱ_t) / ᾱ_t)
             "exponential": exp(−a·t) with a = −ln(huber_c) / levels; "constant": huber_c
    loss     mean over pictures of w_b · mean over the picture's elements of ℓ
    w        min_snr_gamma γ: min(SNR, γ) / SNR (ε-prediction), min(SNR, γ) / (SNR + 1)
             (v-prediction); then debiased_estimation: 1/√SNR (ε), 1 / (SNR + 1) (v), SNR
             clamped at 1000 as kohya does (level 0's is about 1175 in SDXL)

The noise (kohya's train_util.py `get_noise_noisy_latents_and_timesteps`): ε drawn as before,
then, in kohya's order,

    noise_offset o        ε + o_b·n, n ~ N(0, 1) of shape [B, C, 1, 1], with
                          o_b = max(0, o + adaptive_noise_scale·|mean over H, W of x0_b|)
    multires (pyramid)    for i < iterations: r_i ~ U[2, 4), ε += up(N(0, 1) at
                          ⌊H / r_i^i⌋ × ⌊W / r_i^i⌋)·discount^i (bilinear up to H × W, stopping
                          after a side reaches 1); then ε / std(ε) over the whole batch

and the noised latent and the target (ε, or v) are made from that ε. kohya draws r_i from
Python's global `random` and the noise from torch's global generator; here every draw comes
from the run's training generator, after t, ε₁ and ε, so the run stays reproducible and resumes
bit for bit.

The schedule is diffusers.optimization.get_scheduler's, counted in optimizer updates (kohya's
schedulers are transformers' functions of the same names and formulas). The optimizers are
kohya's names for torch's AdamW, bitsandbytes' AdamW8bit, prodigyopt's Prodigy and
transformers' Adafactor. The EMA is diffusers' EMAModel (training_utils), the one SimpleTuner
keeps: update k uses the decay min(ema_decay, (1 + k − 1) / (10 + k − 1)), 0 at the first update
(which copies the adapter), so an EMA follows the adapter closely for its first hundred updates.

The held-out validation loss is none of this: it stays the plain MSE at fixed levels and noise
(objective.py), the number that compares across runs whatever they train with.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from tunesmith.families.sdxl.config import HUBER_SCHEDULES, LOSS_TYPES, OPTIMIZERS

DEBIASED_SNR_CAP = 1000.0  # kohya's apply_debiased_estimation: SNR(0) would be near infinite
PRODIGY_LOW_LR = 0.1  # kohya warns below it: Prodigy's lr is a multiplier of its own estimate


class OptionError(ValueError):
    """An option this machine cannot train with (a package not installed): one line."""


# -- the loss ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LossOptions:
    """The loss and noise options of a run (its `[runs.train]` table's names)."""

    min_snr_gamma: float = 0.0
    noise_offset: float = 0.0
    adaptive_noise_scale: float = 0.0
    multires_noise_iterations: int = 0
    multires_noise_discount: float = 0.3
    debiased_estimation: bool = False
    loss_type: str = "l2"
    huber_c: float = 0.1
    huber_schedule: str = "snr"

    @classmethod
    def of(cls, train) -> LossOptions:
        """The options of a run's train section."""
        return cls(**{f.name: getattr(train, f.name) for f in fields(cls)})

    @property
    def plain_loss(self) -> bool:
        """The mean squared error, unweighted: the loss the run trained with before."""
        return self.loss_type == "l2" and not self.min_snr_gamma and not self.debiased_estimation

    @property
    def plain_noise(self) -> bool:
        return not self.noise_offset and not self.multires_noise_iterations


def signal_to_noise(alphas_cumprod: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """SNR(t) = ᾱ_t / (1 − ᾱ_t), float32 [B] (kohya's all_snr, (√ᾱ / √(1 − ᾱ))²)."""
    ac = alphas_cumprod.to(torch.float64)[t.to(alphas_cumprod.device)]
    return (ac / (1 - ac)).float()


def min_snr_weight(snr: torch.Tensor, gamma: float, v_prediction: bool) -> torch.Tensor:
    """kohya's apply_snr_weight: min(SNR, γ) / SNR, or / (SNR + 1) for v-prediction."""
    clipped = torch.minimum(snr, torch.full_like(snr, gamma))
    return clipped / (snr + 1) if v_prediction else clipped / snr


def debiased_weight(snr: torch.Tensor, v_prediction: bool) -> torch.Tensor:
    """kohya's apply_debiased_estimation: 1/√SNR, or 1 / (SNR + 1) for v-prediction."""
    snr = torch.minimum(snr, torch.full_like(snr, DEBIASED_SNR_CAP))
    return 1 / (snr + 1) if v_prediction else 1 / torch.sqrt(snr)


def huber_threshold(
    t: torch.Tensor, c: float, schedule: str, alphas_cumprod: torch.Tensor, levels: int
) -> torch.Tensor:
    """kohya's get_huber_threshold_if_needed (huber_scale 1): c(t) per picture, float32 [B]."""
    if schedule == "snr":
        ac = alphas_cumprod.to(torch.float64)[t.to(alphas_cumprod.device)]
        sigma = ((1 - ac) / ac) ** 0.5
        return ((1 - c) / (1 + sigma) ** 2 + c).float()
    if schedule == "exponential":
        a = -torch.log(torch.tensor(c, dtype=torch.float64)) / levels
        return torch.exp(-a * t.to(torch.float64)).float()
    if schedule == "constant":
        return torch.full(t.shape, c, dtype=torch.float32)
    raise ValueError(f"huber_schedule {schedule!r}: one of {', '.join(HUBER_SCHEDULES)}")


def elementwise_loss(
    prediction: torch.Tensor, target: torch.Tensor, loss_type: str, c: torch.Tensor | None = None
) -> torch.Tensor:
    """kohya's conditional_loss with reduction "none": ℓ per element; `c` [B] for the Huber
    forms."""
    if loss_type == "l2":
        return F.mse_loss(prediction, target, reduction="none")
    if loss_type == "l1":
        return F.l1_loss(prediction, target, reduction="none")
    if loss_type not in ("huber", "smooth_l1"):
        raise ValueError(f"loss_type {loss_type!r}: one of {', '.join(LOSS_TYPES)}")
    c = c.to(prediction).view(-1, *([1] * (prediction.ndim - 1)))
    root = torch.sqrt((prediction - target) ** 2 + c**2) - c
    return 2 * c * root if loss_type == "huber" else 2 * root


# -- the noise ---------------------------------------------------------------------------------


def offset_noise(
    noise: torch.Tensor,
    x0: torch.Tensor | None,
    offset: float,
    adaptive: float,
    draw: torch.Tensor,
) -> torch.Tensor:
    """kohya's apply_noise_offset: ε + o·n with n = `draw` [B, C, 1, 1]; with `adaptive`,
    o = max(0, offset + adaptive·|mean over H, W of x0|) per picture and channel."""
    strength: torch.Tensor | float = offset
    if adaptive:
        mean = torch.abs(x0.mean(dim=(2, 3), keepdim=True))
        strength = torch.clamp(offset + adaptive * mean, min=0.0)
    return noise + strength * draw


def pyramid_noise(
    noise: torch.Tensor, iterations: int, discount: float, generator: torch.Generator
) -> torch.Tensor:
    """kohya's pyramid_noise_like (multires noise), its draws from `generator`: per iteration i
    a scale r ~ U[2, 4) (one `torch.rand`) and N(0, 1) noise at ⌊H / r^i⌋ × ⌊W / r^i⌋ (at least
    1), bilinearly up-sampled and added at discount^i; the sum over the batch's std."""
    b, c, h, w = noise.shape
    noise = noise.clone()
    for i in range(iterations):
        r = float(torch.rand((), generator=generator)) * 2 + 2
        hn, wn = max(1, int(h / r**i)), max(1, int(w / r**i))
        coarse = torch.randn((b, c, hn, wn), generator=generator)
        noise += F.interpolate(coarse, size=(h, w), mode="bilinear") * discount**i
        if hn == 1 or wn == 1:
            break  # the coarsest level is a single row or column
    return noise / noise.std()


def kohya_noise(
    noise: torch.Tensor,
    x0: torch.Tensor | None,
    options: LossOptions,
    generator: torch.Generator,
) -> torch.Tensor:
    """ε with the run's noise offset and multires noise, in kohya's order, drawn from
    `generator` after ε (the offset's n first, then each pyramid level's r and noise)."""
    if options.noise_offset:
        draw = torch.randn((noise.shape[0], noise.shape[1], 1, 1), generator=generator)
        noise = offset_noise(noise, x0, options.noise_offset, options.adaptive_noise_scale, draw)
    if options.multires_noise_iterations:
        noise = pyramid_noise(
            noise, options.multires_noise_iterations, options.multires_noise_discount, generator
        )
    return noise


# -- the optimizer, the schedule, the EMA ------------------------------------------------------


def build_optimizer(name: str, params: list[torch.nn.Parameter], lr: float):
    """kohya's optimizer of that name over `params` at `lr`. OptionError (one line) where the
    package it needs is not installed."""
    if name == "AdamW":
        return torch.optim.AdamW(params, lr=lr)  # torch's defaults, as kvad and kohya
    if name == "AdamW8bit":
        bnb = _package("bitsandbytes", "AdamW8bit")
        return _flat_state(bnb.optim.AdamW8bit)(params, lr=lr)  # kohya's, at its defaults
    if name == "Prodigy":
        prodigyopt = _package("prodigyopt", "Prodigy")
        return prodigyopt.Prodigy(params, lr=lr)  # kohya: prodigyopt.Prodigy, its defaults
    if name == "Adafactor":
        from transformers.optimization import Adafactor

        # At train.lr, as the other optimizers: the three optimizer_args kohya's docs give for
        # Adafactor at a fixed lr (docs/train_README, docs/flux_train_network.md); kohya's bare
        # "Adafactor" is relative_step, which sets its own lr and ignores train.lr.
        return Adafactor(
            params, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False
        )
    raise OptionError(f"train.optimizer {name!r}: one of {', '.join(OPTIMIZERS)}")


def _flat_state(optimizer: type) -> type:
    """`optimizer` (a bitsandbytes one) with its state dict's tensors flat per parameter, as
    the run's state keeps an optimizer's (`tunesmith.train.state.optimizer_state`).

    bitsandbytes nests its quantisation tensors in a dict under one key of each parameter's
    state (for FSDP), and every parameter's maps (`qmap1`, `qmap2`) are one tensor, which a
    safetensors file cannot hold twice: flattened here, each a copy; its `load_state_dict`
    reads the nested and the flat form alike."""

    class Flat(optimizer):
        def state_dict(self):
            state = super().state_dict()  # each parameter's entry a copy: safe to change
            key = getattr(self, "_FSDP_WRAPPED_QUANT_STATE_KEY", None)
            for entry in state["state"].values():
                if key in entry:
                    entry.update({k: v.clone() for k, v in entry.pop(key).items()})
            return state

    Flat.__name__ = Flat.__qualname__ = optimizer.__name__
    return Flat


def _package(module: str, optimizer: str):
    if importlib.util.find_spec(module) is None:
        raise OptionError(
            f'train.optimizer "{optimizer}" needs the {module} package, which is not '
            f"installed: pip install {module}, or train with another optimizer"
        )
    return importlib.import_module(module)


def optimizer_note(name: str, lr: float) -> str:
    """A line for the run's log where kohya warns: Prodigy at a low lr barely moves."""
    if name == "Prodigy" and lr <= PRODIGY_LOW_LR:
        return (
            f"optimizer Prodigy at train.lr {lr:g}: Prodigy estimates its own step size and "
            "multiplies it by the lr, which is meant to be about 1.0 (prodigyopt's default and "
            "kohya's advice); at this lr the adapter barely moves"
        )
    return ""


def build_scheduler(train, optimizer: torch.optim.Optimizer):
    """diffusers' LambdaLR for the run's lr_scheduler over `train.steps` optimizer updates,
    at update 0; None for "constant" (the lr stays train.lr, as before).

    kohya's get_scheduler_fix passes the same arguments (its num_training_steps times the
    processes only because accelerate steps a prepared scheduler once per process)."""
    if train.lr_scheduler == "constant":
        return None
    from diffusers.optimization import get_scheduler

    try:
        return get_scheduler(
            train.lr_scheduler,
            optimizer,
            num_warmup_steps=train.lr_warmup_steps,
            num_training_steps=train.steps,
            num_cycles=train.lr_scheduler_num_cycles,
            power=train.lr_scheduler_power,
        )
    except ValueError as exc:  # polynomial's lr_end (1e-7) at or above train.lr
        raise OptionError(f"train.lr_scheduler {train.lr_scheduler!r}: {exc}") from None


class AdapterEma:
    """The exponential moving average of the adapter's factors: diffusers' EMAModel, stepped
    after every optimizer update, swapped into the adapter while it is measured or written."""

    def __init__(self, params: list[torch.nn.Parameter], decay: float) -> None:
        from diffusers.training_utils import EMAModel

        self.params = params
        self.model = EMAModel(params, decay=decay, foreach=True)

    def step(self) -> None:
        self.model.step(self.params)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The adapter holds the EMA inside the block, its own values again after it."""
        self.model.store(self.params)
        self.model.copy_to(self.params)
        try:
            yield
        finally:
            self.model.restore(self.params)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors = {f"ema.{i}": p.detach() for i, p in enumerate(self.model.shadow_params)}
        return tensors, {"ema_updates": self.model.optimization_step}

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        with torch.no_grad():
            for i, shadow in enumerate(self.model.shadow_params):
                shadow.copy_(tensors[f"ema.{i}"])
        self.model.optimization_step = int(document["ema_updates"])

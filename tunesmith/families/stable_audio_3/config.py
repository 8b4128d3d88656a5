"""A Stable Audio 3 run's settings: underfit's defaults, each with its source.

underfit is dada-bots' Stable Audio 3 LoRA trainer (its dashboard, `defaults.ini` and README);
its conventions are written up in docs/conventions/stable-audio-3.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig

ADAPTER_TYPES = ("lora", "dora-rows")
TIMESTEP_SAMPLERS = ("uniform", "logit_normal", "trunc_logit_normal", "log_snr", "log_snr_uniform")
LR_SCHEDULES = ("inverse_lr", "constant")  # constant: underfit's loop given no scheduler
MAX_DEMO_SECONDS = 600.0  # Stable Audio 3 is trained on up to 600 s (underfit's cap)


@dataclass(frozen=True)
class Sa3Adapter(AdapterConfig):
    type: str = "dora-rows"  # underfit's product default (its dashboard), not its config-layer lora
    rank: int = 16  # underfit's README default; alpha None: alpha = rank (underfit)
    include: tuple[str, ...] = ()  # substrings of underfit's layer names; [i-j] ranges
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sa3Train(TrainConfig):
    lr: float = 1e-4  # underfit's dashboard default
    batch_size: int = 1  # underfit defaults.ini
    seed: int = 42  # underfit
    timestep_sampler: str = "uniform"  # underfit's default
    cfg_dropout: float = 0.1  # underfit dit.py: whole cross-attention conditioning zeroed
    latent_crop_length: int = 1300  # underfit: sm-music/sfx ≈ 120 s
    checkpoint_every: int = 1000  # underfit
    trigger_probability: float = 0.8  # underfit prompt templates: trigger prepended 80%
    # AdamW and the lr schedule of underfit's Stable Audio 3 model templates
    # (dashboard/models/<model>/training_template.json, training.optimizer_configs.diffusion;
    # the same for sa3-medium, sa3-sm-music and sa3-sm-sfx). torch's AdamW defaults differ:
    # betas (0.9, 0.999).
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.01
    # stable-audio-tools' InverseLR, the templates' scheduler: lr · (1 − warmup^(k+1)) ·
    # (1 + k/inv_gamma)^−power at optimizer step k (tunesmith.train.schedules.inverse_lr).
    lr_schedule: str = "inverse_lr"
    inv_gamma: float = 1e6
    power: float = 0.5
    warmup: float = 0.995


@dataclass(frozen=True)
class Sa3Demo(DemoConfig):
    duration: float = 10.0  # seconds
    steps: int = 50  # underfit's demo_steps
    cfg: float = 7.0  # underfit's demo cfg scale

    def problems(self) -> list[str]:
        if not isinstance(self.duration, int | float) or not 0 < self.duration <= MAX_DEMO_SECONDS:
            return [f"duration must be in (0, {MAX_DEMO_SECONDS:.0f}] s, got {self.duration!r}"]
        return []


def problems(run) -> list[str]:
    a, t = run.adapter, run.train
    found = []
    if a.type not in ADAPTER_TYPES:
        found.append(f"adapter.type must be one of {', '.join(ADAPTER_TYPES)}, got {a.type!r}")
    crop = t.latent_crop_length
    if isinstance(crop, bool) or not isinstance(crop, int) or crop < 1:
        found.append(f"train.latent_crop_length must be an integer ≥ 1, got {crop!r}")
    if t.timestep_sampler not in TIMESTEP_SAMPLERS:
        found.append(
            f"train.timestep_sampler must be one of {', '.join(TIMESTEP_SAMPLERS)}, "
            f"got {t.timestep_sampler!r}"
        )
    if not 0 <= t.cfg_dropout < 1:
        found.append(f"train.cfg_dropout must be in [0, 1), got {t.cfg_dropout!r}")
    if not 0 <= t.trigger_probability <= 1:
        found.append(f"train.trigger_probability must be in [0, 1], got {t.trigger_probability!r}")
    return found + _optimizer_problems(t)


def _optimizer_problems(t: Sa3Train) -> list[str]:
    found = []
    betas = t.betas
    if not (
        isinstance(betas, tuple | list)
        and len(betas) == 2
        and all(_number(b) and 0 <= b < 1 for b in betas)
    ):
        found.append(f"train.betas must be two numbers in [0, 1), got {betas!r}")
    if not (_number(t.eps) and t.eps > 0):
        found.append(f"train.eps must be a number > 0, got {t.eps!r}")
    if not (_number(t.weight_decay) and t.weight_decay >= 0):
        found.append(f"train.weight_decay must be a number ≥ 0, got {t.weight_decay!r}")
    if t.lr_schedule not in LR_SCHEDULES:
        found.append(
            f"train.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {t.lr_schedule!r}"
        )
    if not (_number(t.inv_gamma) and t.inv_gamma > 0):
        found.append(f"train.inv_gamma must be a number > 0, got {t.inv_gamma!r}")
    if not (_number(t.power) and t.power >= 0):
        found.append(f"train.power must be a number ≥ 0, got {t.power!r}")
    if not (_number(t.warmup) and 0 <= t.warmup < 1):
        found.append(f"train.warmup must be in [0, 1) (0: no warmup), got {t.warmup!r}")
    return found


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

"""A Stable Audio 3 run's settings: underfit's defaults, each with its source.

underfit is dada-bots' Stable Audio 3 LoRA trainer (its dashboard, `defaults.ini` and README);
its conventions are written up in docs/conventions/stable-audio-3.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig

ADAPTER_TYPES = ("lora", "dora-rows")
TIMESTEP_SAMPLERS = ("uniform", "logit_normal", "trunc_logit_normal", "log_snr", "log_snr_uniform")
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
    return found

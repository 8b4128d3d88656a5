"""What to train: the `[[runs]]` of a dataset's `tunesmith.toml`, resolved to frozen configs.

    [[runs]]
    name = "loops-dora"
    family = "stable-audio-3"
    base_model = "tiny-stable-audio-3"     # a folder; relative paths are under the models root
    trigger = "lpz"
    [runs.adapter]
    type = "dora-rows"
    rank = 16
    [runs.train]
    steps = 200

Every key not given takes the family's default; an unknown key is an error that lists the
allowed ones. The file's `[dataset]` table belongs to the labels stage. Without `[[runs]]`
(or without a `tunesmith.toml`), one run of the family that fits the media
(audio → stable-audio-3, images → sdxl) with its defaults. One override path:
tunesmith.toml → Dagster run config → command line; the resolved config is written
beside every adapter.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

FAMILIES = ("stable-audio-3", "sdxl", "ace-step")
ADAPTER_TYPES = ("lora", "dora-rows")
TIMESTEP_SAMPLERS = ("uniform", "logit_normal", "trunc_logit_normal", "log_snr", "log_snr_uniform")


class ConfigError(ValueError):
    """A `tunesmith.toml` that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class AdapterConfig:
    type: str = "dora-rows"  # underfit's product default (its dashboard), not its config-layer lora
    rank: int = 16  # underfit's README default
    alpha: float | None = None  # None: alpha = rank (underfit)
    include: tuple[str, ...] = ()  # substrings of checkpoint-convention names; [i-j] ranges
    exclude: tuple[str, ...] = ()

    @property
    def scale_alpha(self) -> float:
        return float(self.rank if self.alpha is None else self.alpha)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    lr: float = 1e-4  # underfit's dashboard default
    batch_size: int = 1  # underfit defaults.ini
    seed: int = 42  # underfit
    grad_clip: float = 0.0  # off, as underfit; the dashboard passes 1.0
    timestep_sampler: str = "uniform"  # underfit's default
    cfg_dropout: float = 0.1  # underfit dit.py: whole cross-attention conditioning zeroed
    latent_crop_length: int = 1300  # underfit: sm-music/sfx ≈ 120 s
    checkpoint_every: int = 1000  # underfit
    eval_every: int = 100  # validation (and samples) cadence
    holdout: int | None = None  # None: a tenth of the items, 1 to 4
    trigger_probability: float = 0.8  # underfit prompt templates: trigger prepended 80%
    size: int = 1024  # images: the square side pictures are fitted to (SDXL's own 1024)
    cap: float | None = None  # GB the run may use; None: three quarters of the machine's


@dataclass(frozen=True)
class DemoConfig:
    """One demo render: the same prompt and seed with and without the adapter."""

    prompt: str = ""  # "{trigger}" is replaced by the run's trigger word
    seed: int = 42
    duration: float = 10.0  # seconds
    steps: int = 50  # underfit's demo_steps
    cfg: float = 7.0  # underfit's demo cfg scale
    strength: float = 1.0  # adapter strength for the adapter side


# The family's default demos: an empty prompt and one with the trigger word.
DEFAULT_DEMOS = ({"prompt": "", "seed": 42}, {"prompt": "{trigger}", "seed": 43})
MAX_DEMO_SECONDS = 600.0  # Stable Audio 3 is trained on up to 600 s (underfit's cap)


@dataclass(frozen=True)
class RunConfig:
    name: str
    family: str
    base_model: str
    trigger: str = ""
    adapter: AdapterConfig = field(default_factory=AdapterConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    demos: tuple[DemoConfig, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Family defaults, applied before the user's keys.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "stable-audio-3": {"base_model": "stable-audio-3", "adapter": {}, "train": {}},
    "sdxl": {"base_model": "sdxl", "adapter": {"type": "lora"}, "train": {}},
    "ace-step": {"base_model": "ace-step", "adapter": {"type": "lora"}, "train": {}},
}
FAMILY_FOR_MEDIA = {"audio": "stable-audio-3", "image": "sdxl"}
MEDIA_OF_FAMILY = {"stable-audio-3": "audio", "sdxl": "image", "ace-step": "audio"}
# Train keys a family has no use for: setting one is an error, not a silent no-op.
UNUSED_TRAIN_KEYS = {
    "sdxl": {"timestep_sampler", "cfg_dropout", "latent_crop_length", "trigger_probability"},
    "stable-audio-3": {"size"},
}


def load_runs(folder: Path, media_kind: str) -> list[RunConfig]:
    """The runs of a dataset: its `tunesmith.toml`, or one default run for its media."""
    path = folder / "tunesmith.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    _check_keys(document, {"runs", "dataset"}, str(path))  # [dataset]: tunesmith.dataset.settings
    if "runs" not in document:
        family = FAMILY_FOR_MEDIA[media_kind]
        return [resolve_run({"name": f"{family}-default", "family": family}, path, 0)]
    runs = document.get("runs", [])
    if not isinstance(runs, list) or not runs:
        raise ConfigError(f"{path}: expected one or more [[runs]] tables")
    resolved = [resolve_run(run, path, i) for i, run in enumerate(runs)]
    names = [r.name for r in resolved]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: run names must differ, got {names}")
    return resolved


def resolve_run(raw: dict[str, Any], path: Path, index: int) -> RunConfig:
    where = f"{path} [[runs]] #{index + 1}"
    _check_keys(raw, {f.name for f in fields(RunConfig)}, where)
    family = raw.get("family", "")
    if family not in FAMILIES:
        raise ConfigError(f"{where}: family must be one of {', '.join(FAMILIES)}, got {family!r}")
    defaults = FAMILY_DEFAULTS[family]
    adapter_raw = {**defaults["adapter"], **raw.get("adapter", {})}
    train_raw = {**defaults["train"], **raw.get("train", {})}
    _check_keys(adapter_raw, {f.name for f in fields(AdapterConfig)}, f"{where} adapter")
    _check_keys(train_raw, {f.name for f in fields(TrainConfig)}, f"{where} train")
    given = raw.get("train", {})
    unused = sorted(
        k
        for k in UNUSED_TRAIN_KEYS.get(family, set()) & set(given)
        if given[k] != getattr(TrainConfig, k)  # a resolved run carries every default
    )
    if unused:
        raise ConfigError(f"{where} train: {', '.join(unused)}: not used by the {family} family")
    for key in ("include", "exclude"):
        if key in adapter_raw:
            adapter_raw[key] = tuple(adapter_raw[key])
    demos = tuple(
        _demo(d, f"{where} demos #{i + 1}", str(raw.get("trigger", "")))
        for i, d in enumerate(raw.get("demos") or DEFAULT_DEMOS)
    )
    run = RunConfig(
        name=str(raw.get("name") or f"{family}-{index + 1}"),
        family=family,
        base_model=str(raw.get("base_model", defaults["base_model"])),
        trigger=str(raw.get("trigger", "")),
        adapter=AdapterConfig(**adapter_raw),
        train=TrainConfig(**train_raw),
        demos=tuple(dict.fromkeys(demos)),  # the defaults coincide when there is no trigger
    )
    _validate(run, where)
    return run


def _demo(raw: Any, where: str, trigger: str) -> DemoConfig:
    if isinstance(raw, DemoConfig):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table of demo settings, got {raw!r}")
    _check_keys(raw, {f.name for f in fields(DemoConfig)}, where)
    demo = DemoConfig(**{**raw, "prompt": str(raw.get("prompt", "")).replace("{trigger}", trigger)})
    problems = []
    if isinstance(demo.seed, bool) or not isinstance(demo.seed, int):
        problems.append(f"seed must be an integer, got {demo.seed!r}")
    if not isinstance(demo.duration, int | float) or not 0 < demo.duration <= MAX_DEMO_SECONDS:
        problems.append(f"duration must be in (0, {MAX_DEMO_SECONDS:.0f}] s, got {demo.duration!r}")
    if isinstance(demo.steps, bool) or not isinstance(demo.steps, int) or demo.steps < 1:
        problems.append(f"steps must be an integer ≥ 1, got {demo.steps!r}")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))
    return demo


def with_overrides(run: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Apply run-config overrides ({"train": {"steps": 10}, ...}) on top of a resolved run."""
    adapter = replace(run.adapter, **overrides.get("adapter", {}))
    train = replace(run.train, **overrides.get("train", {}))
    top = {k: v for k, v in overrides.items() if k not in ("adapter", "train")}
    updated = replace(run, adapter=adapter, train=train, **top)
    _validate(updated, f"overrides for run {run.name!r}")
    return updated


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _validate(run: RunConfig, where: str) -> None:
    a, t = run.adapter, run.train
    problems = []
    if a.type not in ADAPTER_TYPES:
        problems.append(f"adapter.type must be one of {', '.join(ADAPTER_TYPES)}, got {a.type!r}")
    if run.family == "sdxl" and (a.type != "lora" or a.include or a.exclude):
        problems.append(
            "the sdxl family trains adapter.type lora on every attention projection of the "
            "UNet (no include/exclude)"
        )
    if not isinstance(a.rank, int) or a.rank < 1:
        problems.append(f"adapter.rank must be an integer ≥ 1, got {a.rank!r}")
    if a.alpha is not None and a.alpha <= 0:
        problems.append(f"adapter.alpha must be > 0, got {a.alpha!r}")
    if not t.lr > 0:
        problems.append(f"train.lr must be > 0, got {t.lr!r}")
    for key in ("steps", "batch_size", "latent_crop_length", "checkpoint_every", "eval_every"):
        value = getattr(t, key)
        if not isinstance(value, int) or value < 1:
            problems.append(f"train.{key} must be an integer ≥ 1, got {value!r}")
    if t.timestep_sampler not in TIMESTEP_SAMPLERS:
        problems.append(
            f"train.timestep_sampler must be one of {', '.join(TIMESTEP_SAMPLERS)}, "
            f"got {t.timestep_sampler!r}"
        )
    if not 0 <= t.cfg_dropout < 1:
        problems.append(f"train.cfg_dropout must be in [0, 1), got {t.cfg_dropout!r}")
    if t.grad_clip < 0:
        problems.append(f"train.grad_clip must be ≥ 0 (0 = off), got {t.grad_clip!r}")
    if not isinstance(t.size, int) or t.size < 8 or t.size % 8:
        problems.append(f"train.size must be a positive multiple of 8, got {t.size!r}")
    if t.cap is not None and (
        isinstance(t.cap, bool) or not isinstance(t.cap, int | float) or not t.cap > 0
    ):
        problems.append(f"train.cap must be a number of gigabytes > 0, got {t.cap!r}")
    if t.holdout is not None and t.holdout < 0:
        problems.append(f"train.holdout must be ≥ 0, got {t.holdout!r}")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))


def base_model_folder(run: RunConfig, models_root: Path) -> Path:
    """The run's base model folder: absolute as given, else under the models root."""
    path = Path(run.base_model).expanduser()
    return path if path.is_absolute() else models_root / path


def media_kind(kinds: list[str]) -> str:
    """What a dataset holds, for the default family: audio if any item is audio."""
    return "audio" if "audio" in kinds else "image"


def dataset_runs(folder: Path) -> list[RunConfig]:
    """`load_runs` with the media kind read from the folder's file names."""
    from tunesmith.dataset.manifest import kind_of

    kinds = [kind_of(p) for p in folder.rglob("*") if not p.name.startswith(".")]
    return load_runs(folder, media_kind(kinds))

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
    [[runs.demos]]
    prompt = "{trigger}, a loop"

A run's `adapter`, `train` and `demos` tables are its family's sections: each family declares
their keys and defaults (`tunesmith/families/<family>/config.py`) on the shared ones here,
and checks its own values. Every key not given takes the family's default; an unknown key is
an error that lists the family's keys. The file's `[dataset]` table belongs to the labels
stage. Without `[[runs]]` (or without a `tunesmith.toml`), one run of the family that trains
the dataset's media by default, with its defaults. The resolved config is written beside
every adapter.

A build resolves the file once, in its first stage, into a `Plan`: each run with its family,
its resolved config and its key, and the notes resolving gave. The plan travels as a JSON
document (`Plan.as_document`, `Plan.from_document`) to the later stages and the training
process, which rebuild the same runs from it without resolving anything again.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from tunesmith import family as families
from tunesmith.dataset.metrics import MetricsError, read_metrics
from tunesmith.dataset.settings import SettingsError, read_settings
from tunesmith.store import content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.train import schema
from tunesmith.train.schema import Count, MinLen, NonNegative, Number, Positive, Seed, Whole


class ConfigError(ValueError):
    """A `tunesmith.toml` that cannot be used: one line per problem (`problems`), each naming
    the file, the run, the key, the value and what is allowed."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class AdapterConfig:
    """What every family's adapter section has."""

    type: str = "lora"  # each family allows its own types
    rank: Count = 16
    alpha: Positive | None = None  # None: alpha = rank

    @property
    def scale_alpha(self) -> float:
        return float(self.rank if self.alpha is None else self.alpha)


# The measures of a run's renders (tunesmith.quality.run) a run may keep its adapter by.
SELECT_MEASURES = ("prompt", "style", "style_dino", "frechet")
Measure = Literal["prompt", "style", "style_dino", "frechet"]
# `train.select`: "loss", one measure, or a table of measures and their weights.
Select = (
    Literal["loss", "prompt", "style", "style_dino", "frechet"]
    | Annotated[dict[Measure, Positive], MinLen(1)]
)


@dataclass(frozen=True)
class TrainConfig:
    """What every family's train section has."""

    steps: Count | None = 1000  # None only where the family's trainer sets the count
    lr: Positive = 1e-4
    batch_size: Count = 1
    seed: Seed = 42
    grad_clip: NonNegative = 0.0  # 0: off
    checkpoint_every: Count = 1000  # the full state (and the family's periodic files)
    eval_every: Count = 100  # validation (and samples) cadence
    # None: a tenth of the items, 1 to 4; 0: none, validation on training items
    # (tunesmith.train.holdout)
    holdout: Whole | None = None
    cap: Positive | None = None  # GB the run may use; None: three quarters of the machine's
    # Data-parallel training (docs/deploy.md, "Several GPUs"): processes per machine and
    # machines, passed to torchrun; rank 0's machine where there are several. Where the run
    # trains, not what: left out of the run's key and of the lineage in its files.
    devices: Count = 1
    nodes: Count = 1
    master_addr: str = ""  # host or host:port (port 29500 when not given)
    # Recompute each block's activations in the backward pass instead of keeping them: less
    # memory, about a third more time, the same gradients. "auto": on only where the run
    # would not fit its memory otherwise (tunesmith.train.footprint). How, not what: left out
    # of the run's key like the launch keys.
    gradient_checkpointing: Literal["auto"] | bool = "auto"
    # Which validation's adapter is kept as the run's best (`select_text` says it in words):
    # "loss", the lowest validation loss; a measure of that validation's demo renders
    # ("style", "prompt", "frechet", "style_dino"; tunesmith.quality.run), or a table of
    # measures and weights, {style = 0.7, prompt = 0.3}, each measure's gain over the base
    # model's renders weighed (tunesmith.quality.select). A measure keeps the step it prefers
    # among those that beat the base model's renders on it; where none does, the loss's choice.
    select: Select = "loss"


@dataclass(frozen=True)
class DemoConfig:
    """One demo render: the same prompt and seed with and without the adapter."""

    prompt: str = ""  # "{trigger}" is replaced by the run's trigger word
    seed: Seed = 42
    steps: Count = 50
    cfg: Number = 7.0
    strength: Number = 1.0  # adapter strength for the adapter side


@dataclass(frozen=True)
class RunConfig:
    name: str
    family: str
    base_model: str
    trigger: str = ""
    adapter: Any = None  # the family's adapter section (an AdapterConfig subclass)
    train: Any = None  # the family's train section (a TrainConfig subclass)
    demos: tuple = ()  # the family's demo sections

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


RUN_KEYS = {f.name for f in fields(RunConfig)}
LAUNCH_KEYS = ("devices", "nodes", "master_addr")  # train keys that say where, not what
HOW_KEYS = (*LAUNCH_KEYS, "gradient_checkpointing")  # ... or how, not what is trained


def world_size(train) -> int:
    """The training processes of a run: `train.devices` × `train.nodes`."""
    return train.devices * train.nodes


# Settings every family gained after runs were first keyed, at the default that trains and
# keeps as before: left out of a run's key and lineage while at it, as `ConfigSections.later`.
LATER = {"train": {"select": "loss"}}


def select_text(select: Any) -> str:
    """`train.select` in words: "loss", "style", "0.7 style + 0.3 prompt"."""
    if isinstance(select, dict):
        return " + ".join(f"{weight:g} {measure}" for measure, weight in select.items())
    return str(select)


def select_weights(select: Any) -> dict[str, float]:
    """The measures `train.select` keeps by, each with its weight ({} for "loss")."""
    if isinstance(select, dict):
        return {measure: float(weight) for measure, weight in select.items()}
    return {} if select == "loss" else {select: 1.0}


def computed(run: RunConfig) -> dict[str, Any]:
    """The run as a dict without the launch keys and gradient checkpointing: what determines
    the numbers it trains. A setting the family added later is left out while it holds the
    default that trains as before (`LATER`, `ConfigSections.later`)."""
    raw = asdict(run)
    raw["train"] = {k: v for k, v in raw["train"].items() if k not in HOW_KEYS}
    later = families.get(run.family).config.later or {}

    def kept(section: str, table: dict[str, Any]) -> dict[str, Any]:
        defaults = {**LATER.get(section, {}), **later.get(section, {})}
        return {k: v for k, v in table.items() if k not in defaults or v != defaults[k]}

    raw["adapter"] = kept("adapter", raw["adapter"])
    raw["train"] = kept("train", raw["train"])
    raw["demos"] = [kept("demo", demo) for demo in raw["demos"]]
    return raw


PLAN_VERSION = 1  # the plan document's layout
PLAN_FILE = "plan.json"  # the build's plan, in the dataset's output folder beside report.json


@dataclass(frozen=True)
class Plan:
    """A dataset's runs resolved once, and the notes resolving them gave (a run written in an
    older form). `runs` is empty while a file without `[[runs]]` waits for its media
    (`with_default`)."""

    runs: tuple[RunConfig, ...]
    notes: tuple[str, ...] = ()
    default: bool = False  # the file has no [[runs]]: one default run for the dataset's media

    def with_default(self, media_kind: str) -> Plan:
        """The plan with the default run for `media_kind` where the file names no runs."""
        if not self.default:
            return self
        family = families.for_media(media_kind).name
        run = resolve_run({"name": f"{family}-default", "family": family}, Path(), 0)
        return replace(self, runs=(run,), default=False)

    def as_document(self) -> dict[str, Any]:
        """The plan as JSON-ready data: each run with its family, its config and its key."""
        return {
            "version": PLAN_VERSION,
            "runs": [
                {"name": r.name, "family": r.family, "key": run_key(r), "config": run_document(r)}
                for r in self.runs
            ],
            "notes": list(self.notes),
            "default": self.default,
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Plan:
        if document.get("version") != PLAN_VERSION:
            raise ConfigError(
                f"a plan of layout {document.get('version')!r}; this tunesmith "
                f"reads {PLAN_VERSION}: build the dataset again"
            )
        runs = []
        for entry in document["runs"]:
            run = run_from_document(entry["config"])
            if run_key(run) != entry["key"]:
                raise ConfigError(
                    f"run {entry['name']}: the plan's config does not give its "
                    "key; build the dataset again"
                )
            runs.append(run)
        return cls(tuple(runs), tuple(document["notes"]), bool(document.get("default")))


def write_plan(out: Path, plan: Plan) -> Path:
    """The plan as `<out>/plan.json` (rewritten only when it changed: an unchanged build keeps
    its modification time)."""
    path = out / PLAN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(path, json_bytes(plan.as_document()))
    return path


def read_plan(out: Path) -> Plan:
    """The plan the build's first stage wrote (`write_plan`)."""
    path = out / PLAN_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no plan yet; the manifest stage writes it, build the "
            "dataset from its first stage"
        ) from None
    return Plan.from_document(document)


def run_document(run: RunConfig) -> dict[str, Any]:
    """A resolved run as JSON-ready data (tuples as lists); `run_from_document` reads it."""
    return _lists(asdict(run))


def run_from_document(document: dict[str, Any]) -> RunConfig:
    """The run `run_document` wrote, rebuilt as its family's sections without resolving it
    again (no defaults filled, no checks: it was resolved once)."""
    sections = families.get(document["family"]).config
    top = {k: v for k, v in document.items() if k not in ("adapter", "train", "demos")}
    return RunConfig(
        **top,
        adapter=sections.adapter(**_tuples(document["adapter"])),
        train=sections.train(**_tuples(document["train"])),
        demos=tuple(sections.demo(**_tuples(d)) for d in document["demos"]),
    )


def run_key(run: RunConfig) -> str:
    """The content key of a resolved run: its family and every setting."""
    return content_key(run=run_document(run))


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


def _tuples(table: dict[str, Any]) -> dict[str, Any]:
    """A section's values with its lists as tuples, as `_section` freezes them."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}


def load_plan(folder: Path) -> Plan:
    """The dataset's `tunesmith.toml` resolved once: every error is found here, every one of
    them (ConfigError, a line each). Without `[[runs]]` the plan waits for the dataset's media
    (`Plan.with_default`)."""
    path = folder / "tunesmith.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    found = [
        f"{path}: [{key}] is not a table of tunesmith.toml; it has [dataset], [metrics] "
        "and [[runs]]"
        for key in sorted(set(document) - {"runs", "dataset", "metrics"})
    ]
    try:
        read_settings(folder)  # [dataset]: the labels stage's, checked before any work too
    except SettingsError as exc:
        found.append(str(exc))
    metrics = None
    try:
        metrics = read_metrics(folder)  # [metrics]: the adapters stage's measures
    except MetricsError as exc:
        found.append(str(exc))
    if "runs" not in document:
        if found:
            raise ConfigError(found)
        return Plan((), default=True)
    runs = document["runs"]
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise ConfigError([*found, f"{path}: runs must be one or more [[runs]] tables"])
    notes: list[str] = []
    resolved = []
    for i, run in enumerate(runs):
        try:
            resolved.append(resolve_run(run, path, i, notes))
        except ConfigError as exc:
            found += exc.problems
    for run in resolved if metrics is not None else ():
        found += [f'{path}: run "{run.name}": {line}' for line in select_problems(run, metrics)]
    names = [r.name for r in resolved]
    if len(set(names)) != len(names):
        found.append(f"{path}: run names must differ, got {', '.join(names)}")
    if found:
        raise ConfigError(found)
    return Plan(tuple(resolved), tuple(notes))


def load_runs(folder: Path, media_kind: str) -> list[RunConfig]:
    """The runs of a dataset: its `tunesmith.toml`, or one default run for its media."""
    return list(load_plan(folder).with_default(media_kind).runs)


TOP_TYPES = {"name": str, "family": str, "base_model": str, "trigger": str}


def resolve_run(
    raw: dict[str, Any], path: Path, index: int, notes: list[str] | None = None
) -> RunConfig:
    """One `[[runs]]` table as its family's run, defaults filled in and checked: the types,
    ranges and allowed values of the family's schema (`tunesmith.train.schema`), then the
    checks across settings. A table in a form a family reads under another family's name
    (`ConfigSections.moved`) is read as that family's, and its note is added to `notes`."""
    name = raw.get("name")
    where = f'{path}: run "{name}"' if isinstance(name, str) else f"{path}: [[runs]] #{index + 1}"
    found = []
    for key, value in raw.items():
        if key not in RUN_KEYS:
            found.append(
                f"{where}: {key} is not a setting of a run; a run has {', '.join(sorted(RUN_KEYS))}"
            )
        elif key in TOP_TYPES and not isinstance(value, str):
            found.append(f"{where}: {key} = {schema.toml_text(value)}: must be a string")
    known = families.all_families()
    for candidate in known.values():
        moved = candidate.config.moved(raw) if candidate.config.moved else None
        if moved:
            raw, note = moved
            if notes is not None:
                notes.append(f"{path}: {note}")
            break
    family = known.get(raw.get("family", "")) if isinstance(raw.get("family"), str) else None
    if family is None:
        given = schema.toml_text(raw["family"]) if "family" in raw else "left out"
        names = ", ".join(schema.toml_text(k) for k in sorted(known))
        found.append(f"{where}: family = {given}: must be one of {names}")
        raise ConfigError(found)
    sections = family.config
    tables = {}
    for section, cls in (("adapter", sections.adapter), ("train", sections.train)):
        table = raw.get(section, {})
        if isinstance(table, dict):
            found += schema.problems(cls, table, where, section)
            tables[section] = table
        else:
            found.append(f"{where}: {section} = {schema.toml_text(table)}: must be a table")
    demos = raw.get("demos", [])
    demos = demos if demos != [] else list(sections.default_demos)  # none given: the family's
    if not isinstance(demos, list | tuple) or not all(isinstance(d, dict) for d in demos):
        found.append(f"{where}: demos = {schema.toml_text(demos)}: must be [[runs.demos]] tables")
        demos = []
    for i, demo in enumerate(demos):
        found += schema.problems(sections.demo, demo, where, f"demos[{i + 1}]")
    if found:
        raise ConfigError(found)
    trigger = raw.get("trigger", "")
    run = RunConfig(
        name=raw.get("name") or f"{family.name}-{index + 1}",
        family=family.name,
        base_model=raw.get("base_model", family.default_base_model),
        trigger=trigger,
        adapter=_section(sections.adapter, tables["adapter"]),
        train=_section(sections.train, tables["train"]),
        # the default demos coincide when there is no trigger
        demos=tuple(dict.fromkeys(_demo(sections.demo, d, trigger) for d in demos)),
    )
    run = sections.complete(run)
    found = checks_across(run)
    if found:
        raise ConfigError([f"{where}: {line}" for line in found])
    return run


def _section(cls: type, table: dict[str, Any]):
    """A checked table as its frozen section (lists as tuples)."""
    return cls(**_tuples(table))


def _demo(cls: type, table: dict[str, Any], trigger: str):
    demo = _section(cls, table)
    return replace(demo, prompt=demo.prompt.replace("{trigger}", trigger))


def checks_across(run: RunConfig) -> list[str]:
    """The checks of settings that hang together (the processes of a several-GPU run), then
    the family's own (`Family.config.problems`); each value's own type and range is the
    schema's, checked before."""
    return _launch_problems(run) + families.get(run.family).config.problems(run)


def select_problems(run: RunConfig, metrics) -> list[str]:
    """Why the run's `train.select` cannot be measured with the dataset's `[metrics]`
    (`tunesmith.dataset.metrics.MetricsSettings`), a line each; none for "loss". A named model
    folder that is missing is the adapters stage's to find (it knows the models root): it
    skips such a run before training, in one line."""
    weights = select_weights(run.train.select)
    if not weights:
        return []
    said = f"train.select = {schema.toml_text(run.train.select)}"
    media = families.get(run.family).media
    chosen = metrics.for_media(media)
    if not chosen:
        return [
            f"{said} keeps the adapter by a measure of its renders, and [metrics] enabled = "
            'false measures none: enable [metrics], or set train.select = "loss"'
        ]
    if "style_dino" in weights and media != "image":
        return [f"{said}: style_dino measures pictures (DINOv2); {run.family} renders audio"]
    if "style_dino" in weights and "dino" not in chosen:
        return [f'{said}: style_dino needs a DINOv2 model: name one in [metrics] dino = "..."']
    return []


def _launch_problems(run: RunConfig) -> list[str]:
    t, problems = run.train, []
    for key in ("devices", "nodes"):
        value = getattr(t, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"train.{key} must be an integer ≥ 1, got {value!r}")
    if problems:
        return problems
    if not isinstance(t.master_addr, str):
        problems.append(f"train.master_addr must be a host name, got {t.master_addr!r}")
    elif t.nodes > 1 and not t.master_addr:
        problems.append("train.nodes > 1 needs train.master_addr: the host of the node of rank 0")
    elif t.master_addr.count(":") == 1 and not t.master_addr.split(":")[1].isdigit():
        problems.append(f"train.master_addr must be host or host:port, got {t.master_addr!r}")
    world, family = world_size(t), families.get(run.family)
    if world > 1:
        shared = getattr(t, family.shared_batch, None)  # the items a step's ranks share
        if not family.data_parallel:
            problems.append(
                f"the {run.family} family trains on one process only: train.devices and "
                f"train.nodes must be 1, got {t.devices} and {t.nodes}"
            )
        elif isinstance(shared, int) and shared < world:
            problems.append(
                f"train.{family.shared_batch} ({shared}) must be at least train.devices × "
                f"train.nodes ({world}): every process takes a share of each step's items"
            )
    return problems


def base_model_folder(run: RunConfig, models_root: Path) -> Path:
    """The run's base model folder: absolute as given, else under the models root."""
    path = Path(run.base_model).expanduser()
    return path if path.is_absolute() else models_root / path


def media_kind(kinds: list[str]) -> str:
    """What a dataset holds, for the default family: audio if any item is audio."""
    return "audio" if "audio" in kinds else "image"

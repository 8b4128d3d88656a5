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
from typing import Any

from tunesmith import family as families
from tunesmith.store import content_key
from tunesmith.store.atomic import json_bytes, write_if_changed


class ConfigError(ValueError):
    """A `tunesmith.toml` that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class AdapterConfig:
    """What every family's adapter section has."""

    type: str = "lora"
    rank: int = 16
    alpha: float | None = None  # None: alpha = rank

    @property
    def scale_alpha(self) -> float:
        return float(self.rank if self.alpha is None else self.alpha)


@dataclass(frozen=True)
class TrainConfig:
    """What every family's train section has."""

    steps: int | None = 1000  # None only where the family's trainer sets the count
    lr: float = 1e-4
    batch_size: int = 1
    seed: int = 42
    grad_clip: float = 0.0  # off
    checkpoint_every: int = 1000  # the full state (and the family's periodic files)
    eval_every: int = 100  # validation (and samples) cadence
    holdout: int | None = None  # None: a tenth of the items, 1 to 4 (tunesmith.train.holdout)
    cap: float | None = None  # GB the run may use; None: three quarters of the machine's
    # Data-parallel training (docs/deploy.md, "Several GPUs"): processes per machine and
    # machines, passed to torchrun; rank 0's machine where there are several. Where the run
    # trains, not what: left out of the run's key and of the lineage in its files.
    devices: int = 1
    nodes: int = 1
    master_addr: str = ""  # host or host:port (port 29500 when not given)


@dataclass(frozen=True)
class DemoConfig:
    """One demo render: the same prompt and seed with and without the adapter."""

    prompt: str = ""  # "{trigger}" is replaced by the run's trigger word
    seed: int = 42
    steps: int = 50
    cfg: float = 7.0
    strength: float = 1.0  # adapter strength for the adapter side


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


def world_size(train) -> int:
    """The training processes of a run: `train.devices` × `train.nodes`."""
    return train.devices * train.nodes


def computed(run: RunConfig) -> dict[str, Any]:
    """The run as a dict without the launch keys: what determines the numbers it trains."""
    raw = asdict(run)
    raw["train"] = {k: v for k, v in raw["train"].items() if k not in LAUNCH_KEYS}
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
    """The dataset's `tunesmith.toml` resolved once: every error is found here. Without
    `[[runs]]` the plan waits for the dataset's media (`Plan.with_default`)."""
    path = folder / "tunesmith.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    _check_keys(document, {"runs", "dataset"}, str(path))  # [dataset]: tunesmith.dataset.settings
    if "runs" not in document:
        return Plan((), default=True)
    runs = document.get("runs", [])
    if not isinstance(runs, list) or not runs:
        raise ConfigError(f"{path}: expected one or more [[runs]] tables")
    notes: list[str] = []
    resolved = [resolve_run(run, path, i, notes) for i, run in enumerate(runs)]
    names = [r.name for r in resolved]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: run names must differ, got {names}")
    return Plan(tuple(resolved), tuple(notes))


def load_runs(folder: Path, media_kind: str) -> list[RunConfig]:
    """The runs of a dataset: its `tunesmith.toml`, or one default run for its media."""
    return list(load_plan(folder).with_default(media_kind).runs)


def resolve_run(
    raw: dict[str, Any], path: Path, index: int, notes: list[str] | None = None
) -> RunConfig:
    """One `[[runs]]` table as its family's run, defaults filled in and checked. A table in a
    form a family reads under another family's name (`ConfigSections.moved`) is read as that
    family's, and its note is added to `notes`."""
    where = f"{path} [[runs]] #{index + 1}"
    _check_keys(raw, RUN_KEYS, where)
    known = families.all_families()
    for candidate in known.values():
        moved = candidate.config.moved(raw) if candidate.config.moved else None
        if moved:
            raw, note = moved
            if notes is not None:
                notes.append(f"{path}: {note}")
            break
    family = known.get(raw.get("family", ""))
    if family is None:
        raise ConfigError(
            f"{where}: family must be one of {', '.join(sorted(known))}, got {raw.get('family')!r}"
        )
    sections = family.config
    trigger = str(raw.get("trigger", ""))
    adapter = _section(sections.adapter, raw.get("adapter", {}), f"{where} adapter")
    train = _section(sections.train, raw.get("train", {}), f"{where} train")
    demos = tuple(
        _demo(sections.demo, d, f"{where} demos #{i + 1}", trigger)
        for i, d in enumerate(raw.get("demos") or sections.default_demos)
    )
    run = RunConfig(
        name=str(raw.get("name") or f"{family.name}-{index + 1}"),
        family=family.name,
        base_model=str(raw.get("base_model", family.default_base_model)),
        trigger=trigger,
        adapter=adapter,
        train=train,
        demos=tuple(dict.fromkeys(demos)),  # the defaults coincide when there is no trigger
    )
    run = sections.complete(run)
    validate(run, where)
    return run


def _section(cls: type, raw: Any, where: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    _check_keys(raw, {f.name for f in fields(cls)}, where)
    lists = {k: tuple(v) for k, v in raw.items() if isinstance(v, list)}  # frozen: tuples
    return cls(**{**raw, **lists})


def _demo(cls: type, raw: Any, where: str, trigger: str):
    if isinstance(raw, cls):
        return raw
    demo = _section(cls, raw, where)
    demo = replace(demo, prompt=str(demo.prompt).replace("{trigger}", trigger))
    problems = []
    if isinstance(demo.seed, bool) or not isinstance(demo.seed, int):
        problems.append(f"seed must be an integer, got {demo.seed!r}")
    if isinstance(demo.steps, bool) or not isinstance(demo.steps, int) or demo.steps < 1:
        problems.append(f"steps must be an integer ≥ 1, got {demo.steps!r}")
    problems += demo.problems() if hasattr(demo, "problems") else []
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))
    return demo


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def validate(run: RunConfig, where: str) -> None:
    """The shared checks, then the family's own (`Family.config.problems`)."""
    a, t = run.adapter, run.train
    problems = []
    if isinstance(a.rank, bool) or not isinstance(a.rank, int) or a.rank < 1:
        problems.append(f"adapter.rank must be an integer ≥ 1, got {a.rank!r}")
    if a.alpha is not None and not a.alpha > 0:
        problems.append(f"adapter.alpha must be > 0, got {a.alpha!r}")
    if not t.lr > 0:
        problems.append(f"train.lr must be > 0, got {t.lr!r}")
    for key in ("steps", "batch_size", "checkpoint_every", "eval_every"):
        value = getattr(t, key)
        if key == "steps" and value is None:
            continue  # the family's trainer decides (an epoch horizon, for one)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"train.{key} must be an integer ≥ 1, got {value!r}")
    if t.grad_clip < 0:
        problems.append(f"train.grad_clip must be ≥ 0 (0 = off), got {t.grad_clip!r}")
    if t.cap is not None and (
        isinstance(t.cap, bool) or not isinstance(t.cap, int | float) or not t.cap > 0
    ):
        problems.append(f"train.cap must be a number of gigabytes > 0, got {t.cap!r}")
    holdout = t.holdout
    if holdout is not None and (type(holdout) is not int or holdout < 0):  # bool is no count
        problems.append(f"train.holdout must be an integer ≥ 0 (0: none), got {holdout!r}")
    problems += _launch_problems(run)
    problems += families.get(run.family).config.problems(run)
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))


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


def dataset_plan(folder: Path) -> Plan:
    """`load_plan` with the media kind read from the folder's file names (for the commands
    that check a dataset without building it; a build takes the kinds from its manifest)."""
    from tunesmith.dataset.manifest import kind_of  # here: the manifest module loads pandas

    plan = load_plan(folder)
    if not plan.default:
        return plan
    kinds = [kind_of(p) for p in folder.rglob("*") if not p.name.startswith(".")]
    return plan.with_default(media_kind(kinds))

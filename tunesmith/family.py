"""The family interface, and the registry the stages find the families in.

A family is one folder `tunesmith/families/<name>/` whose `__init__.py` defines
`FAMILY`, an instance of a `Family` subclass. The stages, the training process, the report
and the audition page ask the registry (`get`, `all_families`, `for_media`) and never name a
family. Families that live elsewhere (a plugin, a test) are modules named in the environment
variable `TUNESMITH_FAMILIES` (comma-separated), imported the same way.

A `Family`'s hooks import the family's heavy modules (torch, diffusers) when called, so
listing the families costs no model library. What a hook returns:

- `check_base_model(folder)`: raises ValueError naming every missing part, or returns.
- `encode(request)`: the `encoded` stage's work for this family's runs (an `EncodeRequest`),
  returning an object with `frame`, `keys` and `result` (a `StageResult`).
- `trainer(backend)`: a class whose instances are `tunesmith.train.trainer.Trainer`s, built
  as `cls(run, base_model, items, run_dir, placement, metadata)`.
- `other_models(run, base_model, fingerprint_cache, items)`: the models a run reads beside
  its base model (the planner LM of an `ace-step-planner` run), part → fingerprint; they key
  its training and its renders; {} for none. Given the run's encoded `items` (the adapters
  stage), it also says whether the run can train on them. A ValueError skips the run with
  its message.
- `renderer(run, base_model, placement, adapter)`: an object with `render(demo, strength)`
  (audio: float [channels, N] and a `sample_rate`; pictures: uint8 [H, W, 3]).
- `picture_size(run)` (image families): the side in pixels of the square pictures `run`
  renders.
- `warnings(run)`: lines on settings that will not do what a person expects (a warmup
  longer than the run); [] for none.
- `validate_files(path)`: checks an adapter file (and its twins) as the family's users' tools
  read it; returns the file's metadata (the lineage); raises ValueError.

Adding a family is the checklist in docs/design.md.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

ENV_FAMILIES = "TUNESMITH_FAMILIES"
STAGES_WITH_BACKENDS = ("encoded", "adapters", "renders")


@dataclass(frozen=True)
class EncodeRequest:
    """What the `encoded` stage hands a family: its runs and where everything is."""

    folder: Path  # the dataset
    labels: Any  # the labels stage's table (pandas DataFrame)
    runs: list  # this family's RunConfigs in the dataset
    base_models: list[Path]  # their base model folders, sorted, each once
    out: Path  # the dataset's output folder
    store: Any  # tunesmith.store.Store
    placement: Any  # tunesmith.backends.placement.Placement
    fingerprint_cache: Path
    workers: int = 1  # processes to encode on (the compute resource's `encode_workers`)


@dataclass(frozen=True)
class ConfigSections:
    """A family's `[runs.adapter]`, `[runs.train]` and `[[runs.demos]]` tables: the dataclasses
    that hold them (subclasses of those in tunesmith.train.config), the demos a run without any
    gets, and the family's own checks of the values (`problems(run)` → messages)."""

    adapter: type
    train: type
    demo: type
    # an empty prompt and the trigger word, each with its seed
    default_demos: tuple[dict, ...] = (
        {"prompt": "", "seed": 42},
        {"prompt": "{trigger}", "seed": 43},
    )
    check: Any = None  # (run) → list[str]
    # (run) → run: defaults that depend on other settings (an adapter type's own lr), filled
    # in before the checks; None: every default is the dataclasses' own.
    fill: Any = None
    # (raw [[runs]] table) → (this family's table, a note) for a table written in an older
    # form under another family's name, else None: such files keep working, with the note.
    moved: Any = None
    # Settings added after runs were first keyed, per section ("adapter", "train", "demo"),
    # with the default that trains as before: left out of what a run is keyed and labelled by
    # (`tunesmith.train.config.computed`) while at that default, so that a new setting does not
    # make every existing run train again into a new folder.
    later: Any = None

    def problems(self, run) -> list[str]:
        return list(self.check(run)) if self.check else []

    def complete(self, run):
        return self.fill(run) if self.fill else run


class Family:
    """The hooks a family implements (see the module docstring); class attributes say the rest."""

    name: str = ""  # as written in tunesmith.toml: family = "..."
    title: str = ""  # as people call the model, for messages
    media: str = ""  # "audio" or "image": what it trains on
    default_base_model: str = ""  # the base_model of a run that names none
    item_keys: tuple[str, ...] = ()  # encoded-table columns identifying a training item
    files_check: str = ""  # the name of the asset check of its adapter files
    backends: Mapping[str, frozenset[str]] = MappingProxyType({})  # stage → its backends
    default_for_media: bool = False  # the family a folder of its media trains without a config
    data_parallel: bool = False  # its trainers train on several processes (train.devices)
    one_process: frozenset[str] = frozenset()  # backends whose trainer trains on one process
    shared_batch: str = "batch_size"  # the train key counting the items a step's ranks share
    # The family whose `encoded` rows its runs train on ("": its own encoder). The encoded stage
    # hands that family's encoder these runs too, so one base model is encoded once.
    encoded_by: str = ""
    prompts_heading: str = ""  # the audition page's heading of its demos ("": "Demo prompts")
    config: ConfigSections  # its run sections

    def check_base_model(self, folder: Path) -> None:
        raise NotImplementedError

    def encode(self, request: EncodeRequest):
        raise NotImplementedError

    def trainer(self, backend: str) -> type:
        raise NotImplementedError

    def trains_on_ranks(self, backend: str) -> bool:
        """Whether its trainer on `backend` trains on several processes (`train.devices` ×
        `train.nodes` > 1)."""
        return self.data_parallel and backend not in self.one_process

    def other_models(self, run, base_model: Path, fingerprint_cache=None, items=None) -> dict:
        return {}

    def renderer(self, run, base_model: Path, placement, adapter: Path):
        raise NotImplementedError

    def picture_size(self, run) -> int:
        raise NotImplementedError

    def memory(self, run, base_model: Path, dtype, items=None):
        """What the estimate of a run's peak memory needs (a
        `tunesmith.train.footprint.MemoryModel`, built on the `meta` device at `dtype`), or
        None where the family does not estimate (its runs are then not fitted). `items`: the
        run's encoded rows where known (the adapters stage), else None (`tunesmith check`)."""
        return None

    def warnings(self, run) -> list[str]:
        """What the run's settings will do that a person would not guess, a line each
        (`tunesmith check` and `run` print them; none stops the run)."""
        return []

    def trained_settings(self, run) -> dict:
        """The run's settings as its trainer uses them (a default the trainer fills in, such
        as alpha = rank, shown as its value, not as "null"): the audition page and the report
        show these."""
        from dataclasses import asdict

        return asdict(run)

    def files_for_tools(self, run, best: Path) -> list[tuple[str, Path]]:
        """Which file of the run's best adapter (`best`, the path the adapters table names) each
        tool a person loads it with takes, as (the tool and how it loads it, the file); the
        build's summary and the report list them."""
        return [("tunesmith", best)]

    def validate_files(self, path: str | Path) -> dict[str, str]:
        raise NotImplementedError

    def validated_files(self, path: str | Path, record: Path | None = None) -> dict[str, str]:
        """`validate_files(path)`, run once per state of the file and those beside it when
        `record` is given (`tunesmith.store.verdicts`): the check imports torch, which a build
        that computes nothing need not. The adapters' file check and the audition pages'
        lineage share the verdict."""
        from tunesmith.store import verdicts

        return verdicts.checked_files(
            record, f"{self.name} files", path, lambda: self.validate_files(path)
        )

    def backends_for(self, stage: str) -> frozenset[str]:
        return frozenset(self.backends.get(stage, ()))

    @property
    def encoder(self) -> str:
        """The name of the family whose encoder encodes this family's runs."""
        return self.encoded_by or self.name

    def __repr__(self) -> str:
        return f"<family {self.name}>"


_registry: dict[str, Family] | None = None


FAMILIES_PACKAGE = "tunesmith.families"


def _discover() -> dict[str, Family]:
    # Found at run time, by name: this module sits below the families, which import it.
    package = importlib.import_module(FAMILIES_PACKAGE)
    found_here = pkgutil.iter_modules(package.__path__)
    modules = [f"{FAMILIES_PACKAGE}.{m.name}" for m in found_here if m.ispkg]
    modules += [m.strip() for m in os.environ.get(ENV_FAMILIES, "").split(",") if m.strip()]
    found: dict[str, Family] = {}
    for name in modules:
        family = getattr(importlib.import_module(name), "FAMILY", None)
        if isinstance(family, Family):
            if family.name in found:
                raise ValueError(f"two families are called {family.name!r} ({name})")
            found[family.name] = family
    return found


def all_families() -> dict[str, Family]:
    """Every family, by name (built once per process)."""
    global _registry
    if _registry is None:
        _registry = _discover()
    return _registry


def get(name: str) -> Family:
    families = all_families()
    if name not in families:
        raise KeyError(f"no family {name!r}; known: {', '.join(sorted(families))}")
    return families[name]


def for_media(media: str) -> Family:
    """The family a dataset of this media trains by default (the first registered one)."""
    for family in all_families().values():
        if family.media == media and family.default_for_media:
            return family
    raise KeyError(f"no family trains on {media} by default")

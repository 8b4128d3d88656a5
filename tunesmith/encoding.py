"""The `encoded` stage's loop, the same for every family: a family supplies an item encoder.

Per base model the family's `ItemEncoder` (built from the base model folder; a ValueError skips the
base model's items with its message) says how one item is keyed, batched, encoded, published
and put in the table; `encode` does the rest, in this order:

1. keys: each item's entry under each distinct `setting` of the runs (a run's settings that
   change the latents, SDXL's `size`; None for a family that has none), so two runs that
   differ there train on entries of their own;
2. what the store lacks, one item per key (`batches.missing`: two files with the same bytes
   are encoded once);
3. batches: the encoder's `plan` of the missing items, by default items of one `shape` within
   the placement's memory budget (`tunesmith.backends.batches`); the plan is made from what the
   items say before anything is decoded (Stable Audio 3: the files' headers);
4. the work: with `workers` ≤ 1 here; else over that many processes (`dataset.workers.pool`),
   batch j to process j mod n, so that each batch is the one a single process encodes and the
   entries are one process's bytes. A process decodes the items of its own batches (each item
   is decoded once, by the process that encodes it), loads the model once for all its tasks
   (`kept`, on its own GPU where there are several) and writes the entries into the store.
   Within a batch the decoded items go to the encoder in groups of one `together` value (a
   clip whose header gave a length it does not decode to); a group that runs out of device
   memory is halved (`batches.halving`). An item that cannot be decoded is skipped by name;
5. each item's entry value (`value.json`), its counts and warnings; then its published files
   (`publish`): an entry found damaged while read or published is evicted, encoded again alone
   and read again (`Store.provide`);
6. the texts: what each row needs encoded besides its item (`texts`, per run where the
   family's rows depend on the run), each distinct text once, batched and shared out the
   same way as the items (`text_encoder`);
7. the rows (`row`), the base model's own files (`finish`), and one `Encoded`: the table, the
   store keys it uses (the gc roots) and a `StageResult` whose `warnings` are a list.

The model is loaded only when something is missing, and then (with workers > 1) only in the
worker processes: a build that finds everything in the store imports no torch.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tunesmith import progress
from tunesmith.backends import batches
from tunesmith.dataset.workers import deal, kept, pool, process_device
from tunesmith.media.sniff import MediaError
from tunesmith.report import Skipped, StageResult
from tunesmith.store import DamagedEntry, Store, content_key
from tunesmith.store.fingerprints import model_fingerprint

Writer = Callable[[Path], None]  # fills an entry's temporary folder


@dataclass
class Encoded:
    """The `encoded` stage's answer for one family."""

    frame: pd.DataFrame  # one row per encoded item and base model (and run, where rows are per run)
    result: StageResult
    keys: list[str]  # store entries used (gc roots)


@dataclass(frozen=True, eq=False)
class Unit:
    """One entry to make: its key, the labels row or text it is made from, the setting."""

    key: str
    item: Any
    setting: Hashable = None


class BatchEncoder:
    """How one kind of entry is made in batches. The defaults: every unit of one shape, costing
    nothing (the item cap alone bounds a batch), decoded as it is."""

    max_items: int | None = None  # None: batches.MAX_ITEMS (read when planning)

    def shape(self, unit: Unit) -> Hashable:
        return None

    def cost(self, unit: Unit) -> int:
        return 0

    def plan(self, todo: list[Unit], budget: int) -> list[list[Unit]]:
        """The batches of the missing units `todo`, within `budget` bytes of activations."""
        cap = self.max_items or batches.MAX_ITEMS
        return batches.plan(todo, self.shape, self.cost, budget, cap)

    def decode(self, model: Callable[[], Any], unit: Unit) -> Any:
        """What the encoder takes of `unit` (a picture's pixels, a clip's samples); raises
        MediaError where it cannot be used. `model()` loads the model on first call."""
        return unit.item

    def together(self, decoded: Any) -> Hashable:
        """Decoded units of a batch with the same value go to the model in one call."""
        return None

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        """One call of the model over `decoded`; per unit, what writes its entry."""
        raise NotImplementedError

    def out_of_memory(self) -> type[BaseException]:
        import torch

        return torch.OutOfMemoryError


class ItemEncoder(BatchEncoder):
    """A family's encoder for one base model: its items are label rows of `media`.

    Subclasses take (base_model, request) and raise ValueError for a base model they cannot
    use; they must pickle (they travel to the worker processes) and define `key`, `load`,
    `encode`, `row` and `columns`, and for texts `text_encoder`, `texts` and `text_key`.
    """

    family: str = ""  # the family's name, in the data version
    media: str = ""  # the labels' `kind` of its items
    columns: tuple[str, ...] = ()  # the table's columns
    # Its columns that say where a file lies (in the store, under the outputs): left out of
    # the data version, which the keys and the published files' text already cover, so that
    # the same entries give the same version in any store.
    places: tuple[str, ...] = ()
    by_path: bool = False  # items in the order of their paths (else the labels')
    per_run: bool = False  # its rows depend on the run: one per run and item, with `run`
    texts_counted: str = ""  # the result's counts of texts ("captions": captions_cached, ...)
    text_encoder: BatchEncoder | None = None  # how its texts are made; None: it has none

    def __init__(self, base_model: Path, request) -> None:
        self.base_model, self.folder = Path(base_model), Path(request.folder)
        self.placement, self.device = request.placement, request.placement.device
        self.store: Store = request.store
        self.fingerprint_cache = request.fingerprint_cache
        self.notes: list[str] = []  # warnings about the base model, said once

    def fingerprint(self, part: str) -> str:
        """The fingerprint of one part of the base model (`vae`, `text_encoder`, …)."""
        return model_fingerprint(self.base_model / part, self.fingerprint_cache)

    def load(self, device: str) -> Any:
        """The model, on `device`: imports torch and the model library."""
        raise NotImplementedError

    @staticmethod
    def setting(run) -> Hashable:
        """What of `run` changes its items' entries (it is in their keys); raises ValueError
        for a value no item can be encoded with."""
        return None

    def key(self, item: dict, setting: Hashable) -> str:
        raise NotImplementedError

    def warnings(self, unit: Unit, value: Any) -> list[str]:
        """The warnings of an entry's value, each naming its file."""
        return list(value.get("warnings", []))

    def prepare(self, run, units: list[tuple[Unit, Any]], skipped: list[Skipped]) -> dict:
        """What each item of `run` trains on beside its entry (path → anything), from the units
        that encoded and their values; an item left out is skipped (in `skipped`). `run` is
        None where the rows do not depend on the run."""
        return {unit.item["path"]: None for unit, _ in units}

    def texts(self, unit: Unit, value: Any, prepared: Any) -> dict[str, Hashable]:
        """The texts its row needs encoded, by name."""
        return {}

    def text_key(self, text: Hashable) -> str:
        raise NotImplementedError

    def publish(self, unit: Unit, value: Any, prepared: dict[str | None, Any]) -> str:
        """Copy the entry out and write what goes beside it (`prepared`: per run name, what
        `prepare` gave); returns what it wrote as text, for the data version. Raises
        DamagedEntry where the store finds the entry damaged."""
        return ""

    def row(self, unit: Unit, value: Any, run, prepared: Any, texts: dict[str, str]) -> dict:
        """The table's row of `unit` (for `run` where rows are per run); `texts`: name → key."""
        raise NotImplementedError

    def finish(self, store: Store, out: Path, units: list[tuple[Unit, Any]]) -> tuple[list, str]:
        """The base model's own files once its items are encoded: (the store keys they use,
        what was written as text)."""
        return [], ""


@dataclass
class _Counts:
    cached: int = 0
    computed: int = 0
    texts_cached: int = 0
    texts_computed: int = 0


def encode(request, make: type[ItemEncoder]) -> Encoded:
    """Encode the items of `request.labels` for every base model of `request` (an
    `EncodeRequest`) with the item encoders `make(base_model, request)`."""
    start = time.perf_counter()
    kind = make.media
    items = request.labels[request.labels["kind"] == kind]
    items = (items.sort_values("path") if make.by_path else items).to_dict("records")
    runs = list(request.runs) if make.per_run else [None]
    rows, keys, skipped, warnings, outputs, counts = [], [], [], [], [], _Counts()
    settings = {_name(run): make.setting(run) for run in runs}  # its errors come before any work
    for base_model in map(Path, request.base_models):
        try:
            encoder = make(base_model, request)
        except ValueError as exc:
            skipped += [Skipped(item["path"], str(exc)) for item in items]
            continue
        warnings += encoder.notes
        base = _Base(encoder, request, counts, skipped, warnings)
        with pool(request.workers) as processes:
            base.processes = processes
            units = base.items(items, list(dict.fromkeys(settings.values())))
            prepared = {
                _name(run): encoder.prepare(
                    run, [u for u in units if u[0].setting == settings[_name(run)]], skipped
                )
                for run in runs
            }
            units = base.publish(units, prepared, outputs)
            base.texts(units, runs, settings, prepared)
        for run in runs:
            for unit, value in units:
                mine = prepared[_name(run)]
                if unit.setting == settings[_name(run)] and unit.item["path"] in mine:
                    names = base.text_names(unit, value, mine[unit.item["path"]])
                    rows.append(encoder.row(unit, value, run, mine[unit.item["path"]], names))
        keys += [unit.key for unit, _ in units] + list(base.text_keys.values())
        if units:
            finished, written = encoder.finish(request.store, request.out, units)
            keys += finished
            outputs.append(written)
    frame = pd.DataFrame(rows, columns=list(make.columns))
    keys = sorted(set(keys))
    extra: dict[str, Any] = {}
    if make.texts_counted:
        extra[f"{make.texts_counted}_cached"] = counts.texts_cached
        extra[f"{make.texts_counted}_computed"] = counts.texts_computed
    if warnings:
        extra["warnings"] = list(dict.fromkeys(warnings))
    described = frame.drop(columns=list(make.places)).to_dict("records")
    version = content_key(
        stage="encoded", family=make.family, keys=keys, rows=described, outputs=outputs
    )
    result = StageResult(
        stage="encoded",
        data_version=version,
        items=len(items) * len(request.base_models),
        cached=counts.cached,
        computed=counts.computed,
        skipped=list(dict.fromkeys(skipped)),
        seconds=time.perf_counter() - start,
        extra=extra,
    )
    return Encoded(frame, result, keys)


def _name(run) -> str | None:
    return None if run is None else run.name


class _Base:
    """One base model's work: its encoder, the model (loaded on first use only), the worker
    processes (`workers.pool`; None: none) and the text entries it used."""

    def __init__(self, encoder: ItemEncoder, request, counts, skipped, warnings) -> None:
        self.encoder, self.request, self.store = encoder, request, request.store
        self.counts, self.skipped, self.warnings = counts, skipped, warnings
        self.model = functools.cache(lambda: encoder.load(encoder.device))
        self.processes = None
        self.text_keys: dict[Hashable, str] = {}  # text → its entry

    def items(self, items: list[dict], settings: list[Hashable]) -> list[tuple[Unit, Any]]:
        """(unit, its entry's value) of every item and setting that encodes."""
        encoder = self.encoder
        units = [Unit(encoder.key(i, s), i, s) for s in settings for i in items]
        todo = batches.missing(units, lambda u: u.key, self.store.has)
        failed, made = self.make(encoder, todo)
        first = {id(unit) for unit in todo}  # the unit of each key made now
        done = []
        for unit in units:
            if unit.key in failed and failed[unit.key][0] == unit.item["path"]:
                self.skipped.append(Skipped(unit.item["path"], failed[unit.key][1]))
                continue
            try:
                value, built = self.store.provide(unit.key, self.alone(encoder, unit), self.value)
            except MediaError as exc:
                self.skipped.append(Skipped(unit.item["path"], str(exc)))
                continue
            built = built or (unit.key in made and id(unit) in first)
            self.counts.computed += built
            self.counts.cached += not built
            self.warnings += encoder.warnings(unit, value)
            done.append((unit, value))
        return done

    def value(self, key: str) -> Any:
        value = self.store.read_json(key)
        if value is None:
            raise DamagedEntry(f"{self.store.path(key)}: damaged; evicted, it is computed again")
        return value

    def publish(self, units, prepared: dict, outputs: list[str]) -> list[tuple[Unit, Any]]:
        """Each unit's published files (once per path and setting); those that encode."""
        kept_units = []
        for unit, value in units:
            mine = {
                run: p[unit.item["path"]] for run, p in prepared.items() if unit.item["path"] in p
            }
            publish = functools.partial(self.encoder.publish, unit, value, mine)
            try:
                written, _ = self.store.provide(
                    unit.key, self.alone(self.encoder, unit), lambda key, p=publish: p()
                )
            except MediaError as exc:
                self.skipped.append(Skipped(unit.item["path"], str(exc)))
                continue
            outputs.append(written)
            kept_units.append((unit, value))
        return kept_units

    def texts(self, units, runs, settings, prepared) -> None:
        """Every distinct text the rows need, encoded where the store lacks it."""
        part = self.encoder.text_encoder
        if part is None:
            return
        wanted: dict[str, Unit] = {}
        for run in runs:
            mine = prepared[_name(run)]
            for unit, value in units:
                if unit.setting == settings[_name(run)] and unit.item["path"] in mine:
                    for text in self.encoder.texts(unit, value, mine[unit.item["path"]]).values():
                        key = self.encoder.text_key(text)
                        wanted.setdefault(key, Unit(key, text))
        todo = [unit for key, unit in wanted.items() if not self.store.has(key)]
        _, made = self.make(part, todo)  # a text always decodes: nothing fails
        for key, unit in wanted.items():
            built = self.store.make(key, self.alone(part, unit)) or key in made
            self.counts.texts_computed += built
            self.counts.texts_cached += not built
            self.text_keys[unit.item] = key

    def text_names(self, unit: Unit, value: Any, prepared: Any) -> dict[str, str]:
        texts = self.encoder.texts(unit, value, prepared)
        return {name: self.text_keys[text] for name, text in texts.items()}

    def make(self, part: BatchEncoder, todo: list[Unit]) -> tuple[dict, set[str]]:
        """The entries of `todo`, in the encoder's batches, here or on the worker processes:
        (key → (path, reason) of each that could not be used, the keys made)."""
        if not todo:
            return {}, set()
        planned = part.plan(todo, batches.memory_budget(self.request.placement))
        which = "text" if part is self.encoder.text_encoder else "item"
        with progress.work("encoding texts" if which == "text" else "encoding", len(todo)) as tick:
            if self.processes is None:
                return encode_batches(part, self.model, planned, self.store, tick)
            shares = deal(planned, self.request.workers)
            tasks = [
                (self.encoder, which, share, self.store.root, number)
                for number, share in enumerate(shares)
            ]
            failed, made = {}, set()
            for part_failed, part_made in self.processes(_encode_share, tasks):
                failed.update(part_failed)
                made |= part_made
            tick(len(todo))
            return failed, made

    def alone(self, part: BatchEncoder, unit: Unit) -> Writer:
        """What writes `unit`'s entry by itself, here (an entry found missing or damaged)."""

        def write(tmp: Path) -> None:
            [writer] = part.encode(self.model, [part.decode(self.model, unit)])
            writer(tmp)

        return write


def _encode_share(task) -> tuple[dict, set[str]]:
    """One worker process's batches into the store (see `encode_batches`); the process loads
    the model for its first task and keeps it for the rest."""
    encoder, which, share, root, number = task
    model = kept(
        (type(encoder).__module__, str(encoder.base_model)),
        lambda: functools.cache(lambda: encoder.load(process_device(encoder.device, number))),
    )
    part = encoder.text_encoder if which == "text" else encoder
    return encode_batches(part, model, share, Store(root))


def encode_batches(
    part: BatchEncoder,
    model: Callable[[], Any],
    planned: list[list[Unit]],
    store: Store,
    tick: Callable[[int], None] = lambda n: None,
) -> tuple[dict, set[str]]:
    """Decode and encode each batch of `planned` into the store: (key → (path, reason) of each
    unit that could not be decoded, the keys written). `tick(n)` after each batch."""
    failed: dict[str, tuple[str, str]] = {}
    made: set[str] = set()
    for batch in planned:
        decoded = []
        for unit in batch:
            try:
                decoded.append((unit, part.decode(model, unit)))
            except MediaError as exc:
                failed[unit.key] = (unit.item["path"], str(exc))
        for group in _groups(part, decoded):
            for pairs, writers in _halving(part, model, group):
                for (unit, _), writer in zip(pairs, writers, strict=True):
                    with store.writing(unit.key) as tmp:
                        writer(tmp)
                    made.add(unit.key)
        tick(len(batch))
    return failed, made


def _groups(part: BatchEncoder, decoded: list[tuple[Unit, Any]]) -> list[list[tuple[Unit, Any]]]:
    groups: dict[Hashable, list[tuple[Unit, Any]]] = {}
    for pair in decoded:
        groups.setdefault(part.together(pair[1]), []).append(pair)
    return list(groups.values())


def _halving(part: BatchEncoder, model, group) -> Iterator[tuple[list, list[Writer]]]:
    run = lambda pairs: part.encode(model, [d for _, d in pairs])  # noqa: E731
    yield from batches.halving(run, group, part.out_of_memory())

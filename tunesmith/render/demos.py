"""Stage `renders`: each run's demo prompts, with and without its best adapter.

Per run and demo, two renders with the same prompt, seed, steps and guidance: the base model
(the adapter at strength 0, which is the base bit for bit) and the best adapter at the demo's
strength. Audio families write a 16-bit WAV, peak-normalised and cut to the demo's duration
(underfit's demo format), an MP3 beside it where ffmpeg is present (`-q:a 0`) and a
spectrogram PNG; image families write the picture as a PNG at the size the family renders
the run at (`Family.picture_size`). Both write a JSON sidecar with every setting. Renders are
cached in the store under the base model's fingerprint, the adapter file's hash, the demo and
the placement (and, for a Stable Audio 3 demo on the ARC model, the run's `train.arc_model`):
an unchanged adapter and demo list renders nothing again. A renderer's `details()` adds to the
sidecar (a planner's plan; `model` "ARC" for a render on the ARC model, which the audition page
labels).

`RunRenders` (one run's renderer, its files and sidecar) and `publish` (a render's files under
the names people open) are the one write path: `tunesmith render`
(`tunesmith/render/adhoc.py`) renders its prompts through them too, outside the store.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith import family as families
from tunesmith.backends.placement import Placement
from tunesmith.media.writers import mp3_from_wav, wav_bytes, write_png
from tunesmith.report import StageResult
from tunesmith.store import (
    VALUE,
    DamagedEntry,
    Store,
    canonical_json,
    content_key,
    sha256_file,
)
from tunesmith.store.atomic import write_if_changed
from tunesmith.train.config import RunConfig

if TYPE_CHECKING:
    import pandas as pd

STAGE_VERSION = 1
SIDES = ("base", "adapter")
COLUMNS = ["run", "demo", "side", "prompt", "seed", "wav", "mp3", "spectrogram", "image", "sidecar"]
# A render's files as `RunRenders.into` names them, and the suffix each is published under.
MEDIA = (
    ("audio.wav", ".wav"),
    ("audio.mp3", ".mp3"),
    ("spectrogram.png", ".png"),
    ("image.png", ".png"),
)
NO_FFMPEG = "ffmpeg not found: WAV only, no MP3"


@dataclass
class Renders:
    frame: pd.DataFrame
    result: StageResult
    keys: list[str]


def build_renders(
    runs: list[tuple[RunConfig, dict]],
    base_fingerprints: dict[str, str],
    out: Path,
    store: Store,
    placements: dict[str, Placement],
    renderer: Callable[[RunConfig, Path], object],
) -> Renders:
    """Render every demo of every (run, adapters-table row) pair.

    `placements` maps a family to where it renders. `renderer(run, adapter_path)` makes an
    object with `render(demo, strength)` (audio: float [2, N] at its `sample_rate`; images:
    uint8 [H, W, 3]); it is called only when something is missing from the store.
    """
    # Imported here: `tunesmith render` writes through this module and makes no table, and
    # pandas would be 0.4 s of its start.
    import pandas as pd

    start = time.perf_counter()
    rows, keys, notes = [], [], []
    cached = computed = 0
    mp3_ok = shutil.which("ffmpeg") is not None
    if not mp3_ok and any(families.get(run.family).media == "audio" for run, _ in runs):
        notes.append(NO_FFMPEG)
    for run, trained in runs:
        placement = placements[run.family]
        render = RunRenders(run, trained, placement, renderer, mp3_ok)
        for i, demo in enumerate(run.demos):
            for side in SIDES:
                strength = 0.0 if side == "base" else demo.strength
                media = {"size": render.size} if render.image else {"mp3": mp3_ok}
                # Which ARC model a demo with `arc = true` renders on; other keys stay as they
                # were before ARC demos, so their renders stay cached.
                arc = {"arc_model": run.train.arc_model} if getattr(demo, "arc", False) else {}
                key = content_key(
                    stage="renders",
                    version=STAGE_VERSION,
                    family=run.family,
                    base=base_fingerprints[run.name],
                    adapter=render.adapter_sha if strength else None,
                    demo={**asdict(demo), "strength": strength},
                    placement=placement.as_dict(),
                    **media,
                    **arc,
                )
                folder = out / "renders" / run.name / side
                # Both functions run inside this iteration (no late-binding of the loop).
                row, built = store.provide(
                    key,
                    lambda tmp: render.into(tmp, demo, side, strength),  # noqa: B023
                    lambda k: _publish(store, k, folder, run, i),  # noqa: B023
                )
                computed += built
                cached += not built
                keys.append(key)
                rows.append(row)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    result = StageResult(
        stage="renders",
        data_version=content_key(stage="renders", keys=keys),
        items=len(rows),
        cached=cached,
        computed=computed,
        seconds=time.perf_counter() - start,
        extra={"notes": notes} if notes else {},
    )
    return Renders(frame, result, keys)


class RunRenders:
    """One run's renders: the family's renderer, made on first use only (a run whose renders
    are all cached loads no model) and kept for every render after it.

    `trained` is the run's row of the adapters table, or any mapping with its `best_path` (the
    adapter file rendered) and `best_step` (its training step, written in the sidecar).
    """

    def __init__(self, run: RunConfig, trained: dict, placement, renderer, mp3_ok: bool) -> None:
        self.run, self.trained, self.placement = run, trained, placement
        self.renderer, self.mp3_ok, self.made = renderer, mp3_ok, None
        self.adapter = Path(trained["best_path"])
        family = families.get(run.family)
        self.image = family.media == "image"
        self.size = family.picture_size(run) if self.image else None

    @functools.cached_property
    def adapter_sha(self) -> str:
        """The adapter file's hash, for the store's keys (a render outside the store needs
        none)."""
        return sha256_file(self.adapter)

    def into(self, tmp: Path, demo, side: str, strength: float) -> None:
        """Render one side of one demo into the folder `tmp` (the store's temporary entry, or
        `tunesmith render`'s own): its media files (`MEDIA`) and its sidecar (`VALUE`)."""
        run = self.run
        self.made = self.made or self.renderer(run, self.adapter)
        rendered = self.made.render(demo, strength)
        if self.image:
            settings = {"width": self.size, "height": self.size}
        else:
            settings = {"duration": demo.duration}
            if getattr(demo, "lyrics", ""):  # a family whose demos sing
                settings["lyrics"] = demo.lyrics
        sidecar = {
            "prompt": demo.prompt,
            "seed": demo.seed,
            **settings,
            "steps": demo.steps,
            "cfg": demo.cfg,
            "side": side,
            "adapter": str(self.adapter) if strength else None,
            "strength": strength,
            "training_step": int(self.trained["best_step"]),
            "family": run.family,
            "placement": str(self.placement),
            "run": run.name,
        }
        # A renderer may say more about what it rendered (a planner's plan: codes, metas).
        details = getattr(self.made, "details", None)
        sidecar.update(details() if details else {})
        if self.image:
            write_png(rendered, tmp / "image.png")
        else:
            _write_audio(tmp, rendered, self.made.sample_rate, self.mp3_ok)
            # A renderer may render the same thing a second way (a plan through the DiT).
            extra = getattr(self.made, "extra_audio", None)
            for name, samples in (extra() if extra else {}).items():
                (tmp / f"extra-{name}.wav").write_bytes(wav_bytes(samples, self.made.sample_rate))
                sidecar.setdefault("extra_audio", []).append(name)
        (tmp / VALUE).write_text(canonical_json(sidecar), encoding="utf-8")


def _write_audio(tmp: Path, samples, sample_rate: int, mp3_ok: bool) -> None:
    from tunesmith.render.spectrogram import spectrogram_png

    (tmp / "audio.wav").write_bytes(wav_bytes(samples, sample_rate))
    if mp3_ok:
        mp3_from_wav(tmp / "audio.wav", tmp / "audio.mp3")
    spectrogram_png(samples, sample_rate, tmp / "spectrogram.png")


def _publish(store: Store, key: str, folder: Path, run: RunConfig, index: int) -> dict:
    """Copy a render out of the store as `<folder>/demo<index>.<ext>` with its JSON sidecar."""
    sidecar = store.read_json(key)
    if sidecar is None:
        raise DamagedEntry(
            f"{store.path(key)}: its sidecar was damaged; evicted, it is computed again"
        )
    paths = publish(
        store.path(key),
        folder / f"demo{index}",
        sidecar,
        lambda name, target: store.publish(key, name, target),
    )
    return {
        "run": run.name,
        "demo": f"demo{index}",
        "side": sidecar["side"],
        "prompt": sidecar["prompt"],
        "seed": sidecar["seed"],
        "wav": paths.get(".wav"),
        "mp3": paths.get(".mp3"),
        "sidecar": paths[".json"],
        "spectrogram": paths[".png"] if ".wav" in paths else None,
        "image": None if ".wav" in paths else paths[".png"],
    }


def publish(
    entry: Path, stem: Path, sidecar: dict, copy: Callable[[str, Path], object]
) -> dict[str, str]:
    """A render's files, as `RunRenders.into` left them in `entry`, under the names people
    open: `<stem>.wav`, `.mp3`, `.png` (the spectrogram, or the picture), `<stem>.<name>.wav`
    for each extra rendering, and `<stem>.json`, the sidecar indented. `copy(name, target)`
    puts the file `name` of `entry` at `target` (the store copies and checks its hash; a render
    outside the store moves its own). Returns each suffix with the path written."""
    paths = {}
    for name, suffix in MEDIA:
        if (entry / name).exists():
            copy(name, _beside(stem, suffix))
            paths[suffix] = str(_beside(stem, suffix))
    for name in sidecar.get("extra_audio", []):  # `<stem>.<name>.wav` beside the render
        copy(f"extra-{name}.wav", _beside(stem, f".{name}.wav"))
        paths[f".{name}.wav"] = str(_beside(stem, f".{name}.wav"))
    target = _beside(stem, ".json")
    write_if_changed(target, (json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n").encode())
    paths[".json"] = str(target)
    return paths


def _beside(stem: Path, suffix: str) -> Path:
    # Not `with_suffix`: a stem may hold a dot of its own (`…-s0.5`).
    return stem.with_name(stem.name + suffix)

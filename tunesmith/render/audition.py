"""The audition page of a run: one self-contained HTML file beside its renders.

Per demo prompt the base and adapter renders sit side by side: for an audio family a player
and a spectrogram per side, for an image family the picture. Below them the
validation-loss curve (inline SVG), the resolved config and the lineage. Everything is
inline (CSS, JS, SVG; the strings are in `audition_assets`): the page opens from `file://`
and fetches nothing but the renders it names, by relative path. Without JavaScript it is the
plain side-by-side view; with it, a blind mode shows each pair as A and B in an order drawn
in the browser, hides which is which (labels, alt text and, for audio, the spectrograms)
until Reveal, records the pick per prompt in localStorage and exports the picks as JSON
(`window.tunesmithExport()` returns the same JSON string).

`page` holds title, run, dataset, family and prompts; optionally validation (a list of
{step, loss}) with best_step, best_loss and base_loss, validation_note, config, lineage and
notes. A prompt holds id, prompt, seed, steps, cfg, base and adapter, and for audio also
duration (seconds) and optionally lyrics (sung text, shown under the prompt). A side is one
of two kinds, the same kind throughout a page:

    {"audio": "renders/base/demo0.wav", "spectrogram": "renders/base/demo0.png"}
    {"image": "renders/base/demo0.png"}

each a path relative to the page's folder, plus the adapter side's optional strength and
step (shown in its label) and, for a planner's plan, `plan` ({codes, seconds, metas, and
optionally dit_audio: the codes rendered through the DiT}: shown under the side). Which model
drew a side is read from its render's sidecar, the `.json` beside its audio or picture (the
renders stage publishes one with every render): `model` "ARC" for a demo rendered on the ARC
model (Stable Audio 3's `arc = true`), labelled so on the side and under the prompt; a render
without a sidecar, or whose sidecar names no model, is the base model's.
`prompts_heading` replaces the section's "Demo prompts". An image must be a PNG; its pixel
size comes from its header.

Optional parts, each left out of the page where the key is absent:

- `quality`: the run's measures per step (`tunesmith.quality.run`'s `quality.json`: `steps`
  [{step, prompt, style, style_dino, frechet}], `floor`, `references`, `on_training_items`)
  with `verdict` ({beats, learned}) and `kept_step`: one plot per measure beside the loss
  curve (the base model at step 0, every checkpoint, the kept one ringed) and their table;
- `pair_measures`: {prompt id: {measure: {"base": value, "adapter": value}}}, the measures of
  that pair's own two renders; the page says which side each prefers (hidden in blind mode
  until Reveal, as the labels are);
- `ratings`: the blind choices handed back (`tunesmith.render.ratings`): {step (the adapter's
  step on this page), drop (the folder to put an exported file in, relative to the page),
  command, checkpoints [{step, adapter, base, same, choices, adapter_share, files, prompts}],
  skipped [lines]}: a table per checkpoint, the current one's counts under each prompt
  (hidden in blind mode);
- `step` (the adapter's training step) and `run_folder` (the run's folder name): written on
  the page and into the exported choices, so a file handed back names its checkpoint.

The export (`FORMAT`, "tunesmith-audition-choices/1") holds format, title, run, dataset,
family, fingerprint, step, run_folder, session (drawn per blind session, so a later export of
the same session replaces its earlier choices instead of adding to them), exported_at,
revealed, summary and prompts [{id, prompt, a, b, choice, chosen}].

The same `page` dict gives the same bytes. Not handled: video, or a page mixing audio and
image pairs.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import struct
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tunesmith.quality.run import HIGHER_IS_BETTER, MEASURES
from tunesmith.render.audition_assets import BLIND_HINTS, CSS, JS, TOOLBAR
from tunesmith.render.curve import curve_svg
from tunesmith.store.atomic import write_if_changed

SIDES = ("base", "adapter")
# The media keys of a side, by kind; a side holds exactly one kind's keys.
MEDIA = {"audio": ("audio", "spectrogram"), "image": ("image",)}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ARC = "ARC"  # a render sidecar's `model` for a render on the ARC model
FORMAT = "tunesmith-audition-choices/1"  # what the page's Export choices writes
# A quality measure in a person's words, and which way is better.
MEASURE_NAMES = {
    "prompt": "prompt similarity",
    "style": "style similarity",
    "style_dino": "style similarity (DINOv2)",
    "frechet": "Fréchet distance",
}


def write_audition_page(path: Path, page: dict) -> Path:
    """Write the audition page for `page` (see the module docstring) to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)  # "../renders/…" resolves through it
    write_if_changed(path, audition_html(page, path.parent).encode("utf-8"))
    return path


def audition_html(page: dict, folder: Path) -> str:
    """The page as a string; media paths in `page` are relative to `folder` and must exist."""
    prompts = _require(page, "prompts", "page")
    ids = [_require(p, "id", f"prompts[{i}]") for i, p in enumerate(prompts)]
    if len(set(ids)) != len(ids):
        raise ValueError(f"audition page: prompt ids {ids} repeat; expected unique ids")
    kind = _page_kind(prompts)
    fingerprint = _fingerprint(prompts, folder, kind)
    head = {
        name: _esc(_require(page, name, "page")) for name in ("title", "run", "dataset", "family")
    }
    attrs = " ".join(f'data-{name}="{value}"' for name, value in head.items())
    step = page.get("step", page.get("best_step"))
    if step is not None:
        attrs += f' data-step="{int(step)}"'
    if page.get("run_folder"):
        attrs += f' data-run-folder="{_esc(page["run_folder"])}"'
    meta = " · ".join(f"{name} <b>{head[name]}</b>" for name in ("run", "dataset", "family"))
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',  # no favicon request
        f"<title>{head['title']}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        f'<body {attrs} data-kind="{kind}" data-fingerprint="{fingerprint}">',
        f"<header><h1>{head['title']}</h1><p class=meta>{meta}</p></header>",
        TOOLBAR.format(hint=BLIND_HINTS[kind]),
        "<main>",
        f'<section id="prompts"><h2>{_esc(page.get("prompts_heading") or "Demo prompts")}</h2>',
        *(_prompt_html(i, p, folder, kind, page) for i, p in enumerate(prompts)),
        "</section>",
        _validation_html(page),
        _quality_html(page.get("quality")),
        _ratings_html(page.get("ratings")),
        _tables_html(page),
        _notes_html(page.get("notes") or []),
        "</main>",
        f"<script>{JS}</script>",
        "</body></html>",
        "",
    ]
    return "\n".join(parts)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _require(entry: dict, key: str, where: str) -> Any:
    if key not in entry:
        raise ValueError(f"audition page: {where} has no {key!r}")
    return entry[key]


def _side_kind(entry: Any, where: str) -> str:
    """Which kind of render a side holds, "audio" or "image", from its media keys."""
    if not isinstance(entry, dict):
        raise ValueError(f"audition page: {where} is {entry!r}; expected a dict")
    kinds = [kind for kind, keys in MEDIA.items() if any(key in entry for key in keys)]
    if len(kinds) != 1:
        held = [key for keys in MEDIA.values() for key in keys if key in entry]
        found = f"both kinds of media {held}" if kinds else "neither kind of media"
        raise ValueError(
            f"audition page: {where} has {found}; expected 'audio' and 'spectrogram' "
            "(an audio render) or 'image' (an image render)"
        )
    return kinds[0]


def _page_kind(prompts: list[dict]) -> str:
    """The one kind of side on the page; audio when there are no prompts."""
    first: dict[str, str] = {}  # kind -> where it was first seen
    for i, prompt in enumerate(prompts):
        for side in SIDES:
            where = f"prompts[{i}].{side}"
            kind = _side_kind(_require(prompt, side, f"prompts[{i}]"), where)
            first.setdefault(kind, where)
            if len(first) > 1:
                other = next(k for k in first if k != kind)
                raise ValueError(
                    f"audition page: {where} is an {kind} side but {first[other]} is an "
                    f"{other} side; expected one kind on a page"
                )
    return next(iter(first), "audio")


def _media_src(entry: dict, key: str, where: str, folder: Path) -> str:
    """A media path as an escaped relative URL, after checking the file is there."""
    rel = str(_require(entry, key, where))
    if rel.startswith(("/", "\\")) or ":" in rel:
        raise ValueError(f"audition page: {where}.{key} = {rel!r}; expected a relative path")
    if not (folder / rel).is_file():
        raise ValueError(f"audition page: {where}.{key} = {rel!r}; no such file in {folder}")
    return _esc(quote(rel, safe="/"))


def _png_size(folder: Path, rel: str, where: str) -> tuple[int, int]:
    """Width and height from a PNG's header (the signature, then IHDR as the first chunk)."""
    with open(folder / rel, "rb") as file:
        header = file.read(24)
    if len(header) < 24 or header[:8] != PNG_SIGNATURE or header[12:16] != b"IHDR":
        raise ValueError(f"audition page: {where}.image = {rel!r}; expected a PNG file")
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def page_fingerprint(page: dict, folder: Path) -> str:
    """The fingerprint the page carries (and its exported choices name): a hash of its
    prompts, their settings and their media's bytes."""
    prompts = _require(page, "prompts", "page")
    return _fingerprint(prompts, folder, _page_kind(prompts))


def _fingerprint(prompts: list[dict], folder: Path, kind: str) -> str:
    """What is judged: settings and media bytes. A new one starts a fresh session."""
    digest = hashlib.sha256(json.dumps(prompts, sort_keys=True, default=str).encode())
    for i, prompt in enumerate(prompts):
        for side in SIDES:
            for key in MEDIA[kind]:
                _media_src(prompt[side], key, f"prompts[{i}].{side}", folder)
                digest.update((folder / prompt[side][key]).read_bytes())
    return digest.hexdigest()[:16]


def _side_html(side: str, entry: dict, label: str, where: str, folder: Path, kind: str) -> str:
    if kind == "audio":
        audio = _media_src(entry, "audio", where, folder)
        image = _media_src(entry, "spectrogram", where, folder)
        alt = f"spectrogram, {side}"
        media = (
            f'<audio controls preload="metadata" src="{audio}"></audio>'
            f'<img class="spectrogram" src="{image}" alt="{alt}" data-alt="{alt}">'
        )
    else:
        image = _media_src(entry, "image", where, folder)
        width, height = _png_size(folder, entry["image"], where)
        alt = f"picture, {side}"
        # width and height reserve the box before the file loads; CSS caps it at the column
        media = (
            f'<img class="picture" src="{image}" width="{width}" height="{height}" '
            f'alt="{alt}" data-alt="{alt}">'
        )
    return (
        f'<figure class="side {side}" data-side="{side}">'
        f'<figcaption><span class="blind-label"></span>'
        f'<span class="label">{_esc(label)}</span></figcaption>{media}{_plan_html(entry)}'
        "</figure>"
    )


def _plan_html(entry: dict) -> str:
    """A planner side's plan: how many codes (and seconds) it wrote, and its <think> metas."""
    plan = entry.get("plan")
    if not isinstance(plan, dict):
        return ""
    metas = plan.get("metas") or {}
    lines = "\n".join(f"{k}: {v}" for k, v in sorted(metas.items())) or "(no metas)"
    length = f"{float(plan.get('seconds', 0.0)):g}"
    dit = ""
    if plan.get("dit_audio"):
        src = _esc(quote(str(plan["dit_audio"]), safe="/"))
        dit = (
            f'<p class="settings">the same codes through the DiT:</p>'
            f'<audio controls preload="metadata" src="{src}"></audio>'
        )
    return (
        f'<div class="plan"><p class="settings">{_esc(plan.get("codes", 0))} codes · '
        f"{_esc(length)} s</p>"
        f'<pre class="metas">&lt;think&gt;\n{_esc(lines)}\n&lt;/think&gt;</pre>{dit}</div>'
    )


def _drawn_by(entry: dict, folder: Path, kind: str) -> str | None:
    """The `model` the sidecar beside a side's render names (`<stem>.json`), or None."""
    media = folder / entry[MEDIA[kind][0]]
    try:
        sidecar = json.loads(media.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no sidecar (a page made by hand), or not JSON
        return None
    return sidecar.get("model") if isinstance(sidecar, dict) else None


def _settings_html(prompt: dict, where: str, folder: Path, kind: str) -> str:
    """The line under a prompt: what both sides were rendered with."""
    seed, steps = _require(prompt, "seed", where), _require(prompt, "steps", where)
    cfg = _require(prompt, "cfg", where)
    if kind == "audio":
        size = f"{_require(prompt, 'duration', where):g} s"
    else:
        sizes = {s: _png_size(folder, prompt[s]["image"], f"{where}.{s}") for s in SIDES}
        size = " vs ".join(dict.fromkeys(f"{w}×{h}" for w, h in sizes.values())) + " px"
    # The model both sides were drawn on, said where it is the ARC model (no side's label,
    # which blind mode hides, is needed to know it).
    on_arc = any(_drawn_by(prompt[s], folder, kind) == ARC for s in SIDES)
    model = " · ARC model, ping-pong sampler" if on_arc else ""
    return (
        f'<p class="settings">id <code>{_esc(prompt["id"])}</code> · seed {_esc(seed)} · '
        f"{_esc(size)} · {_esc(steps)} steps · cfg {_esc(f'{cfg:g}')}{model}</p>"
    )


def _lyrics_html(prompt: dict) -> str:
    """The sung text of an audio demo that has one; nothing otherwise."""
    lyrics = prompt.get("lyrics")
    return f'<pre class="lyrics">{_esc(lyrics)}</pre>' if lyrics else ""


def _prompt_html(index: int, prompt: dict, folder: Path, kind: str, page: dict) -> str:
    where = f"prompts[{index}]"
    pid, text = prompt["id"], _require(prompt, "prompt", where)
    adapter = prompt["adapter"]
    shown = _esc(text) if text else "<i>(empty prompt)</i>"
    on_arc = {side: _drawn_by(prompt[side], folder, kind) == ARC for side in SIDES}
    labels = {
        "base": "ARC model" if on_arc["base"] else "Base model",
        "adapter": f"Adapter{' on the ARC model' if on_arc['adapter'] else ''} · step "
        f"{adapter.get('step', '?')} · strength {adapter.get('strength', '?')}",
    }
    sides = "".join(
        _side_html(side, prompt[side], label, f"{where}.{side}", folder, kind)
        for side, label in labels.items()
    )
    choices = "".join(
        f'<button type="button" data-choice="{value}" aria-pressed="false">{name}</button>'
        for value, name in (("A", "A"), ("B", "B"), ("same", "No difference"))
    )
    return (
        f'<article class="prompt" data-prompt-id="{_esc(pid)}" data-prompt="{_esc(text)}">'
        f"<h3>{shown}</h3>{_lyrics_html(prompt)}{_settings_html(prompt, where, folder, kind)}"
        f'<div class="pair">{sides}</div>'
        f"{_pair_measures_html((page.get('pair_measures') or {}).get(pid))}"
        f"{_listeners_html(page.get('ratings'), pid)}"
        f'<div class="choice" role="group" aria-label="Which do you prefer?">'
        f"<span>Preferred:</span>{choices}</div>"
        f"</article>"
    )


SIDE_WORDS = {"base": "the base model", "adapter": "the adapter", "neither": "neither"}


def _pair_measures_html(measured: dict | None) -> str:
    """Which side of one pair each measure prefers, with both values; nothing where the
    pair's renders were not measured."""
    if not measured:
        return ""
    parts = []
    for name in MEASURES:
        values = measured.get(name)
        if not values or not all(_finite(values.get(side)) for side in SIDES):
            continue
        base, adapter = float(values["base"]), float(values["adapter"])
        better = adapter > base if HIGHER_IS_BETTER[name] else adapter < base
        worse = adapter < base if HIGHER_IS_BETTER[name] else adapter > base
        side = "adapter" if better else "base" if worse else "neither"
        parts.append(
            f'<span class="prefers" data-measure="{name}" data-prefers="{side}">'
            f"{_esc(MEASURE_NAMES[name])}: <b>{SIDE_WORDS[side]}</b> "
            f"({adapter:.3f} adapter, {base:.3f} base)</span>"
        )
    if not parts:
        return ""
    return f'<p class="measures">Measures prefer: {" · ".join(parts)}</p>'


def _listeners_html(ratings: dict | None, pid: str) -> str:
    """The choices handed back for this prompt at the page's checkpoint; nothing without."""
    if not ratings:
        return ""
    current = next(
        (c for c in ratings.get("checkpoints", []) if c["step"] == ratings.get("step")), None
    )
    counts = (current or {}).get("prompts", {}).get(pid)
    if not counts:
        return ""
    return (
        f'<p class="listeners" data-prompt-id="{_esc(pid)}">Blind choices handed back: '
        f"adapter {counts.get('adapter', 0)} · base {counts.get('base', 0)} · "
        f"no difference {counts.get('same', 0)}</p>"
    )


def _percent(loss: float, base_loss: float) -> str:
    return f"{(loss - base_loss) / base_loss * 100:+.1f}%" if base_loss else "–"


def _validation_html(page: dict) -> str:
    points = [(int(p["step"]), float(p["loss"])) for p in page.get("validation") or []]
    for step, loss in points:
        if not math.isfinite(loss):
            raise ValueError(f"audition page: validation loss at step {step} is {loss}")
    note = _esc(page.get("validation_note", ""))
    if not points:
        return (
            '<section id="validation"><h2>Validation loss</h2>'
            f"<p>No measurements. {note}</p></section>"
        )
    best_step, best_loss = int(page["best_step"]), float(page["best_loss"])
    base_loss = float(page["base_loss"])
    rows = "".join(
        f"<tr{' class=best' if s == best_step else ''}><td>{'base' if i == 0 else s}</td>"
        f"<td>{v:.4f}</td><td>{_percent(v, base_loss)}</td></tr>"
        for i, (s, v) in enumerate(points)
    )
    return (
        '<section id="validation"><h2>Validation loss</h2>'
        f'<p class="summary">base {base_loss:.4f} → best {best_loss:.4f} at step {best_step} '
        f"({_percent(best_loss, base_loss)}). <span class=muted>{note}</span></p>"
        f'<div class="curve-and-table">{_loss_curve(points, best_step, best_loss)}'
        f'<table class="numbers"><thead><tr><th>step</th><th>loss</th><th>vs base</th></tr>'
        f"</thead><tbody>{rows}</tbody></table></div></section>"
    )


def _loss_curve(points: list[tuple[int, float]], best_step: int, best_loss: float) -> str:
    return curve_svg(
        points,
        (best_step, best_loss),
        label="loss",
        title="validation loss by training step",
    )


def _quality_html(quality: dict | None) -> str:
    """One plot per measure taken (the base model at step 0, every checkpoint, the kept
    adapter ringed), the verdict and the table; nothing where the run was not measured."""
    # A value that is not a finite number (a measure with nothing to compare with) is left
    # out as if not taken: a page is still written.
    rows = [
        {k: v for k, v in row.items() if k == "step" or _finite(v)}
        for row in sorted((quality or {}).get("steps") or [], key=lambda row: int(row["step"]))
    ]
    measured = [m for m in MEASURES if any(m in row for row in rows)]
    if not measured:
        return ""
    kept_step = int(quality.get("kept_step", -1))
    floor = quality.get("floor")
    figures = []
    for name in measured:
        points = [(int(r["step"]), float(r[name])) for r in rows if name in r]
        kept = next(((s, v) for s, v in points if s == kept_step), None)
        reference = None
        if name == "frechet" and isinstance(floor, int | float):
            reference = (float(floor), f"the dataset's own halves: {floor:.4g}")
        way = "higher" if HIGHER_IS_BETTER[name] else "lower"
        figures.append(
            f'<figure class="plot" data-measure="{name}"><figcaption>{MEASURE_NAMES[name]} '
            f'<span class="muted">({way} is better)</span></figcaption>'
            + curve_svg(
                points,
                kept,
                label=MEASURE_NAMES[name],
                title=f"{MEASURE_NAMES[name]} by training step",
                kept_label="kept",
                reference=reference,
                css_class="measure",
            )
            + "</figure>"
        )
    head = "".join(f"<th>{MEASURE_NAMES[m]}</th>" for m in measured)
    body = "".join(
        f"<tr{' class=best' if int(r['step']) == kept_step else ''}>"
        f"<td>{'base' if int(r['step']) == 0 else int(r['step'])}</td>"
        + "".join(f"<td>{float(r[m]):.4f}</td>" if m in r else "<td>–</td>" for m in measured)
        + "</tr>"
        for r in rows
    )
    return (
        '<section id="quality"><h2>Quality measures</h2>'
        f"{_verdict_html(quality, measured, kept_step)}"
        f'<p class="muted">{_esc(_quality_note(quality))}</p>'
        f'<div class="plots">{"".join(figures)}</div>'
        f'<table class="numbers quality"><thead><tr><th>step</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></section>"
    )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _verdict_html(quality: dict, measured: list[str], kept_step: int) -> str:
    verdict = quality.get("verdict") or {}
    steps = {int(row["step"]) for row in quality.get("steps") or []}
    if kept_step not in steps:
        return f'<p class="summary">The kept adapter (step {kept_step}) was not measured.</p>'
    beats = [MEASURE_NAMES[m] for m in measured if m in (verdict.get("beats") or [])]
    if verdict.get("learned") is False or not beats:
        return (
            f'<p class="summary warn">The kept adapter (step {kept_step}) beats the base model '
            "on no measure of its renders: listen or look before using it.</p>"
        )
    return (
        f'<p class="summary">The kept adapter (step {kept_step}) beats the base model on '
        f"{_esc(', '.join(beats))}.</p>"
    )


def _quality_note(quality: dict) -> str:
    references = len(quality.get("references") or [])
    held = (
        f"the {references} training item(s), none being held out"
        if quality.get("on_training_items")
        else f"the {references} held-out item(s)"
    )
    floor = quality.get("floor")
    dashed = ", the dashed line the dataset's between its own halves" if floor is not None else ""
    return (
        "The demo renders of every validation (step 0: the base model), measured with "
        f"{', '.join(sorted(quality.get('models') or {})).upper() or 'embedding models'}: "
        f"prompt similarity is each render's to its prompt; style similarity, to {held}; the "
        f"Fréchet distance is the renders' to all the dataset's items (lower is closer){dashed}."
    )


def _ratings_html(ratings: dict | None) -> str:
    """The blind choices handed back, per checkpoint; how to hand some back where none were.
    Nothing where the page was given no `ratings`."""
    if ratings is None:
        return ""
    how = (
        f"In blind mode, Export choices, then run <code>{_esc(ratings.get('command', ''))}</code>"
        f" or put the file in <code>{_esc(ratings.get('drop', ''))}</code>; the next build "
        "counts it (a file handed back twice counts once)."
    )
    skipped = "".join(f"<li>{_esc(line)}</li>" for line in ratings.get("skipped") or [])
    skipped = f'<ul class="skipped">{skipped}</ul>' if skipped else ""
    checkpoints = ratings.get("checkpoints") or []
    if not checkpoints:
        return (
            '<section id="ratings"><h2>Blind choices</h2>'
            f"<p>None handed back yet. {how}</p>{skipped}</section>"
        )
    current = ratings.get("step")
    rows = "".join(
        f"<tr{' class=best' if c['step'] == current else ''}><td>{c['step']}</td>"
        f"<td>{c['adapter']}</td><td>{c['base']}</td><td>{c['same']}</td>"
        f"<td>{c['choices']}</td><td>{_share(c.get('adapter_share'))}</td>"
        f"<td>{c.get('files', 0)}</td></tr>"
        for c in checkpoints
    )
    return (
        '<section id="ratings"><h2>Blind choices</h2>'
        f'<p class="muted">Listeners\' picks handed back, per adapter step (this page shows '
        f"step {_esc(current)}). {how}</p>"
        '<table class="numbers ratings"><thead><tr><th>step</th><th>adapter</th><th>base</th>'
        "<th>no difference</th><th>choices</th><th>prefer the adapter</th><th>files</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>{skipped}</section>"
    )


def _share(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.0f}%"


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        items = []
        for key, inner in value.items():
            items += _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return items
    return [(prefix, value)]


def _kv_table(mapping: dict) -> str:
    if not mapping:
        return '<p class="muted">none given</p>'
    rows = "".join(
        f"<tr><th>{_esc(key)}</th>"
        f"<td>{_esc(v if isinstance(v, str) else json.dumps(v, default=str))}</td></tr>"
        for key, v in _flatten(mapping)
    )
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _tables_html(page: dict) -> str:
    return (
        '<section id="config"><h2>Resolved run config</h2>'
        f"{_kv_table(page.get('config') or {})}</section>"
        '<section id="lineage"><h2>Lineage</h2>'
        f"{_kv_table(page.get('lineage') or {})}</section>"
    )


def _notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{_esc(n)}</li>" for n in notes)
    return f'<section id="notes"><h2>Notes</h2><ul>{items}</ul></section>'

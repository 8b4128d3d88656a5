"""The audition page of a run: one self-contained HTML file beside its renders.

Per demo prompt the base and adapter renders play side by side with their spectrograms;
below them the validation-loss curve (inline SVG), the resolved config and the lineage.
Everything is inline (CSS, JS, SVG): the page opens from `file://` and fetches nothing but
the renders it names, by relative path. Without JavaScript it is the plain side-by-side
view; with it, a blind mode shows each pair as A and B in an order drawn in the browser,
records the listener's pick per prompt in localStorage and exports the picks as JSON
(`window.tunesmithExport()` returns the same JSON string).

The same `page` dict gives the same bytes. Not handled: images (the players are audio).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tunesmith.store.atomic import atomic_write_text

SVG_WIDTH, SVG_HEIGHT = 640, 260
MARGIN = {"left": 64, "right": 24, "top": 28, "bottom": 44}


def write_audition_page(path: Path, page: dict) -> Path:
    """Write the audition page for `page` (see the module docstring) to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)  # "../renders/…" resolves through it
    atomic_write_text(path, audition_html(page, path.parent))
    return path


def audition_html(page: dict, folder: Path) -> str:
    """The page as a string; media paths in `page` are relative to `folder` and must exist."""
    prompts = _require(page, "prompts", "page")
    ids = [_require(p, "id", f"prompts[{i}]") for i, p in enumerate(prompts)]
    if len(set(ids)) != len(ids):
        raise ValueError(f"audition page: prompt ids {ids} repeat; expected unique ids")
    fingerprint = _fingerprint(prompts, folder)
    head = {
        name: _esc(_require(page, name, "page")) for name in ("title", "run", "dataset", "family")
    }
    attrs = " ".join(f'data-{name}="{value}"' for name, value in head.items())
    meta = " · ".join(f"{name} <b>{head[name]}</b>" for name in ("run", "dataset", "family"))
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',  # no favicon request
        f"<title>{head['title']}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        f'<body {attrs} data-fingerprint="{fingerprint}">',
        f"<header><h1>{head['title']}</h1><p class=meta>{meta}</p></header>",
        _TOOLBAR,
        "<main>",
        '<section id="prompts"><h2>Demo prompts</h2>',
        *(_prompt_html(i, p, folder) for i, p in enumerate(prompts)),
        "</section>",
        _validation_html(page),
        _tables_html(page),
        _notes_html(page.get("notes") or []),
        "</main>",
        f"<script>{_JS}</script>",
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


def _media_src(entry: dict, key: str, where: str, folder: Path) -> str:
    """A media path as an escaped relative URL, after checking the file is there."""
    rel = str(_require(entry, key, where))
    if rel.startswith(("/", "\\")) or ":" in rel:
        raise ValueError(f"audition page: {where}.{key} = {rel!r}; expected a relative path")
    if not (folder / rel).is_file():
        raise ValueError(f"audition page: {where}.{key} = {rel!r}; no such file in {folder}")
    return _esc(quote(rel, safe="/"))


def _fingerprint(prompts: list[dict], folder: Path) -> str:
    """What the listener hears: settings and media bytes. A new one starts a fresh session."""
    digest = hashlib.sha256(json.dumps(prompts, sort_keys=True, default=str).encode())
    for i, prompt in enumerate(prompts):
        for side in ("base", "adapter"):
            entry = _require(prompt, side, f"prompts[{i}]")
            for key in ("audio", "spectrogram"):
                _media_src(entry, key, f"prompts[{i}].{side}", folder)
                digest.update((folder / entry[key]).read_bytes())
    return digest.hexdigest()[:16]


def _prompt_html(index: int, prompt: dict, folder: Path) -> str:
    where = f"prompts[{index}]"
    pid, text = _require(prompt, "id", where), _require(prompt, "prompt", where)
    seed, duration = _require(prompt, "seed", where), _require(prompt, "duration", where)
    steps, cfg = _require(prompt, "steps", where), _require(prompt, "cfg", where)
    adapter = prompt["adapter"]
    shown = _esc(text) if text else "<i>(empty prompt)</i>"
    labels = {
        "base": "Base model",
        "adapter": f"Adapter · step {adapter.get('step', '?')} · strength "
        f"{adapter.get('strength', '?')}",
    }
    sides = []
    for side, label in labels.items():
        audio = _media_src(prompt[side], "audio", f"{where}.{side}", folder)
        image = _media_src(prompt[side], "spectrogram", f"{where}.{side}", folder)
        sides.append(
            f'<figure class="side {side}" data-side="{side}">'
            f'<figcaption><span class="blind-label"></span>'
            f'<span class="label">{_esc(label)}</span></figcaption>'
            f'<audio controls preload="metadata" src="{audio}"></audio>'
            f'<img src="{image}" alt="spectrogram, {side}">'
            f"</figure>"
        )
    choices = "".join(
        f'<button type="button" data-choice="{value}" aria-pressed="false">{name}</button>'
        for value, name in (("A", "A"), ("B", "B"), ("same", "No difference"))
    )
    return (
        f'<article class="prompt" data-prompt-id="{_esc(pid)}" data-prompt="{_esc(text)}">'
        f"<h3>{shown}</h3>"
        f'<p class="settings">id <code>{_esc(pid)}</code> · seed {_esc(seed)} · '
        f"{_esc(f'{duration:g}')} s · {_esc(steps)} steps · cfg {_esc(f'{cfg:g}')}</p>"
        f'<div class="pair">{"".join(sides)}</div>'
        f'<div class="choice" role="group" aria-label="Which do you prefer?">'
        f"<span>Preferred:</span>{choices}</div>"
        f"</article>"
    )


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten."""
    raw = (hi - lo) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    for i in range(count + 2):
        tick = first + i * step
        ticks.append(round(tick, 12))
        if tick >= hi:
            break
    return ticks


def _svg_text(x: float, y: float, text: str, cls: str, anchor: str) -> str:
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{_esc(text)}</text>'


def _loss_svg(points: list[tuple[int, float]], best_step: int, best_loss: float) -> str:
    steps = [s for s, _ in points] + [best_step]
    losses = [v for _, v in points] + [best_loss]
    x_ticks = _nice_ticks(min(steps), max(max(steps), min(steps) + 1))
    # room below the lowest point for the best point's label
    pad = max((max(losses) - min(losses)) * 0.15, abs(max(losses)) * 0.05, 1e-6)
    y_ticks = _nice_ticks(min(losses) - pad, max(losses) + pad)
    x0, x1 = MARGIN["left"], SVG_WIDTH - MARGIN["right"]
    y0, y1 = SVG_HEIGHT - MARGIN["bottom"], MARGIN["top"]

    def x(step: float) -> float:
        return x0 + (step - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * (x1 - x0)

    def y(loss: float) -> float:
        return y0 + (loss - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * (y1 - y0)

    out = [
        f'<svg class="loss" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" role="img" '
        f'aria-label="validation loss by training step">'
    ]
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
        out.append(_svg_text(x0 - 12, y(t) + 4, f"{t:g}", "tick", "end"))
    for t in x_ticks:
        out.append(_svg_text(x(t), y0 + 18, f"{t:g}", "tick", "middle"))
    out.append(f'<line class="axis" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    out.append(_svg_text((x0 + x1) / 2, SVG_HEIGHT - 6, "training step", "axis-label", "middle"))
    out.append(_svg_text(x0, y1 - 12, "loss", "axis-label", "middle"))
    path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in sorted(points))
    out.append(f'<polyline class="curve" points="{path}"/>')
    for i, (s, v) in enumerate(points):
        kind = "base" if i == 0 else "point"
        out.append(
            f'<circle class="{kind}" cx="{x(s):.1f}" cy="{y(v):.1f}" r="{4 if i == 0 else 3}">'
            f"<title>{'base model' if i == 0 else f'step {s}'}: loss {v:.4g}</title></circle>"
        )
    if points:
        s, v = points[0]
        out.append(_svg_text(x(s) + 8, y(v) - 8, "base", "note", "start"))
    bx, by = x(best_step), y(best_loss)
    anchor = "end" if bx > (x0 + x1) / 2 else "start"
    label = f"best · step {best_step} · {best_loss:.4g}"
    out.append(f'<circle class="best" cx="{bx:.1f}" cy="{by:.1f}" r="6"/>')
    out.append(
        _svg_text(bx + (-4 if anchor == "end" else 4), by + 20, label, "note best-label", anchor)
    )
    out.append("</svg>")
    return "".join(out)


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
        f'<div class="curve-and-table">{_loss_svg(points, best_step, best_loss)}'
        f'<table class="numbers"><thead><tr><th>step</th><th>loss</th><th>vs base</th></tr>'
        f"</thead><tbody>{rows}</tbody></table></div></section>"
    )


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


_TOOLBAR = """<nav class="toolbar" hidden>
<label><input type="checkbox" id="blind-toggle"> Blind mode</label>
<button type="button" id="reveal" aria-pressed="false">Reveal</button>
<span id="progress"></span>
<span class="blind-hint">listen, then pick; the spectrograms come back with Reveal</span>
<span class="spacer"></span>
<button type="button" id="export">Export choices</button>
<button type="button" id="reset">New session</button>
<span id="status" role="status"></span>
</nav>"""

_CSS = """
:root { --ink: #1d1d24; --muted: #6a6a78; --line: #dcdce4; --accent: #b63679;
  --soft: #f6f5f8; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45; }
header, main, .toolbar { max-width: 1320px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; }
h1 { font-size: 1.5rem; margin: 0 0 4px; }
h2 { font-size: 1.15rem; margin: 28px 0 10px; border-bottom: 1px solid var(--line);
  padding-bottom: 4px; }
h3 { font-size: 1rem; margin: 0 0 2px; font-weight: 600; overflow-wrap: anywhere; }
.meta, .settings, .muted { color: var(--muted); }
.meta { margin: 0; }
.settings { margin: 0 0 10px; font-size: 0.9rem; }
.toolbar { position: sticky; top: 0; z-index: 1; display: flex; gap: 12px;
  align-items: center; background: var(--soft); border-bottom: 1px solid var(--line);
  padding-top: 8px; padding-bottom: 8px; margin-top: 12px; flex-wrap: wrap; }
.toolbar[hidden] { display: none; }
.spacer { flex: 1; }
#status { color: var(--accent); }
button { font: inherit; padding: 3px 12px; border: 1px solid #b9b9c6; border-radius: 4px;
  background: #fff; cursor: pointer; }
button[aria-pressed="true"] { background: var(--accent); border-color: var(--accent);
  color: #fff; }
.prompt { border: 1px solid var(--line); border-radius: 6px; padding: 14px 16px;
  margin: 0 0 16px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
@media (max-width: 900px) { .pair { grid-template-columns: 1fr; } }
.side { margin: 0; min-width: 0; }
.side figcaption { font-size: 0.9rem; margin-bottom: 4px; font-weight: 600; }
.side audio { width: 100%; display: block; }
.side img { width: 100%; height: auto; display: block; margin-top: 6px; border-radius: 3px;
  aspect-ratio: 600 / 160; background: #000004; }
.blind-label, .choice { display: none; }
.blind .blind-label { display: inline; font-size: 1.1rem; margin-right: 8px; }
.blind .label { display: none; }
.blind.revealed .label { display: inline; color: var(--accent); }
.blind .side img { display: none; }
.blind.revealed .side img { display: block; }
.blind-hint { display: none; color: var(--muted); font-size: 0.9rem; }
.blind .blind-hint { display: inline; }
.blind .choice { display: flex; gap: 8px; align-items: center; margin-top: 12px; }
.curve-and-table { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }
svg.loss { width: 640px; max-width: 100%; height: auto; }
svg .grid { stroke: #ececf1; } svg .axis { stroke: #9a9aa8; }
svg .tick, svg .axis-label { font-size: 11px; fill: var(--muted); }
svg .curve { fill: none; stroke: #51127c; stroke-width: 2; }
svg .point { fill: #51127c; } svg .base { fill: #fff; stroke: #51127c; stroke-width: 2; }
svg .best { fill: none; stroke: var(--accent); stroke-width: 2.5; }
svg .note { font-size: 12px; fill: var(--ink); } svg .best-label { fill: var(--accent); }
table { border-collapse: collapse; font-size: 0.9rem; }
td, th { padding: 3px 12px 3px 0; text-align: left; vertical-align: top;
  border-bottom: 1px solid #efeff3; }
.numbers td, .numbers th { font-variant-numeric: tabular-nums; text-align: right; }
.numbers tr.best td { color: var(--accent); font-weight: 600; }
.kv th { font-weight: normal; color: var(--muted); font-family: ui-monospace, monospace; }
.kv td { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
main { padding-bottom: 48px; }
"""

# No line comments in here: the page must not contain a double slash anywhere.
_JS = """
(function () {
  "use strict";
  var body = document.body;
  var run = body.dataset.run, fingerprint = body.dataset.fingerprint;
  var key = "tunesmith-audition/" + body.dataset.dataset + "/" + run;
  var prompts = Array.prototype.slice.call(document.querySelectorAll("article.prompt"));
  var toggle = document.getElementById("blind-toggle");
  var revealButton = document.getElementById("reveal");
  var status = document.getElementById("status");
  var revealing = false;
  var state = load();

  function coin() {
    return (window.crypto.getRandomValues(new Uint8Array(1))[0] & 1) === 1;
  }
  function load() {
    var saved = null;
    try { saved = JSON.parse(window.localStorage.getItem(key)); } catch (e) { saved = null; }
    if (!saved || saved.fingerprint !== fingerprint) {
      saved = {fingerprint: fingerprint, blind: false, revealed: false, order: {}, choices: {}};
    }
    prompts.forEach(function (el) {
      var id = el.dataset.promptId;
      /* order[id] is the side played as A, drawn once per prompt and kept */
      if (saved.order[id] !== "base" && saved.order[id] !== "adapter") {
        saved.order[id] = coin() ? "adapter" : "base";
      }
    });
    return saved;
  }
  function save() {
    try {
      window.localStorage.setItem(key, JSON.stringify(state));
    } catch (e) {
      status.textContent = "This browser does not keep choices (storage is off).";
    }
  }
  function otherSide(side) { return side === "adapter" ? "base" : "adapter"; }
  function resolve(id) {
    var a = state.order[id], choice = state.choices[id] || null;
    var chosen = choice === "A" ? a : choice === "B" ? otherSide(a) : choice;
    return {a: a, b: otherSide(a), choice: choice, chosen: chosen};
  }
  function render() {
    var done = 0;
    body.classList.toggle("blind", state.blind);
    body.classList.toggle("revealed", revealing);
    toggle.checked = state.blind;
    revealButton.disabled = !state.blind;
    revealButton.setAttribute("aria-pressed", String(revealing));
    revealButton.textContent = revealing ? "Hide" : "Reveal";
    prompts.forEach(function (el) {
      var id = el.dataset.promptId, r = resolve(id);
      if (r.choice) { done += 1; }
      el.querySelectorAll("figure.side").forEach(function (fig) {
        var isA = fig.dataset.side === r.a;
        fig.style.order = state.blind ? (isA ? "0" : "1") : "";
        fig.querySelector(".blind-label").textContent = isA ? "A" : "B";
      });
      el.querySelectorAll("button[data-choice]").forEach(function (button) {
        button.setAttribute("aria-pressed", String(r.choice === button.dataset.choice));
      });
    });
    document.getElementById("progress").textContent =
      state.blind ? done + " of " + prompts.length + " chosen" : "";
  }
  function exportObject() {
    var counts = {adapter: 0, base: 0, same: 0, unanswered: 0};
    var rows = prompts.map(function (el) {
      var id = el.dataset.promptId, r = resolve(id);
      counts[r.chosen || "unanswered"] += 1;
      return {id: id, prompt: el.dataset.prompt, a: r.a, b: r.b,
              choice: r.choice, chosen: r.chosen};
    });
    return {format: "tunesmith-audition-choices/1", title: body.dataset.title, run: run,
            dataset: body.dataset.dataset, family: body.dataset.family,
            fingerprint: fingerprint, exported_at: new Date().toISOString(),
            revealed: state.revealed, summary: counts, prompts: rows};
  }
  window.tunesmithExport = function () { return JSON.stringify(exportObject(), null, 2); };

  function download() {
    var blob = new Blob([window.tunesmithExport() + "\\n"], {type: "application/json"});
    var url = URL.createObjectURL(blob);
    var link = document.createElement("a");
    link.href = url;
    link.download = "audition-" + run.replace(/[^A-Za-z0-9._-]+/g, "_") + ".json";
    body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  toggle.addEventListener("change", function () {
    state.blind = toggle.checked;
    revealing = false;
    save();
    render();
  });
  revealButton.addEventListener("click", function () {
    revealing = !revealing;
    if (revealing) { state.revealed = true; save(); }
    render();
  });
  document.getElementById("export").addEventListener("click", download);
  document.getElementById("reset").addEventListener("click", function () {
    if (!window.confirm("Forget the choices and draw a new A/B order?")) { return; }
    window.localStorage.removeItem(key);
    revealing = false;
    state = load();
    state.blind = true;
    save();
    render();
  });
  prompts.forEach(function (el) {
    el.querySelectorAll("button[data-choice]").forEach(function (button) {
      button.addEventListener("click", function () {
        state.choices[el.dataset.promptId] = button.dataset.choice;
        save();
        render();
      });
    });
  });
  /* one player at a time: starting one pauses the others */
  document.addEventListener("play", function (event) {
    document.querySelectorAll("audio").forEach(function (audio) {
      if (audio !== event.target) { audio.pause(); }
    });
  }, true);

  document.querySelector(".toolbar").hidden = false;
  save();
  render();
})();
"""

"""The inline CSS and JavaScript of the audition page (`tunesmith.render.audition`).

Kept apart only for length; nothing here is computed. The page must name no network address,
so none of these strings may contain a double slash (no `//` comments, no URLs).
"""

# What blind mode tells the listener or viewer; the page's kind picks one.
BLIND_HINTS = {
    "audio": "listen, then pick; the spectrograms come back with Reveal",
    "image": "look, then pick; the labels come back with Reveal",
}

TOOLBAR = """<nav class="toolbar" hidden>
<label><input type="checkbox" id="blind-toggle"> Blind mode</label>
<button type="button" id="reveal" aria-pressed="false">Reveal</button>
<span id="progress"></span>
<span class="blind-hint">{hint}</span>
<span class="spacer"></span>
<button type="button" id="export">Export choices</button>
<button type="button" id="reset">New session</button>
<span id="status" role="status"></span>
</nav>"""

CSS = """
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
.lyrics { margin: 0 0 8px; font: inherit; font-size: 0.9rem; white-space: pre-wrap; }
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
.side img.spectrogram { width: 100%; height: auto; display: block; margin-top: 6px;
  border-radius: 3px; aspect-ratio: 600 / 160; background: #000004; }
.side img.picture { display: block; max-width: 100%; height: auto; margin: 6px auto 0;
  border-radius: 3px; }
.blind-label, .choice { display: none; }
.blind .blind-label { display: inline; font-size: 1.1rem; margin-right: 8px; }
.blind .label { display: none; }
.blind.revealed .label { display: inline; color: var(--accent); }
.blind .side img.spectrogram { display: none; }
.blind.revealed .side img.spectrogram { display: block; }
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
.plots { display: flex; gap: 16px 24px; flex-wrap: wrap; align-items: flex-start; }
.plot { margin: 0; }
.plot figcaption { font-size: 0.9rem; font-weight: 600; }
svg.measure { width: 420px; max-width: 100%; height: auto; }
svg.measure .tick, svg.measure .axis-label { font-size: 15px; }
svg.measure .note { font-size: 16px; }
svg .reference { stroke: #9a9aa8; stroke-dasharray: 6 4; }
svg .reference-label { fill: var(--muted); }
.summary.warn { color: #a4271c; font-weight: 600; }
table.quality, table.ratings { margin-top: 12px; }
.measures, .listeners { margin: 10px 0 0; font-size: 0.9rem; color: var(--muted); }
.prefers b { color: var(--ink); }
.blind .measures, .blind .listeners { display: none; }
.blind.revealed .measures, .blind.revealed .listeners { display: block; }
.skipped { color: #a4271c; font-size: 0.9rem; }
.kv th { font-weight: normal; color: var(--muted); font-family: ui-monospace, monospace; }
.kv td { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
main { padding-bottom: 48px; }
"""

JS = """
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
  function sessionId() {
    var bytes = window.crypto.getRandomValues(new Uint8Array(8));
    return Array.prototype.map.call(bytes, function (b) {
      return (b + 256).toString(16).slice(1);
    }).join("");
  }
  function load() {
    var saved = null;
    try { saved = JSON.parse(window.localStorage.getItem(key)); } catch (e) { saved = null; }
    if (!saved || saved.fingerprint !== fingerprint) {
      saved = {fingerprint: fingerprint, blind: false, revealed: false, order: {}, choices: {}};
    }
    /* one listener's session: a later export of it replaces its earlier choices */
    if (typeof saved.session !== "string" || !saved.session) { saved.session = sessionId(); }
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
        var letter = isA ? "A" : "B", hidden = state.blind && !revealing;
        fig.style.order = state.blind ? (isA ? "0" : "1") : "";
        fig.querySelector(".blind-label").textContent = letter;
        /* the alt text names the side, so it too says only A or B until Reveal */
        fig.querySelectorAll("img[data-alt]").forEach(function (img) {
          img.alt = hidden ? img.className + " " + letter : img.dataset.alt;
        });
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
    var step = body.dataset.step === undefined ? null : Number(body.dataset.step);
    return {format: "tunesmith-audition-choices/1", title: body.dataset.title, run: run,
            dataset: body.dataset.dataset, family: body.dataset.family,
            fingerprint: fingerprint, step: step, run_folder: body.dataset.runFolder || null,
            session: state.session, exported_at: new Date().toISOString(),
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

"""The audition page's quality plots, each pair's measures and the blind choices handed back:
built from a run's measures and ratings folder, and checked in a headless Chromium."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from tests.render.test_audition_page import (
    browser,  # noqa: F401  (the Chromium fixture)
    make_image_page,
    make_page,
    needs_chromium,
    reload,
    severe,
    wait_for,
)
from tunesmith.quality.run import verdict
from tunesmith.render.audition import MEASURE_NAMES, audition_html, write_audition_page
from tunesmith.render.auditions import run_quality, run_ratings
from tunesmith.render.ratings import FOLDER

# A run measured at each validation of `make_page`'s history (steps 0 to 200, the best 200).
STEPS = [
    {"step": 0, "prompt": 0.212, "style": 0.402, "frechet": 0.91},
    {"step": 50, "prompt": 0.254, "style": 0.431, "frechet": 0.74},
    {"step": 100, "prompt": 0.281, "style": 0.455, "frechet": 0.66},
    {"step": 150, "prompt": 0.276, "style": 0.449, "frechet": 0.69},
    {"step": 200, "prompt": 0.305, "style": 0.398, "frechet": 0.61},
]
QUALITY = {
    "steps": STEPS,
    "floor": 0.35,
    "references": ["held/one.wav"],
    "on_training_items": False,
    "models": {"clap": "5b1e0c"},
}
PAIRS = {  # demo0: both measures prefer the adapter; demo1: split; demo2: a tie on prompt
    "demo0": {"prompt": {"base": 0.20, "adapter": 0.31}, "style": {"base": 0.40, "adapter": 0.45}},
    "demo1": {"prompt": {"base": 0.25, "adapter": 0.22}, "style": {"base": 0.38, "adapter": 0.41}},
    "demo2": {"prompt": {"base": 0.27, "adapter": 0.27}, "style": {"base": 0.44, "adapter": 0.43}},
}


def measured_page(folder: Path, make=make_page, steps=STEPS) -> dict:
    """`make`'s page with the run's measures per step (and the verdict the adapters stage
    gives them) and each pair's measures."""
    page = make(folder)
    quality = {**QUALITY, "steps": steps}
    run_dir = folder / "adapters" / "my-style-0123456789"
    run_dir.mkdir(parents=True)
    (run_dir / "quality.json").write_text(json.dumps(quality))
    page["quality"] = run_quality(run_dir, page["best_step"])  # the stage's own reading
    page["pair_measures"] = PAIRS
    page["run_dir"] = run_dir
    return page


class _Svgs(HTMLParser):
    """Each <svg class="measure">'s circles, reference lines and texts, by its figure's
    measure."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, dict] = {}
        self.figure = self.svg = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure" and "plot" in attrs.get("class", ""):
            self.figure = attrs["data-measure"]
        elif tag == "svg" and attrs.get("class") == "measure":
            self.svg = self.plots.setdefault(self.figure, {"circles": [], "lines": [], "text": []})
        elif self.svg is not None and tag == "circle":
            self.svg["circles"].append(attrs["class"])
        elif self.svg is not None and tag == "line":
            self.svg["lines"].append(attrs["class"])

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None

    def handle_data(self, data):
        if self.svg is not None:
            self.svg["text"].append(data)


def plots(text: str) -> dict[str, dict]:
    parser = _Svgs()
    parser.feed(text)
    return parser.plots


def test_each_measure_is_plotted_per_step_with_the_base_and_the_kept_step(tmp_path):
    page = measured_page(tmp_path)
    text = write_audition_page(tmp_path / "audition.html", page).read_text()
    drawn = plots(text)
    assert list(drawn) == ["prompt", "style", "frechet"]  # no DINOv2 was named: no plot
    for measure, plot in drawn.items():
        # the base model, each checkpoint, and the kept step ringed
        assert plot["circles"] == ["base"] + ["point"] * 4 + ["best"], measure
        kept = next(row for row in STEPS if row["step"] == 200)[measure]
        assert f"kept · step 200 · {kept:.4g}" in plot["text"], plot["text"]
        assert f"base model: {MEASURE_NAMES[measure]} {STEPS[0][measure]:.4g}" in plot["text"]
    assert "reference" in drawn["frechet"]["lines"]  # the dataset's own split-half distance
    assert "reference" not in drawn["prompt"]["lines"]
    # the loss curve is drawn as before, beside them
    assert text.count('<svg class="loss"') == 1
    # the kept adapter beats the base on prompt and Fréchet distance, not on style
    assert "beats the base model on prompt similarity, Fréchet distance." in text
    rows = re.findall(r"<tr( class=best)?><td>(base|\d+)</td><td>([\d.]+)</td>", text)
    assert [(best, step) for best, step, _ in rows[-5:]] == [
        ("", "base"), ("", "50"), ("", "100"), ("", "150"), (" class=best", "200")
    ]  # fmt: skip


def test_a_kept_adapter_that_beats_the_base_on_nothing_is_a_warning(tmp_path):
    worse = [{**row, "prompt": 0.1, "style": 0.3, "frechet": 1.2} if row["step"] else row
             for row in STEPS]  # fmt: skip
    page = measured_page(tmp_path, steps=worse)
    assert page["quality"]["verdict"] == verdict({"steps": worse}, 200)
    text = audition_html(page, tmp_path)
    assert '<p class="summary warn">The kept adapter (step 200) beats the base model on no ' in text


def test_a_run_without_measures_shows_no_plot(tmp_path):
    page = make_page(tmp_path)
    text = audition_html(page, tmp_path)
    assert 'id="quality"' not in text and 'svg class="measure"' not in text
    assert 'class="measures"' not in text
    assert run_quality(tmp_path / "no-run-folder", 200) is None
    (tmp_path / "skipped").mkdir()
    (tmp_path / "skipped" / "quality.json").write_text('{"steps": []}')
    assert run_quality(tmp_path / "skipped", 200) is None
    page["quality"] = {"steps": [], "kept_step": 200}
    assert 'id="quality"' not in audition_html(page, tmp_path)


def test_a_measure_that_is_not_a_number_is_left_out_and_the_page_is_written(tmp_path):
    steps = [{**row, "style": float("nan")} if row["step"] == 100 else row for row in STEPS]
    page = measured_page(tmp_path, steps=steps)
    page["pair_measures"] = {"demo0": {"prompt": {"base": float("nan"), "adapter": 0.3}}}
    text = audition_html(page, tmp_path)
    drawn = plots(text)
    assert drawn["style"]["circles"] == ["base"] + ["point"] * 3 + ["best"]
    assert drawn["prompt"]["circles"] == ["base"] + ["point"] * 4 + ["best"]
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)
    assert 'class="measures"' not in text


def test_dinov2_is_plotted_where_it_measured_the_pictures(tmp_path):
    steps = [{**row, "style_dino": row["style"] - 0.1} for row in STEPS]
    page = measured_page(tmp_path, make=make_image_page, steps=steps)
    assert list(plots(audition_html(page, tmp_path))) == [
        "prompt", "style", "style_dino", "frechet"
    ]  # fmt: skip


def test_each_pair_says_which_side_each_measure_prefers(tmp_path):
    text = audition_html(measured_page(tmp_path), tmp_path)
    found = re.findall(r'data-prompt-id="(demo\d)"|data-measure="(\w+)" data-prefers="(\w+)"', text)
    prefers, prompt = {}, None
    for pid, measure, side in found:
        prompt = pid or prompt
        if measure:
            prefers[(prompt, measure)] = side
    assert prefers == {
        ("demo0", "prompt"): "adapter",
        ("demo0", "style"): "adapter",
        ("demo1", "prompt"): "base",
        ("demo1", "style"): "adapter",
        ("demo2", "prompt"): "neither",
        ("demo2", "style"): "base",
    }
    assert "(0.310 adapter, 0.200 base)" in text


def test_the_export_names_the_page_step_and_run_folder(tmp_path):
    page = measured_page(tmp_path)
    run_ratings(page, page["run_dir"], page["dataset"], tmp_path)
    text = audition_html(page, tmp_path)
    assert 'data-step="200" data-run-folder="my-style-0123456789"' in text
    assert "None handed back yet." in text
    assert f"put the file in <code>adapters/my-style-0123456789/{FOLDER}/</code>" in text
    assert "<code>tunesmith ratings loops FILE</code>" in text


# --- in a real headless Chromium ------------------------------------------------------------


def shown(driver, selector: str) -> list[bool]:
    return driver.execute_script(
        f"return [...document.querySelectorAll({json.dumps(selector)})]"
        ".map(el => el.getBoundingClientRect().width > 0)"
    )


@needs_chromium
def test_the_plots_and_the_handed_back_choices_load_cleanly(browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    page = measured_page(tmp_path)
    run_dir = page.pop("run_dir")
    run_ratings(page, run_dir, page["dataset"], tmp_path)
    path = write_audition_page(tmp_path / "audition.html", page)
    browser.get_log("browser")
    browser.get(path.as_uri())
    browser.execute_script("window.localStorage.clear()")
    reload(browser)
    assert shown(browser, "svg.measure") == [True] * 3
    assert shown(browser, "svg.loss") == [True]
    assert shown(browser, "p.measures") == [True] * 3  # not blind: each pair's measures

    # Blind: nothing that names a side is shown, the measures' preference included
    browser.find_element(By.ID, "blind-toggle").click()
    assert shown(browser, "p.measures") == [False] * 3
    assert shown(browser, "svg.measure") == [True] * 3  # a run's curves name no side
    picks = {"demo0": "A", "demo1": "B", "demo2": "same"}
    for pid, choice in picks.items():
        article = browser.find_element(By.CSS_SELECTOR, f'article[data-prompt-id="{pid}"]')
        article.find_element(By.CSS_SELECTOR, f'button[data-choice="{choice}"]').click()
    exported = json.loads(browser.execute_script("return window.tunesmithExport()"))
    assert exported["step"] == 200 and exported["run_folder"] == run_dir.name
    assert re.fullmatch(r"[0-9a-f]{16}", exported["session"])

    # Handed back: the file in the run's folder, the page built again, counted on it
    (run_dir / FOLDER).mkdir()
    (run_dir / FOLDER / "audition-my-style.json").write_text(json.dumps(exported))
    counted = run_ratings(page, run_dir, page["dataset"], tmp_path)
    write_audition_page(path, page)
    reload(browser)  # the same pairs: the same fingerprint, so the blind session goes on
    chosen = {row["id"]: row["chosen"] for row in exported["prompts"]}
    (checkpoint,) = counted.checkpoints
    expected = [list(chosen.values()).count(side) for side in ("adapter", "base", "same")]
    assert [checkpoint[side] for side in ("adapter", "base", "same")] == expected
    cells = browser.execute_script(
        "return [...document.querySelectorAll('table.ratings tbody tr.best td')]"
        ".map(td => td.textContent)"
    )
    share = f"{expected[0] / 3 * 100:.0f}%"
    assert cells == ["200", *map(str, expected), "3", share, "1"]
    assert shown(browser, "p.listeners") == [False] * 3  # blind: hidden
    browser.find_element(By.ID, "reveal").click()
    assert shown(browser, "p.listeners") == [True] * 3
    assert shown(browser, "p.measures") == [True] * 3
    listeners = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('p.listeners')]"
        ".map(p => [p.dataset.promptId, p.textContent]))"
    )
    for pid, side in chosen.items():
        counts = {s: int(side == s) for s in ("adapter", "base", "same")}
        assert listeners[pid].endswith(
            f"adapter {counts['adapter']} · base {counts['base']} · no difference {counts['same']}"
        ), listeners[pid]
    wait_for(browser, "return document.readyState === 'complete'")
    assert severe(browser) == []

"""Spectrogram previews and the audition page (audio and image), checked in a headless Chromium."""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from tunesmith.render.audition import write_audition_page
from tunesmith.render.spectrogram import (
    COLORMAP,
    band_edges,
    row_of_frequency,
    spectrogram_array,
    spectrogram_levels,
    spectrogram_png,
)

SR = 44100
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
IMAGE_SIZE = (96, 64)  # width, height of the image renders
HOSTILE = 'mystyle </h3><script>window.pwned = 1</script> & "quotes"'
TEXTS = ["warm analog pads, 90 bpm", "", HOSTILE]


def tone(freq: float, seconds: float = 0.5, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    mono = amp * np.sin(2 * np.pi * freq * t)
    return np.stack([mono, mono]).astype(np.float32)  # [channels, N]


def picture(red: int, blue: int) -> np.ndarray:
    """An IMAGE_SIZE RGB picture: flat red and blue, green rising left to right."""
    width, height = IMAGE_SIZE
    pixels = np.empty((height, width, 3), dtype=np.uint8)
    pixels[..., 0], pixels[..., 2] = red, blue
    pixels[..., 1] = np.linspace(0, 255, width).astype(np.uint8)
    return pixels


def make_page(folder: Path) -> dict:
    """Three demo prompts with real WAV renders and spectrograms under `folder/renders`."""
    prompts = []
    for i, text in enumerate(TEXTS):
        entry = {
            "id": f"demo{i}",
            "prompt": text,
            "seed": 100 + i,
            "duration": 0.5,
            "steps": 8,
            "cfg": 7.0,
        }
        for side, freq in (("base", 220.0 * (i + 1)), ("adapter", 330.0 * (i + 1))):
            samples = tone(freq)
            audio = folder / "renders" / side / f"demo{i}.wav"
            audio.parent.mkdir(parents=True, exist_ok=True)
            sf.write(audio, samples.T, SR, subtype="PCM_16")
            spectrogram_png(samples, SR, audio.with_suffix(".png"))
            entry[side] = {
                "audio": f"renders/{side}/demo{i}.wav",
                "spectrogram": f"renders/{side}/demo{i}.png",
            }
        entry["adapter"] |= {"strength": 1.0, "step": 200}
        prompts.append(entry)
    return run_page(
        prompts, title="loops · my-style", run="my-style", family="stable-audio-3", dataset="loops"
    )


def make_image_page(folder: Path) -> dict:
    """The same three prompts as an image family's: a real PNG per side under `folder/renders`."""
    prompts = []
    for i, text in enumerate(TEXTS):
        entry = {"id": f"demo{i}", "prompt": text, "seed": 100 + i, "steps": 8, "cfg": 7.0}
        for side, red in (("base", 40), ("adapter", 200)):
            path = folder / "renders" / side / f"demo{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(picture(red, 60 * i)).save(path)
            entry[side] = {"image": f"renders/{side}/demo{i}.png"}
        entry["adapter"] |= {"strength": 0.8, "step": 200}
        prompts.append(entry)
    return run_page(prompts, title="faces · my-look", run="my-look", family="sdxl", dataset="faces")


def run_page(prompts: list[dict], **head: str) -> dict:
    """A page around `prompts`: the loss history, config, lineage and notes of a run."""
    return head | {
        "prompts": prompts,
        "validation": [
            {"step": 0, "loss": 1.38},
            {"step": 50, "loss": 0.71},
            {"step": 100, "loss": 0.52},
            {"step": 150, "loss": 0.55},
            {"step": 200, "loss": 0.49},
        ],
        "best_step": 200,
        "base_loss": 1.38,
        "best_loss": 0.49,
        "validation_note": "validation on 1 held-out item(s)",
        "config": {"adapter": {"type": "dora-rows", "rank": 16}, "train": {"steps": 200}},
        "lineage": {
            "manifest": "3f9a1c",
            "base_model": "stable-audio-3-small@e41d",
            "torch": "2.13.0",
        },
        "notes": ["ffmpeg not found: WAV only"],
    }


class _Sources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href"):
                self.sources.append((tag, value))


def page_sources(text: str) -> list[tuple[str, str]]:
    parser = _Sources()
    parser.feed(text)
    return parser.sources


# --- spectrogram ---------------------------------------------------------------------------


def test_same_samples_give_the_same_png_bytes(tmp_path):
    samples = tone(440.0) + 0.05 * np.random.default_rng(0).standard_normal((2, SR // 2))
    first = spectrogram_png(samples, SR, tmp_path / "a.png").read_bytes()
    second = spectrogram_png(samples, SR, tmp_path / "b.png").read_bytes()
    assert first == second
    assert first.startswith(b"\x89PNG")


@pytest.mark.parametrize("freq", [1000.0, 4000.0])
def test_a_sine_lights_the_row_band_that_holds_its_frequency(freq):
    levels = spectrogram_levels(tone(freq), SR, width=200, height=160)
    expected = row_of_frequency(freq, SR, 160)
    edges = band_edges(SR, 160)[::-1]  # top row first, like the image
    assert edges[expected + 1] <= freq < edges[expected]
    brightness = levels.mean(axis=1)
    assert abs(int(brightness.argmax()) - expected) <= 1
    # an octave away on either side is at least 40 dB down (levels span 80 dB)
    centres = (edges[:-1] + edges[1:]) / 2
    far = (centres < freq / 2) | (centres > freq * 2)
    assert brightness[far].max() < brightness.max() - 0.5


def test_low_frequencies_are_drawn_at_the_bottom():
    low = spectrogram_levels(tone(200.0), SR).mean(axis=1).argmax()
    high = spectrogram_levels(tone(8000.0), SR).mean(axis=1).argmax()
    assert low > high


def test_silence_is_the_darkest_colour_everywhere():
    picture = spectrogram_array(np.zeros((2, 1000), dtype=np.float32), SR, width=50, height=20)
    assert picture.shape == (20, 50, 3)
    assert (picture == COLORMAP[0]).all()


def test_stereo_is_mixed_to_mono():
    stereo = tone(1000.0)
    mono = stereo[0]
    assert np.array_equal(
        spectrogram_array(stereo, SR, 40, 30), spectrogram_array(mono, SR, 40, 30)
    )


# --- page builder ---------------------------------------------------------------------------

both_kinds = pytest.mark.parametrize("make", [make_page, make_image_page], ids=["audio", "image"])


@both_kinds
def test_prompt_text_is_escaped(tmp_path, make):
    text = write_audition_page(tmp_path / "audition.html", make(tmp_path)).read_text()
    assert "window.pwned" in text  # the text is there, but only as text
    assert "<script>window.pwned" not in text
    assert (
        "&lt;/h3&gt;&lt;script&gt;window.pwned = 1&lt;/script&gt; &amp; &quot;quotes&quot;" in text
    )
    assert text.count("<script>") == 1  # the page's own


@both_kinds
def test_the_page_names_no_network_address(tmp_path, make):
    text = write_audition_page(tmp_path / "audition.html", make(tmp_path)).read_text()
    for needle in ("http:", "https:", "//", "url(", "@import", "fetch(", "XMLHttpRequest"):
        assert needle not in text, needle
    for _, value in page_sources(text):
        assert not value.startswith(("/", "\\")) and (":" not in value or value == "data:,"), value


def test_every_player_and_picture_points_at_an_existing_file(tmp_path):
    page = make_page(tmp_path)
    text = write_audition_page(tmp_path / "audition.html", page).read_text()
    media = [(tag, value) for tag, value in page_sources(text) if tag in ("audio", "img")]
    assert sorted(tag for tag, _ in media) == ["audio"] * 6 + ["img"] * 6
    for _, value in media:
        assert (tmp_path / unquote(value)).is_file(), value


def test_an_image_page_shows_each_png_at_its_size_and_plays_nothing(tmp_path):
    page = make_image_page(tmp_path)
    text = write_audition_page(tmp_path / "audition.html", page).read_text()
    media = [(tag, value) for tag, value in page_sources(text) if tag in ("audio", "img")]
    expected = [f"renders/{side}/demo{i}.png" for i in range(3) for side in ("base", "adapter")]
    assert media == [("img", path) for path in expected]
    width, height = IMAGE_SIZE
    assert text.count(f'width="{width}" height="{height}"') == 6
    assert 'alt="picture, base"' in text and 'alt="picture, adapter"' in text
    assert f"{width}×{height} px" in text and "<audio" not in text


@both_kinds
def test_the_same_page_gives_the_same_bytes(tmp_path, make):
    page = make(tmp_path)
    first = write_audition_page(tmp_path / "a.html", page).read_bytes()
    assert write_audition_page(tmp_path / "b.html", page).read_bytes() == first


def fingerprint(text: str) -> str:
    return text.split('data-fingerprint="', 1)[1].split('"', 1)[0]


def test_new_pixels_start_a_fresh_blind_session(tmp_path):
    page = make_image_page(tmp_path)
    before = fingerprint(write_audition_page(tmp_path / "a.html", page).read_text())
    Image.fromarray(picture(41, 0)).save(tmp_path / "renders" / "base" / "demo0.png")
    assert fingerprint(write_audition_page(tmp_path / "a.html", page).read_text()) != before


def test_a_missing_render_is_an_error_naming_it(tmp_path):
    page = make_page(tmp_path)
    (tmp_path / "renders" / "adapter" / "demo1.wav").unlink()
    expected = r"prompts\[1\]\.adapter\.audio = 'renders/adapter/demo1.wav'; no such file"
    with pytest.raises(ValueError, match=expected):
        write_audition_page(tmp_path / "audition.html", page)


def not_a_png(folder: Path, side: dict) -> None:
    Image.fromarray(picture(0, 0)).save(folder / side["image"], format="JPEG")


@pytest.mark.parametrize(
    "spoil, expected",
    [
        (lambda folder, side: side.pop("image"), r"adapter has neither kind of media; expected"),
        (
            lambda folder, side: side.update(audio="renders/base/demo0.png"),
            r"adapter has both kinds of media \['audio', 'image'\]",
        ),
        (
            lambda folder, side: side.update(spectrogram="renders/base/demo0.png"),
            r"adapter has both kinds of media \['spectrogram', 'image'\]",
        ),
        (
            lambda folder, side: (folder / side["image"]).unlink(),
            r"adapter\.image = 'renders/adapter/demo1\.png'; no such file in",
        ),
        (not_a_png, r"adapter\.image = 'renders/adapter/demo1\.png'; expected a PNG file"),
        (
            lambda folder, side: side.update(image=str(folder / side["image"])),
            r"adapter\.image = '/.*demo1\.png'; expected a relative path",
        ),
    ],
    ids=["neither", "audio-and-image", "spectrogram-and-image", "missing", "jpeg", "absolute"],
)
def test_a_bad_image_side_is_an_error_naming_prompt_and_side(tmp_path, spoil, expected):
    page = make_image_page(tmp_path)
    spoil(tmp_path, page["prompts"][1]["adapter"])
    with pytest.raises(ValueError, match=r"audition page: prompts\[1\]\." + expected):
        write_audition_page(tmp_path / "audition.html", page)
    assert not (tmp_path / "audition.html").exists()


def test_a_page_holds_one_kind_of_render(tmp_path):
    page = make_image_page(tmp_path)
    page["prompts"][2]["base"] = make_page(tmp_path / "audio")["prompts"][2]["base"]
    expected = (
        r"prompts\[2\]\.base is an audio side but prompts\[0\]\.base is an image side; "
        "expected one kind on a page"
    )
    with pytest.raises(ValueError, match=expected):
        write_audition_page(tmp_path / "audition.html", page)


# --- in a real headless Chromium ------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver);"
    " `apt-get install chromium chromium-driver` (.ci/run does this)",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path_factory.mktemp("downloads")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.downloads = downloads
    yield driver
    driver.quit()


def open_page(driver, folder: Path, make=make_page) -> dict:
    spec = make(folder)
    page = write_audition_page(folder / "audition.html", spec)
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(page.as_uri())
    driver.execute_script("window.localStorage.clear()")
    reload(driver)
    return spec


def reload(driver) -> None:
    """Reload the page and wait until the new one has run its script: chromedriver's refresh
    can return while the new document is still being parsed (seen on a loaded machine)."""
    driver.execute_script("window.beforeReload = true")
    driver.refresh()
    wait_for(driver, "return !window.beforeReload && document.readyState === 'complete'")


def wait_for(driver, script: str, timeout: float = 10.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script))


def severe(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@needs_chromium
def test_page_loads_cleanly_and_every_player_loads_its_file(browser, tmp_path):
    open_page(browser, tmp_path)
    wait_for(browser, "return [...document.images].every(i => i.complete && i.naturalWidth > 0)")
    wait_for(browser, "return [...document.querySelectorAll('audio')].every(a => a.readyState > 0)")
    players = browser.execute_script(
        "return [...document.querySelectorAll('audio')].map(a => ({error: a.error && a.error.code,"
        " duration: a.duration, src: a.currentSrc}))"
    )
    assert len(players) == 6
    for player in players:
        assert player["error"] is None and player["src"].startswith("file:///"), player
        assert player["duration"] == pytest.approx(0.5, abs=0.01), player
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.execute_script("return typeof window.tunesmithExport") == "function"
    assert severe(browser) == []


@needs_chromium
def test_an_image_page_loads_cleanly_and_shows_every_picture(browser, tmp_path):
    open_page(browser, tmp_path, make_image_page)
    wait_for(browser, "return [...document.images].every(i => i.complete)")
    pictures = browser.execute_script(
        "return [...document.querySelectorAll('figure.side img')].map(i => ({"
        " natural: [i.naturalWidth, i.naturalHeight], shown: i.getBoundingClientRect().width,"
        " src: i.currentSrc}))"
    )
    assert len(pictures) == 6
    for shown in pictures:
        assert shown["natural"] == list(IMAGE_SIZE) and shown["shown"] > 0, shown
        assert shown["src"].startswith("file:///"), shown
    assert browser.execute_script("return document.querySelectorAll('audio').length") == 0
    assert browser.execute_script("return window.pwned === undefined")
    assert severe(browser) == []


@needs_chromium
def test_blind_images_stay_in_view_and_only_what_names_the_side_hides(browser, tmp_path):
    from selenium.webdriver.common.by import By

    open_page(browser, tmp_path, make_image_page)
    figures = (
        "return [...document.querySelectorAll('figure.side')].map(f => {"
        " const img = f.querySelector('img');"
        " return {side: f.dataset.side, alt: img.alt, picture: img.getBoundingClientRect().width,"
        " label: f.querySelector('.label').getBoundingClientRect().width,"
        " letter: f.querySelector('.blind-label').textContent}; })"
    )
    for shown in browser.execute_script(figures):
        assert shown["picture"] > 0 and shown["label"] > 0
        assert shown["alt"] == f"picture, {shown['side']}"

    browser.find_element(By.ID, "blind-toggle").click()
    for shown in browser.execute_script(figures):
        assert shown["picture"] > 0, shown  # the pictures are what is judged
        assert shown["label"] == 0, shown
        assert shown["alt"] == f"picture {shown['letter']}", shown

    browser.find_element(By.ID, "reveal").click()
    for shown in browser.execute_script(figures):
        assert shown["picture"] > 0 and shown["label"] > 0
        assert shown["alt"] == f"picture, {shown['side']}"
    assert severe(browser) == []


@needs_chromium
@both_kinds
def test_blind_choices_survive_a_reload_and_are_exported(browser, tmp_path, make):
    from selenium.webdriver.common.by import By

    spec = open_page(browser, tmp_path, make)
    browser.find_element(By.ID, "blind-toggle").click()
    picks = {"demo0": "A", "demo1": "B", "demo2": "same"}
    for pid, choice in picks.items():
        article = browser.find_element(By.CSS_SELECTOR, f'article[data-prompt-id="{pid}"]')
        article.find_element(By.CSS_SELECTOR, f'button[data-choice="{choice}"]').click()

    reload(browser)
    assert "blind" in browser.find_element(By.TAG_NAME, "body").get_attribute("class")
    shown = browser.execute_script(
        "return [...document.querySelectorAll('article.prompt')].map(el => {"
        " const figs = [...el.querySelectorAll('figure.side')];"
        " const a = figs.find(f => f.querySelector('.blind-label').textContent === 'A');"
        " const b = figs.find(f => f !== a);"
        " const pressed = el.querySelector('button[aria-pressed=\"true\"]');"
        " return {id: el.dataset.promptId, a: a.dataset.side,"
        " pressed: pressed && pressed.dataset.choice,"
        " aLeft: a.getBoundingClientRect().left < b.getBoundingClientRect().left}; })"
    )
    assert {row["id"]: row["pressed"] for row in shown} == picks
    assert all(row["aLeft"] for row in shown)  # A is played or shown on the left

    exported = json.loads(browser.execute_script("return window.tunesmithExport()"))
    assert sorted(exported) == [
        "dataset",
        "exported_at",
        "family",
        "fingerprint",
        "format",
        "prompts",
        "revealed",
        "run",
        "run_folder",
        "session",
        "step",
        "summary",
        "title",
    ]
    assert exported["format"] == "tunesmith-audition-choices/1"
    assert exported["run"] == spec["run"] and exported["dataset"] == spec["dataset"]
    assert exported["summary"]["same"] == 1 and exported["summary"]["unanswered"] == 0
    assert exported["revealed"] is False
    by_id = {row["id"]: row for row in exported["prompts"]}
    assert list(by_id) == ["demo0", "demo1", "demo2"]
    assert by_id["demo2"]["prompt"] == HOSTILE
    for row in shown:
        entry = by_id[row["id"]]
        assert sorted(entry) == ["a", "b", "choice", "chosen", "id", "prompt"]
        assert entry["a"] == row["a"] and {entry["a"], entry["b"]} == {"adapter", "base"}
        assert entry["choice"] == picks[row["id"]]
    assert by_id["demo0"]["chosen"] == by_id["demo0"]["a"]
    assert by_id["demo1"]["chosen"] == by_id["demo1"]["b"]
    assert by_id["demo2"]["chosen"] == "same"

    browser.find_element(By.ID, "export").click()
    target = browser.downloads / f"audition-{spec['run']}.json"
    deadline = time.monotonic() + 10
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    downloaded = json.loads(target.read_text())
    assert downloaded["prompts"] == exported["prompts"]
    assert severe(browser) == []

"""Demo renders: byte-identical on the CPU, base = strength 0, cached, MP3 only with ffmpeg."""

from pathlib import Path

import pytest

from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
from tunesmith.families.stable_audio_3.config import Sa3Demo as DemoConfig
from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
from tunesmith.families.stable_audio_3.model import SAMPLE_RATE
from tunesmith.families.stable_audio_3.sample import Renderer
from tunesmith.media.writers import wav_bytes
from tunesmith.render.demos import build_renders
from tunesmith.store import Store
from tunesmith.train.config import RunConfig

CPU = Placement("torch", "cpu", "float32", "test")
DEMOS = (
    DemoConfig(prompt="", seed=42, duration=2.0, steps=4),
    DemoConfig(prompt="zq, Genre: house", seed=43, duration=1.5, steps=4, cfg=3.0),
)


@pytest.fixture(scope="module")
def trained(tiny_sa3, tmp_path_factory):
    """A short real training run: its best adapter is what the renders use."""
    from tests.families.stable_audio_3.test_sa3_training import fit, run_config

    run = run_config(tiny_sa3, steps=4, eval_every=2, checkpoint_every=4)
    _, result = fit(tiny_sa3, tmp_path_factory.mktemp("run"), run)
    config = RunConfig(
        "r", "stable-audio-3", str(tiny_sa3), "zq", AdapterConfig(), TrainConfig(), DEMOS
    )
    return config, {"best_path": result.best_path, "best_step": result.best_step}


def render(tmp_path, trained, tiny_sa3, name="out"):
    run, row = trained
    out, store = tmp_path / name, Store(tmp_path / f"{name}-store")
    result = build_renders(
        [(run, row)],
        {"r": "fp"},
        out,
        store,
        {"stable-audio-3": CPU},
        lambda run, adapter: Renderer(Path(tiny_sa3), CPU, adapter),
    )
    return result, out, store


def test_rendering_twice_gives_byte_identical_wavs(tmp_path, trained, tiny_sa3):
    first, out_a, _ = render(tmp_path, trained, tiny_sa3, "a")
    second, out_b, _ = render(tmp_path, trained, tiny_sa3, "b")
    assert first.result.computed == second.result.computed == 4
    for a in sorted(out_a.rglob("*.wav")):
        b = out_b / a.relative_to(out_a)
        assert a.read_bytes() == b.read_bytes(), a.name
    wav = out_a / "renders" / "r" / "adapter" / "demo1.wav"
    import soundfile as sf

    data, rate = sf.read(wav)
    assert rate == 44100 and data.shape == (int(1.5 * 44100), 2)
    assert abs(abs(data).max() - 1.0) < 1e-3  # peak-normalised 16-bit
    assert (wav.with_suffix(".png")).exists() and (wav.with_suffix(".json")).exists()


def test_the_base_render_is_the_base_model_bit_for_bit(tmp_path, trained, tiny_sa3):
    _, out, _ = render(tmp_path, trained, tiny_sa3)
    plain = Renderer(Path(tiny_sa3), CPU)  # no adapter at all
    for i, demo in enumerate(DEMOS):
        expected = wav_bytes(plain.render(demo, 0.0), SAMPLE_RATE)
        assert (out / "renders" / "r" / "base" / f"demo{i}.wav").read_bytes() == expected
        adapter = (out / "renders" / "r" / "adapter" / f"demo{i}.wav").read_bytes()
        assert adapter != expected  # the adapter changes the render


def test_an_unchanged_adapter_and_demo_list_renders_nothing_again(tmp_path, trained, tiny_sa3):
    render(tmp_path, trained, tiny_sa3)

    def refuse(run, adapter):
        raise AssertionError("a model was loaded")

    run, row = trained
    store = Store(tmp_path / "out-store")
    again = build_renders(
        [(run, row)], {"r": "fp"}, tmp_path / "out", store, {"stable-audio-3": CPU}, refuse
    )
    assert again.result.computed == 0 and again.result.cached == 4


def test_without_ffmpeg_wav_only_and_the_report_says_so(tmp_path, trained, tiny_sa3, monkeypatch):
    import shutil

    if shutil.which("ffmpeg"):
        result, out, _ = render(tmp_path, trained, tiny_sa3, "with")
        assert (out / "renders" / "r" / "base" / "demo0.mp3").stat().st_size > 0
    monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg on this PATH
    result, out, _ = render(tmp_path, trained, tiny_sa3, "without")
    assert not list(out.rglob("*.mp3"))
    assert result.result.extra["notes"] == ["ffmpeg not found: WAV only, no MP3"]


def test_training_renders_samples_at_every_validation_the_first_row_the_base(tiny_sa3, tmp_path):
    from dataclasses import replace

    from tests.families.stable_audio_3.test_sa3_training import fit, run_config

    run = replace(run_config(tiny_sa3, steps=4, eval_every=2, checkpoint_every=4), demos=DEMOS)
    fit(tiny_sa3, tmp_path, run)
    names = sorted(p.name for p in (tmp_path / "samples").iterdir())
    assert names == ["0-0.wav", "0-2.wav", "0-4.wav", "1-0.wav", "1-2.wav", "1-4.wav"]
    plain = Renderer(Path(tiny_sa3), CPU)
    for i, demo in enumerate(DEMOS):
        base = wav_bytes(plain.render(demo, 0.0), SAMPLE_RATE)
        assert (tmp_path / "samples" / f"{i}-0.wav").read_bytes() == base
        assert (tmp_path / "samples" / f"{i}-4.wav").read_bytes() != base

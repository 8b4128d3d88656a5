"""Stage `encoded` for ACE-Step: latents and the base model's own audio codes beside them, texts
once per distinct string, rows per run; editing a caption encodes one text and no audio; a base
folder without the audio tokenizer still trains; the bad inputs of a dataset, each named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tests.families.ace_step.conftest import encode_dataset, write_dataset
from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step import captions, model
from tunesmith.train import stage

RUNS = """
[[runs]]
name = "{name}"
family = "ace-step"
base_model = "tiny"
[runs.adapter]
rank = 4
[runs.train]
optimizer = "adamw"
{train}
"""


def dataset(tmp_path: Path, tiny_ace_step: Path, count: int = 3, runs: str = "") -> Path:
    shutil.copytree(tiny_ace_step, tmp_path / "models" / "tiny")
    folder = write_dataset(tmp_path / "clips", count)
    if runs:
        toml = (folder / "tunesmith.toml").read_text()
        (folder / "tunesmith.toml").write_text(toml.split("[[runs]]")[0] + runs)
    return folder


def test_rows_hold_latents_codes_and_each_runs_texts(ace_encoded, ace_pipe):
    encoded, runs, models = ace_encoded
    frame = encoded.frame
    assert list(frame["run"]) == ["unit"] * 5 and not encoded.result.skipped
    row = frame[frame["path"] == "clip0.wav"].iloc[0]
    item = load_file(row["latents"])
    assert item["latents"].shape == (40, 8)  # 1.6 s at 25 Hz, 8 channels
    assert torch.equal(item["audio_codes"], model.audio_codes(ace_pipe, item["latents"]))
    assert row["caption"] == "zqx, a loop number 0, warm synth pop"
    with safe_open(row["caption_states"], "pt") as f:
        string, caption = f.metadata()["text"], f.get_tensor("hidden_states")
    assert "# Caption\nzqx, a loop number 0, warm synth pop\n" in string
    assert "- duration: 1 seconds\n" in string  # 40 frames, whole seconds
    expected = model.encode_caption(ace_pipe, string).hidden_states
    assert torch.allclose(caption, expected, atol=1e-6)
    lyrics = {r["path"]: r["instrumental"] for r in frame.to_dict("records")}
    assert lyrics == {
        "clip0.wav": False,
        "clip1.wav": True,
        "clip2.wav": False,
        "clip3.wav": True,
        "clip4.wav": False,
    }
    # the published view: what model.read_item reads, and every run's texts
    [stem] = (models.parent / "out" / "encoded").glob("tiny-*")
    latents, codes, sidecar = model.read_item(stem / "clip0")
    assert torch.equal(latents, item["latents"]) and torch.equal(codes, item["audio_codes"])
    assert "la la 0" in sidecar["texts"]["unit"]["lyrics_string"]
    # One [Instrumental] lyrics text serves both instrumentals: 5 captions + 4 lyrics texts.
    assert encoded.result.extra["texts_computed"] == 9


def test_editing_one_caption_encodes_one_text_and_no_audio(tiny_ace_step, tmp_path):
    folder = dataset(tmp_path, tiny_ace_step)
    first, _ = encode_dataset(folder, tmp_path / "models", tmp_path)
    assert (first.result.computed, first.result.cached) == (3, 0)
    (folder / "clip1.txt").write_text("a loop number 1, cold techno")
    again, _ = encode_dataset(folder, tmp_path / "models", tmp_path)
    assert (again.result.computed, again.result.cached) == (0, 3)
    # 3 captions, 3 lyrics texts (two sung, one [Instrumental]): one caption is new
    assert (again.result.extra["texts_computed"], again.result.extra["texts_cached"]) == (1, 5)
    changed = set(again.frame["caption_entry"]) - set(first.frame["caption_entry"])
    assert len(changed) == 1 and list(again.frame["entry"]) == list(first.frame["entry"])


def test_without_the_audio_tokenizer_codes_are_skipped_once_and_the_dit_trains(
    tiny_ace_step, tmp_path
):
    folder = dataset(tmp_path, tiny_ace_step)
    shutil.rmtree(tmp_path / "models" / "tiny" / "audio_tokenizer")
    encoded, runs = encode_dataset(folder, tmp_path / "models", tmp_path)
    [warning] = encoded.result.extra["warnings"]  # once per base model, not once per file
    assert "audio codes are skipped" in warning and "DiT training still runs" in warning
    assert encoded.frame["codes"].isna().all() and not encoded.result.skipped
    assert "audio_codes" not in load_file(encoded.frame["latents"][0])
    from tunesmith.families.ace_step.trainer import AceStepTrainer

    placement = Placement("torch", "cpu", "float32", "tests")
    trainer = AceStepTrainer(
        runs[0], tmp_path / "models" / "tiny", encoded.frame, tmp_path / "run", placement, {}
    )
    assert torch.isfinite(torch.tensor(trainer.step().loss))


def test_lyrics_that_are_not_utf8_skip_the_item_unless_the_run_says_instrumental(
    tiny_ace_step, tmp_path
):
    runs = RUNS.format(name="strict", train="") + RUNS.format(
        name="lenient", train='unreadable_lyrics = "instrumental"'
    )
    folder = dataset(tmp_path, tiny_ace_step, runs=runs)
    (folder / "clip0.lyrics.txt").write_bytes(b"caf\xe9 verse")  # Latin-1
    encoded, _ = encode_dataset(folder, tmp_path / "models", tmp_path)
    [skipped] = encoded.result.skipped
    assert skipped.path == "clip0.wav"
    assert skipped.reason.startswith("run strict: clip0.lyrics.txt: not UTF-8 (byte 0xe9 at offset")
    assert 'train.unreadable_lyrics = "instrumental"' in skipped.reason
    frame = encoded.frame
    assert sorted(frame[frame["run"] == "strict"]["path"]) == ["clip1.wav", "clip2.wav"]
    lenient = frame[(frame["run"] == "lenient") & (frame["path"] == "clip0.wav")].iloc[0]
    assert lenient["instrumental"]
    with safe_open(lenient["lyrics_states"], "pt") as f:  # the string is in the metadata
        text = f.metadata()["text"]
    assert text.endswith("[Instrumental]<|endoftext|>")
    # each run trains on its own rows only
    for name in ("strict", "lenient"):
        run = next(r for r in _runs(folder) if r.name == name)
        plan = stage.plan(
            run,
            tmp_path / "models" / "tiny",
            frame.assign(family="ace-step"),
            tmp_path / "out",
            Placement("torch", "cpu", "float32", "t"),
            tmp_path / "fp.json",
        )
        assert set(plan.items["run"]) == {name}


def _runs(folder: Path):
    from tunesmith.train.config import load_runs

    return load_runs(folder, "audio")


def test_a_file_over_the_limit_is_cut_with_a_warning(tiny_ace_step, tmp_path, monkeypatch):
    """The 600 s cut (tunesmith.media.audio, ACE-Step 1.5's DURATION_MAX), here at 1 s."""
    monkeypatch.setattr("tunesmith.media.audio.MAX_SECONDS", 1.0)
    folder = dataset(tmp_path, tiny_ace_step, count=1)
    encoded, _ = encode_dataset(folder, tmp_path / "models", tmp_path)
    [warning] = encoded.result.extra["warnings"]
    assert "clip0.wav: 1.6 s is over 1 s; cut there" in warning
    assert list(encoded.frame["frames"]) == [25]


def test_the_genre_ratio_is_the_runs_else_the_datasets_else_hot_steps(tmp_path):
    from tunesmith.train.config import resolve_run

    rows = [{"path": f"c{i}.wav", "genre_ratio": 0} for i in range(10)]
    raw = {"name": "r", "family": "ace-step", "base_model": "tiny"}
    run = resolve_run(raw, tmp_path / "tunesmith.toml", 0)
    assert sum(captions.genre_choice(rows, run, None).values()) == 3  # HOT-Step's 30 %
    assert sum(captions.genre_choice(rows, run, 0).values()) == 0  # the dataset says 0
    run = resolve_run({**raw, "train": {"genre_ratio": 50}}, tmp_path / "tunesmith.toml", 0)
    assert sum(captions.genre_choice(rows, run, 0).values()) == 5
    assert captions.dataset_genre_ratio(tmp_path) is None
    (tmp_path / "dataset.json").write_text(json.dumps({"metadata": {"genre_ratio": 20}}))
    assert captions.dataset_genre_ratio(tmp_path) == 20
    (tmp_path / "tunesmith.toml").write_text("[dataset]\ngenre_ratio = 0\n")
    assert captions.dataset_genre_ratio(tmp_path) == 0

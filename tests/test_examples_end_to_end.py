"""The example datasets through every stage, the way `make demo` runs them."""

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from safetensors import safe_open

from pipelines.status import STAGES
from tests.conftest import make_storage, materialize
from tunesmith.examples import RINGS_TOML, make_examples
from tunesmith.examples.loops import LOOPS


@pytest.fixture(scope="module")
def loops_storage(tmp_path_factory):
    """The roots the loops example is built in once, for every test of it here."""
    return make_storage(tmp_path_factory.mktemp("loops"))


@pytest.fixture(scope="module")
def loops_instance():
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture(scope="module")
def loops_built(loops_storage, loops_instance):
    """The loops example through every stage, with the tiny Stable Audio 3: built once for the
    tests that read it (none of them changes what it built)."""
    make_examples(Path(loops_storage.datasets_root), Path(loops_storage.models_root))
    return materialize(loops_instance, loops_storage, "loops")


@pytest.mark.slow
def test_labels_recover_the_known_tempo_and_key_of_the_loops(loops_storage, loops_built):
    md = loops_built
    assert md["labels"]["items"] == len(LOOPS) and md["labels"]["skipped"] == 0
    table = pd.read_parquet(Path(loops_storage.out_root) / "loops" / "labels.parquet")
    found = table.set_index("path")
    tempo_ok = key_ok = 0
    for spec in LOOPS:
        row = found.loc[spec.filename]
        tempo_ok += abs(row["bpm"] - spec.bpm) <= 0.02 * spec.bpm  # octave errors fail too
        key_ok += (row["key"], row["scale"]) == (spec.key, spec.scale)
        print(spec.filename, spec.bpm, row["bpm"], spec.key, spec.scale, row["key"], row["scale"])
    assert tempo_ok / len(LOOPS) >= 7 / 8
    assert key_ok / len(LOOPS) >= 6 / 8


@pytest.mark.slow
def test_rings_are_labelled_encoded_and_the_adapter_beats_the_base_model_beside_it(
    storage, instance
):
    """The rings example through every stage with the tiny SDXL (one build: it trains)."""
    make_examples(Path(storage.datasets_root), Path(storage.models_root))
    md = materialize(instance, storage, "rings")
    assert md["encoded"]["computed"] == 12 and md["encoded"]["skipped"] == 0
    assert md["labels"]["items"] >= 12 and md["labels"]["skipped"] == 0
    table = pd.read_parquet(Path(storage.out_root) / "rings" / "labels.parquet")
    assert (table["caption_source"] == "txt").all()
    assert table["caption"].str.contains("thick dark rings").all()
    assert (table["width"] > 0).all() and (table["mode"] == "RGB").all()
    assert not (Path(storage.out_root) / "rings" / "dataset.json").exists()  # Side-Step's: songs

    report = json.loads((Path(storage.out_root) / "rings" / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    print(run["history"])
    assert run["best_loss"] < run["base_loss"]
    assert run["validation_note"] == "validation on 1 held-out picture(s)"
    assert run["family"] == "sdxl" and run["steps"] == 200
    assert Path(run["best_path"]).name == "rings-lora.safetensors"
    assert Path(run["best_path"]).with_suffix(".kohya.safetensors").exists()
    learned = md["checks"].pop("adapters_learned")  # a warning at most, whichever it says
    assert md["checks"] == {
        "underfit_contract": True,
        "sdxl_files": True,
        "ace_step_files": True,
        "ace_step_planner_files": True,
    }
    # measured with the example's tiny CLIP and DINOv2 at every validation
    quality = run["quality"]
    assert [row["step"] for row in quality["steps"]] == [0, 50, 100, 150, 200]
    assert all("style_dino" in row for row in quality["steps"])
    assert learned == quality["verdict"]["learned"]
    assert md["renders"]["computed"] == 4
    assert all(Path(r["image"]).suffix == ".png" and r["wav"] is None for r in report["renders"])
    (page,) = report["auditions"]
    assert Path(page).name == "rings-lora.html" and 'class="picture"' in Path(page).read_text()

    # what `make demo` does the second time: the examples are rewritten (unchanged), then built
    make_examples(Path(storage.datasets_root), Path(storage.models_root))
    again = materialize(instance, storage, "rings")
    assert {stage: again[stage]["computed"] for stage in again if stage != "checks"} == {
        stage: 0 for stage in again if stage != "checks"
    }


def cli(env, *args):
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_command_line_run_status_and_gc(tmp_path):
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "TUNESMITH_DATASETS": str(tmp_path / "examples"),
        "TUNESMITH_OUT": str(tmp_path / "out"),
        "TUNESMITH_STORE": str(tmp_path / "store"),
    }
    cli(env, "examples")
    # The command line is under test here, not the training: a short run and one small demo.
    toml = tmp_path / "examples" / "rings" / "tunesmith.toml"
    short = RINGS_TOML.split("[[runs.demos]]")[0].replace("steps = 200", "steps = 4")
    toml.write_text(short + '[[runs.demos]]\nprompt = "a picture"\nsteps = 2\n')
    assert "missing" in cli(env, "status", "rings")
    out = cli(env, "run", "rings")
    assert "labels" in out and "report.json" in out
    folder = next((tmp_path / "out" / "rings" / "adapters").glob("rings-lora-*"))
    assert "      run rings-lora: quality at step " in out, out  # the kept adapter vs base
    for tool, name in [
        ("diffusers (StableDiffusionXLPipeline.load_lora_weights), PEFT", "rings-lora.safetensors"),
        ("ComfyUI, A1111/Forge, kohya's scripts", "rings-lora.kohya.safetensors"),
    ]:
        assert f"        for {tool}: {folder / name}\n" in out, out
    (listed,) = json.loads(cli(env, "adapters", "rings", "--json"))
    assert (listed["dataset"], listed["run"], listed["family"]) == ("rings", "rings-lora", "sdxl")
    assert [Path(f["path"]).name for f in listed["files"]] == [
        "rings-lora.safetensors",
        "rings-lora.kohya.safetensors",
    ]
    assert "rings / rings-lora (sdxl, base tiny-sdxl): best step " in cli(env, "adapters")
    status = cli(env, "status", "rings")
    assert "stale" not in status and status.count("fresh") == len(STAGES)
    caption = tmp_path / "examples" / "rings" / "rings_00.txt"
    caption.write_text("rngstyle, an edited caption")
    status = cli(env, "status", "rings")
    assert "files in the dataset folder changed" in status and "upstream manifest" in status
    first = json.loads((tmp_path / "out" / "rings" / "report.json").read_text())
    out = cli(env, "run", "rings")
    report = json.loads((tmp_path / "out" / "rings" / "report.json").read_text())
    # why the run trained again, and which folder is current now
    (before,) = [Path(r["run_dir"]).name for r in first["stages"]["adapters"]["runs"]]
    (now,) = [Path(r["run_dir"]).name for r in report["stages"]["adapters"]["runs"]]
    said = f"run rings-lora: retrained into {now}: 1 caption changed (rings_00.png) "
    assert f"{said}(the last build's {before} is kept)" in out, out
    index = json.loads((tmp_path / "out" / "rings" / "adapters" / "index.json").read_text())
    assert index["rings-lora"]["current"] == now
    assert index["rings-lora"]["earlier"] == [
        {"folder": before, "made_because": "first training of this run"}
    ]
    assert report["stages"]["labels"]["computed"] == 1
    assert report["stages"]["labels"]["cached"] == 11
    assert cli(env, "status", "rings").count("fresh") == len(STAGES)
    gc = json.loads(cli(env, "gc"))
    # the edited caption's old label record and text encoding, the old adapter's render
    assert gc["removed"] == 3
    # The adapter trained on the old caption stays in its own folder, named in the summary and
    # the report, until `tunesmith gc --runs` removes it; the current run's folder stays.
    (run,) = report["stages"]["adapters"]["runs"]
    (older,) = [Path(e["path"]) for e in report["stages"]["adapters"]["superseded"]]
    assert older.is_dir() and older != Path(run["run_dir"]) and older.parent.name == "adapters"
    assert "tunesmith gc --runs" in out and older.name in out
    listed = cli(env, "gc", "--runs", "--dry-run")
    assert f"would remove {older}" in listed and older.is_dir()
    assert json.loads(listed.splitlines()[-1])["would remove"] == 1
    assert json.loads(cli(env, "gc", "--runs").splitlines()[-1])["removed"] == 1
    assert not older.exists() and Path(run["best_path"]).is_file()
    report = json.loads((tmp_path / "out" / "rings" / "report.json").read_text())
    assert "superseded" not in report["stages"]["adapters"]
    assert json.loads(cli(env, "gc", "--runs").splitlines()[-1])["removed"] == 0


@pytest.mark.slow
def test_the_loops_adapter_beats_the_base_model_on_held_out_audio(loops_storage, loops_built):
    report = json.loads((Path(loops_storage.out_root) / "loops" / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    print(run["history"])
    assert run["best_loss"] < run["base_loss"]
    assert run["validation_note"] == "validation on 1 held-out item(s)"
    assert Path(run["best_path"]).exists() and Path(run["last_path"]).exists()
    assert run["placement"] == "torch/cpu/float32" and run["steps"] == 200
    assert loops_built["adapters"]["computed"] == 1
    quality = run["quality"]  # the example's tiny CLAP measured every validation's renders
    assert [row["step"] for row in quality["steps"]] == [0, 50, 100, 150, 200]
    checks = dict(loops_built["checks"])
    assert checks.pop("adapters_learned") == quality["verdict"]["learned"]
    assert checks == {
        "underfit_contract": True,
        "sdxl_files": True,
        "ace_step_files": True,
        "ace_step_planner_files": True,
    }


@pytest.mark.slow
def test_the_loops_renders_and_audition_page_are_listed_in_the_report(
    loops_storage, loops_instance, loops_built
):
    report = json.loads((Path(loops_storage.out_root) / "loops" / "report.json").read_text())
    (page,) = report["auditions"]
    assert Path(page).exists() and page.endswith("loops-dora.html")
    sides = {(r["demo"], r["side"]) for r in report["renders"]}
    assert sides == {(d, s) for d in ("demo0", "demo1") for s in ("base", "adapter")}
    assert all(Path(r["wav"]).exists() for r in report["renders"])
    assert loops_built["renders"]["computed"] == 4
    assert "loops-dora_loss_curve" in loops_built["auditions"]
    # the page's settings are those the adapter file says it was trained with
    (run,) = report["stages"]["adapters"]["runs"]
    with safe_open(run["best_path"], "pt") as f:
        trained = json.loads(f.metadata()["lora_config"])
    text = Path(page).read_text()
    shown = dict(re.findall(r"<tr><th>(adapter\.[a-z_]+)</th><td>([^<]*)</td></tr>", text))
    assert json.loads(html.unescape(shown["adapter.rank"])) == trained["rank"]
    assert json.loads(html.unescape(shown["adapter.alpha"])) == trained["alpha"]
    assert html.unescape(shown["adapter.type"]) == trained["adapter_type"]
    assert json.loads(html.unescape(shown["adapter.include"])) == trained["include"]
    assert run["settings"]["adapter"]["include"] == trained["include"]  # the report too

    # what `make demo` does the second time: the examples are rewritten (unchanged), then built
    make_examples(Path(loops_storage.datasets_root), Path(loops_storage.models_root))
    again = materialize(loops_instance, loops_storage, "loops")
    assert {stage: again[stage]["computed"] for stage in again if stage != "checks"} == {
        stage: 0 for stage in again if stage != "checks"
    }

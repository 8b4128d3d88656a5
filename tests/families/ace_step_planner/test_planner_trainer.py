"""A planner run on the one loop: HOT-Step's LM defaults, training from the encoded stage's
codes, the validation loss measured on the base first, PEFT and mlx-lm files that load, a
bit-exact resume on the CPU, and items without codes left out with one message."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.families.ace_step.conftest import encode_dataset, write_dataset
from tunesmith.backends.placement import Placement
from tunesmith.train.config import resolve_run

PLANNER_RUN = {
    "name": "plan",
    "family": "ace-step-planner",
    "base_model": "tiny",
    "trigger": "zqx",
    "adapter": {"planner": "planner"},
    "train": {"lr": 1e-2, "epochs": 4, "eval_every": 2, "checkpoint_every": 2},
}
CPU = Placement("torch", "cpu", "float32", "tests")


def planner_run(**train):
    raw = {**PLANNER_RUN, "train": {**PLANNER_RUN["train"], **train}}
    return resolve_run(raw, Path("tunesmith.toml"), 0)


@pytest.fixture(scope="module")
def planner_encoded(tiny_ace_step: Path, tiny_planner: Path, tmp_path_factory):
    """(encoded frame of a planner run, models root): five clips, codes from the tiny DiT."""
    work = tmp_path_factory.mktemp("planner-data")
    models = work / "models"
    shutil.copytree(tiny_ace_step, models / "tiny")
    shutil.copytree(tiny_planner, models / "planner")
    folder = write_dataset(work / "clips")
    encoded, _ = encode_dataset(folder, models, work, runs=[planner_run()])
    return encoded.frame, models


def make_trainer(frame, models: Path, run_dir: Path, run=None):
    from tunesmith import family as families

    run = run or planner_run()
    make = families.get("ace-step-planner").trainer("torch")
    metadata = {
        "tunesmith.version": "test",
        "tunesmith.base_model_fingerprint": "fp",
        "tunesmith.run_key": "key",
    }
    return make(run, models / "tiny", frame, run_dir, CPU, metadata)


def test_a_planner_run_takes_hot_steps_lm_defaults():
    raw = {k: v for k, v in PLANNER_RUN.items() if k != "train"}
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    a, t = run.adapter, run.train
    assert (a.type, a.rank, a.scale_alpha, a.planner) == ("lora", 16, 32.0, "planner")
    assert (t.lr, t.accumulation, t.epochs, t.target_loss) == (1e-4, 2, 75, 4.0)
    assert (t.grad_clip, t.warmup, t.lr_floor) == (1.0, 0.05, 0.1)
    dit = resolve_run({"name": "d", "family": "ace-step"}, Path("tunesmith.toml"), 0)
    assert (dit.train.accumulation, dit.train.lr) == (4, 5e-4)
    with pytest.raises(ValueError, match='adapter.type = "lokr": must be "lora"'):
        resolve_run({**raw, "adapter": {"type": "lokr"}}, Path("tunesmith.toml"), 0)
    with pytest.raises(ValueError, match="adapter.planner is not a setting"):  # the DiT has none
        resolve_run({"family": "ace-step", "adapter": {"planner": "my-lm"}}, Path("x"), 0)


def test_the_loop_trains_the_planner_and_writes_both_folders(planner_encoded, tmp_path):
    from tunesmith import family as families
    from tunesmith.families.ace_step_planner import adapter_files
    from tunesmith.train import loop

    frame, models = planner_encoded
    lines: list[str] = []
    trainer = make_trainer(frame, models, tmp_path)
    result = loop.train(trainer, tmp_path, log=lines.append, progress=open("/dev/null", "w"))
    assert "planner planner" in lines[0] and "optimizer muon" in lines[0]
    assert result.history[0]["step"] == 0 and result.base_loss == result.history[0]["loss"]
    assert result.best_loss < result.base_loss
    best = Path(result.best_path)
    assert best == tmp_path / "plan" / "adapter_model.safetensors"
    metadata = families.get("ace-step-planner").validate_files(best)
    assert metadata["hot_step_trigger"] == "zqx" and metadata["tunesmith.run_key"] == "key"
    peft, _ = adapter_files.read(best.parent)
    mlx, mlx_metadata = adapter_files.read(tmp_path / "plan.mlx-lm")
    assert mlx_metadata["hot_step_trigger"] == "zqx" and set(mlx.factors) == set(peft.factors)
    assert all(torch.equal(mlx.factors[m][1], b) for m, (_, b) in peft.factors.items())
    assert len(peft.factors) == 2 * 7  # two layers, seven projections


def test_a_resumed_planner_run_is_bit_exact_on_the_cpu(planner_encoded, tmp_path):
    from tunesmith.train import loop

    frame, models = planner_encoded
    quiet = open("/dev/null", "w")
    straight = make_trainer(frame, models, tmp_path / "a", planner_run(steps=6))
    loop.train(straight, tmp_path / "a", log=lambda _: None, progress=quiet)
    first = make_trainer(frame, models, tmp_path / "b", planner_run(steps=2))
    loop.train(first, tmp_path / "b", log=lambda _: None, progress=quiet)
    again = make_trainer(frame, models, tmp_path / "b", planner_run(steps=6))
    result = loop.train(again, tmp_path / "b", log=lambda _: None, progress=quiet)
    assert result.resumed_from == 2
    a = load_file(tmp_path / "a" / "state" / "step=6" / "state.safetensors")
    b = load_file(tmp_path / "b" / "state" / "step=6" / "state.safetensors")
    assert a.keys() == b.keys()
    assert all(a[k].equal(b[k]) for k in a)


def test_holdout_zero_trains_and_validates_on_the_training_songs_saying_so(
    planner_encoded, tmp_path
):
    from tunesmith.train import loop

    frame, models = planner_encoded
    lines: list[str] = []
    trainer = make_trainer(frame, models, tmp_path, planner_run(holdout=0, steps=2))
    assert len(trainer.validation) == len(trainer.train_items) == 5
    result = loop.train(trainer, tmp_path, log=lines.append, progress=open("/dev/null", "w"))
    note = "validation on training songs: train.holdout = 0, none held out"
    assert note in result.validation_note and result.steps == 2
    assert any(note in line for line in lines)


def test_a_rank_below_muon_min_dim_trains_with_adamw_and_says_so(planner_encoded, tmp_path):
    frame, models = planner_encoded
    run = planner_run()
    run = replace(run, adapter=replace(run.adapter, rank=4, alpha=8.0))
    trainer = make_trainer(frame, models, tmp_path, run)
    assert "rank 4 < muon_min_dim 16" in trainer.start_note
    assert "optimizer muon: 0 Muon / 28 AdamW" in trainer.start_note
    assert "every parameter trains with AdamW" in trainer.start_note


def test_items_without_codes_skip_the_run_with_one_message(planner_encoded, tmp_path):
    from tunesmith import family as families

    frame, models = planner_encoded
    without = frame.drop(columns=["codes"])
    with pytest.raises(ValueError, match="5 of 5 items have no audio codes") as raised:
        families.get("ace-step-planner").other_models(planner_run(), models / "tiny", None, without)
    assert str(raised.value).count("\n") == 0
    some = frame.copy()
    some.loc[some.index[0], "codes"] = None
    trainer = make_trainer(some, models, tmp_path)
    assert "1 of 5 items have no audio codes" in trainer.start_note


MLX = Placement("mlx", "cpu", "float32", "tests")


def make_mlx_trainer(frame, models: Path, run_dir: Path, run=None):
    pytest.importorskip("mlx_lm")
    from tunesmith import family as families

    make = families.get("ace-step-planner").trainer("mlx")
    metadata = {
        "tunesmith.version": "test",
        "tunesmith.base_model_fingerprint": "fp",
        "tunesmith.run_key": "key",
    }
    return make(run or planner_run(), models / "tiny", frame, run_dir, MLX, metadata)


def test_the_mlx_backend_trains_on_the_loop_and_matches_torch_at_the_start(
    planner_encoded, tmp_path
):
    from tunesmith import family as families
    from tunesmith.families.ace_step_planner import adapter_files
    from tunesmith.train import loop

    frame, models = planner_encoded
    lines: list[str] = []
    mlx = make_mlx_trainer(frame, models, tmp_path / "mlx")
    torch_base = make_trainer(frame, models, tmp_path / "torch").validation_loss()
    mlx_base = mlx.validation_loss()
    assert abs(mlx_base - torch_base) <= 1e-5 * torch_base
    result = loop.train(mlx, tmp_path / "mlx", log=lines.append, progress=open("/dev/null", "w"))
    assert "(mlx)" in lines[0] and "Muon is on the torch backend" in lines[0]
    assert result.best_loss < result.base_loss
    best = Path(result.best_path)
    metadata = families.get("ace-step-planner").validate_files(best)
    assert metadata["hot_step_trigger"] == "zqx"
    peft, _ = adapter_files.read(best.parent)
    mlx_factors, _ = adapter_files.read(best.parent.parent / "plan.mlx-lm")
    assert 0 < max(float(b.abs().max()) for _, b in mlx_factors.factors.values())
    for module, (a, b) in mlx_factors.factors.items():  # float32 twin, the bf16 file's values
        assert torch.equal(a, peft.factors[module][0]) and torch.equal(b, peft.factors[module][1])


def test_a_resumed_mlx_planner_run_is_bit_exact_on_the_cpu(planner_encoded, tmp_path):
    from tunesmith.train import loop

    frame, models = planner_encoded
    quiet = open("/dev/null", "w")
    straight = make_mlx_trainer(frame, models, tmp_path / "a", planner_run(steps=6))
    loop.train(straight, tmp_path / "a", log=lambda _: None, progress=quiet)
    first = make_mlx_trainer(frame, models, tmp_path / "b", planner_run(steps=2))
    loop.train(first, tmp_path / "b", log=lambda _: None, progress=quiet)
    again = make_mlx_trainer(frame, models, tmp_path / "b", planner_run(steps=6))
    result = loop.train(again, tmp_path / "b", log=lambda _: None, progress=quiet)
    assert result.resumed_from == 2
    a = load_file(tmp_path / "a" / "state" / "step=6" / "state.safetensors")
    b = load_file(tmp_path / "b" / "state" / "step=6" / "state.safetensors")
    assert a.keys() == b.keys()
    assert all(a[k].equal(b[k]) for k in a)


def test_a_missing_or_broken_planner_skips_the_run_naming_the_folder(planner_encoded, tmp_path):
    from tunesmith import family as families

    frame, models = planner_encoded
    family = families.get("ace-step-planner")
    run = planner_run()
    missing = replace(run, adapter=replace(run.adapter, planner="acestep-5Hz-lm-0.6B"))
    with pytest.raises(ValueError, match="no planner folder 'acestep-5Hz-lm-0.6B'"):
        family.other_models(missing, models / "tiny", None, frame)
    broken = tmp_path / "broken"
    shutil.copytree(models / "planner", broken)
    (broken / "model.safetensors").unlink()
    (broken / "pytorch_model.bin").write_bytes(b"not loaded")
    pickled = replace(run, adapter=replace(run.adapter, planner=str(broken)))
    with pytest.raises(ValueError, match=f"(?s){broken}.*pickled weights are never loaded"):
        family.other_models(pickled, models / "tiny", None, frame)


def test_a_planner_that_passed_is_not_loaded_again_until_it_changes(planner_encoded, tmp_path):
    """Every build keys a planner run by its folder: a folder that passed the check with the
    same fingerprint is not checked again (no transformers import in a no-change build), and a
    changed vocabulary is checked, and refused, at once."""
    import subprocess
    import sys

    from tunesmith import family as families
    from tunesmith.families.ace_step_planner.tiny import build_tiny_planner

    frame, models = planner_encoded
    folder, cache = tmp_path / "planner", tmp_path / "cache" / "fingerprints.json"
    shutil.copytree(models / "planner", folder)
    run = planner_run()
    run = replace(run, adapter=replace(run.adapter, planner=str(folder)))
    family = families.get("ace-step-planner")
    first = family.other_models(run, models / "tiny", cache, frame)["planner"]
    script = (
        "import sys; from pathlib import Path\n"
        "from tunesmith.families.ace_step_planner.inputs import checked_planner\n"
        f"print(checked_planner(Path({str(folder)!r}), Path({str(cache)!r})))\n"
        "print(sorted(m for m in ('transformers', 'peft') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[4],
    ).stdout.split("\n")
    assert out[:2] == [first, "[]"]
    _, plain = build_tiny_planner(seed=0, codebook_size=0)  # a Qwen3 vocabulary: no code tokens
    plain.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"no <\|audio_code_N\|> tokens"):
        family.other_models(run, models / "tiny", cache, frame)


def test_caption_dropout_trains_the_drawn_items_on_the_trigger_alone(planner_encoded, tmp_path):
    """`train.caption_dropout`: in each epoch the items `caption_dropped` draws train on the
    trigger alone (prompt and metas), the others on their captions; validation keeps them."""
    from tunesmith.families.ace_step_planner.data import caption_dropped
    from tunesmith.train.config import ConfigError

    frame, models = planner_encoded
    trainer = make_trainer(frame, models, tmp_path / "run", planner_run(caption_dropout=0.5))
    count, seed = len(trainer.train_items), trainer.run.train.seed
    dropped = []
    for epoch in range(1, 7):
        chosen = trainer.window_examples(list(range(count)), epoch)
        for index, example in enumerate(chosen):
            full = trainer.train_items[index]
            assert example.item == full.item
            drop = caption_dropped(0.5, seed, epoch, index)
            assert example.caption == ("zqx" if drop else full.caption)
            if drop:
                dropped.append((epoch, index))
                prompt = trainer.tokenizer.decode(example.input_ids[: example.prompt_tokens])
                assert "zqx" in prompt and full.caption not in prompt
    assert 0 < len(dropped) < 6 * count
    assert all("a loop number" in e.caption for e in trainer.validation)
    plain = make_trainer(frame, models, tmp_path / "plain")
    assert plain.window_examples(list(range(count)), 1) == plain.train_items
    with pytest.raises(ConfigError, match="train.caption_dropout is not a setting"):  # a DiT run
        resolve_run(
            {
                "name": "d",
                "family": "ace-step",
                "base_model": "tiny",
                "train": {"caption_dropout": 0.1},
            },
            Path("tunesmith.toml"),
            0,
        )


def test_a_deleted_best_planner_adapter_comes_back_whole(planner_encoded, tmp_path):
    """Both folders of the best adapter deleted: the next run writes them again from its state,
    the mlx-lm twin with its own adapter_config.json (not PEFT's, which has the same name)."""
    from tunesmith.train import loop

    frame, models = planner_encoded
    quiet = open("/dev/null", "w")
    result = loop.train(
        make_trainer(frame, models, tmp_path, planner_run(steps=4)),
        tmp_path,
        log=lambda _: None,
        progress=quiet,
    )
    folders = [Path(result.best_path).parent, tmp_path / "plan.mlx-lm"]
    before = {p: p.read_bytes() for f in folders for p in sorted(f.iterdir())}
    assert (
        len(before) == 4
        and before[folders[0] / "adapter_config.json"] != before[folders[1] / "adapter_config.json"]
    )
    for folder in folders:
        shutil.rmtree(folder)
    loop.train(
        make_trainer(frame, models, tmp_path, planner_run(steps=4)),
        tmp_path,
        log=lambda _: None,
        progress=quiet,
    )
    assert {p: p.read_bytes() for f in folders for p in sorted(f.iterdir())} == before

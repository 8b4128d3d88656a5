"""ACE-Step adapter files read by the loaders people use: diffusers' `AceStepPipeline` loads our
LoRA folder and computes the trainer's DiT; PEFT and LyCORIS load our LoKr onto the same
function; PEFT loads the diffusers-named twin whole onto diffusers' DiT, and each folder in the
other model's loader attaches what the conventions' table says; every key maps through
ComfyUI's ACE-Step 1.5 key map; renders at strength 0 are the base model's, byte for byte; the
file check refuses what those loaders would misread. Every load counts the layers attached
against the layers in the file."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import peft
import pytest
import torch
from lycoris import create_lycoris_from_weights
from lycoris.logging import logger as lycoris_logger
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

from tests.attached import assert_attached_whole, layers_in_file, peft_layers
from tunesmith.adapters import torch_lokr
from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step import files
from tunesmith.families.ace_step.model import SAMPLE_RATE, load_pipeline
from tunesmith.families.ace_step.sample import Renderer
from tunesmith.families.ace_step.trainer import AceStepTrainer
from tunesmith.media.writers import wav_bytes
from tunesmith.store.tensors import write_safetensors
from tunesmith.train.config import resolve_run

lycoris_logger.setLevel(logging.WARNING)
PLACEMENT = Placement("torch", "cpu", "float32", "tests")
LINEAGE = {
    "tunesmith.version": "t",
    "tunesmith.base_model_fingerprint": "fp",
    "tunesmith.run_key": "k",
}
# LoRA: alpha 2 x rank (the scale 2 folds into B exactly) and an alpha that does not.
# LoKr: w2 full with alpha ≠ dim, and w2 split into w2_a·w2_b.
SETTINGS = {
    "lora": {"type": "lora", "rank": 4, "alpha": 8.0},
    "lora-odd": {"type": "lora", "rank": 4, "alpha": 3.0},
    "lokr": {"type": "lokr", "rank": 8, "alpha": 12.0, "factor": 4},
    "lokr-split": {"type": "lokr", "rank": 3, "alpha": 5.0, "factor": 4},
}


def trained(ace_encoded, name: str, run_dir: Path) -> AceStepTrainer:
    """A trainer whose adapter factors are random (a trained adapter, not a zero one)."""
    encoded, _, models = ace_encoded
    adapter = SETTINGS[name]
    train = {"optimizer": "adamw", "crop_frames": 24}
    if adapter["type"] == "lokr":
        train.update(lr=2e-3, accumulation=4)
    raw = {
        "name": "unit",
        "family": "ace-step",
        "base_model": "tiny",
        "trigger": "zqx",
        "adapter": adapter,
        "train": train,
    }
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    rows = encoded.frame[encoded.frame["run"] == "unit"]
    ours = AceStepTrainer(run, models / "tiny", rows, run_dir, PLACEMENT, LINEAGE)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in ours.params:
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return ours


def inputs(seed: int = 3) -> dict:
    g = torch.Generator().manual_seed(seed)
    return dict(
        hidden_states=torch.randn(1, 12, 8, generator=g),
        timestep=torch.tensor([0.6]),
        timestep_r=torch.tensor([0.6]),
        encoder_hidden_states=torch.randn(1, 5, 32, generator=g),
        context_latents=torch.randn(1, 12, 16, generator=g),
    )


def output(dit) -> torch.Tensor:
    with torch.no_grad():
        return dit(**inputs()).sample


def rounded(ours: AceStepTrainer) -> torch.Tensor:
    """The trainer's DiT with every factor as the file stores it: bf16, with the scale folded
    into LoRA's B and LoKr's w1 before the rounding (and divided out after, exact to 2^-24)."""
    saved = [p.detach().clone() for p in ours.params]
    a = ours.run.adapter
    with torch.no_grad():
        for name, p in ours.named:
            scale = 1.0
            if name.endswith("lora_B"):
                scale = a.scale_alpha / a.rank
            elif name.endswith("lokr_w1"):
                scale = a.scale_alpha / a.rank  # LoKr's scaling alpha/dim, as PEFT's
            p.copy_((p * scale).to(torch.bfloat16).float() / scale)
        out = output(ours.transformer)
        for p, value in zip(ours.params, saved, strict=True):
            p.copy_(value)
    return out


@pytest.fixture(scope="module")
def written(ace_encoded, tmp_path_factory) -> dict:
    """name → (trainer, path of its adapter_model.safetensors)."""
    out = {}
    for name in SETTINGS:
        folder = tmp_path_factory.mktemp(name)
        ours = trained(ace_encoded, name, folder)
        out[name] = (ours, ours.write_adapter(ours.names.best(0), 3, 1, 0.5))
    return out


@pytest.mark.parametrize("name", ["lora", "lora-odd"])
def test_diffusers_loads_our_lora_and_computes_the_trainers_dit(written, ace_encoded, name):
    ours, path = written[name]
    pipe = load_pipeline(ace_encoded[2] / "tiny")
    base = output(pipe.transformer)
    pipe.load_lora_weights(str(path.parent), weight_name=path.name, adapter_name="x")
    assert_attached_whole(peft_layers(pipe.transformer), path)
    loaded, trainer = output(pipe.transformer), output(ours.transformer)
    effect = (trainer - base).abs().max()
    assert effect > 0.1  # the adapter does something
    # bf16 keeps 8 bits of mantissa (0.4 % a value), compounding through the DiT's layers and
    # norms: measured 1.2 % (alpha/rank 2) and 0.45 % (0.75) of the adapter's own effect.
    assert (loaded - trainer).abs().max() <= 0.03 * effect
    # what the file stores, in the trainer's own layers, is what diffusers computes
    assert (loaded - rounded(ours)).abs().max() <= 1e-5 * trainer.abs().max()


def original_named(dit) -> nn.Module:
    """A module tree naming the DiT's own Linear layers as ACE-Step 1.5's decoder does."""
    layers = nn.ModuleList()
    for block in dit.layers:
        attention = {
            kind: nn.ModuleDict(
                {"q_proj": a.to_q, "k_proj": a.to_k, "v_proj": a.to_v, "o_proj": a.to_out[0]}
            )
            for kind, a in (("self_attn", block.self_attn), ("cross_attn", block.cross_attn))
        }
        mlp = nn.ModuleDict(
            {n: getattr(block.mlp, n) for n in ("gate_proj", "up_proj", "down_proj")}
        )
        layers.append(nn.ModuleDict({**attention, "mlp": mlp}))
    return nn.ModuleDict({"layers": layers})


def graft(dit, named: nn.Module) -> None:
    """Put the (wrapped) layers of `named` back into the DiT under diffusers' names."""
    for block, source in zip(dit.layers, named["layers"], strict=True):
        for kind in ("self_attn", "cross_attn"):
            a, s = getattr(block, kind), source[kind]
            a.to_q, a.to_k, a.to_v, a.to_out[0] = s["q_proj"], s["k_proj"], s["v_proj"], s["o_proj"]
        for n in ("gate_proj", "up_proj", "down_proj"):
            setattr(block.mlp, n, source["mlp"][n])


@pytest.mark.parametrize("name", ["lokr", "lokr-split"])
def test_peft_and_lycoris_load_our_lokr_onto_the_same_function(written, ace_encoded, name):
    ours, path = written[name]
    expected, exact = output(ours.transformer), rounded(ours)
    base = output(load_pipeline(ace_encoded[2] / "tiny").transformer)
    assert (expected - base).abs().max() > 0.05

    dit = load_pipeline(ace_encoded[2] / "tiny").transformer
    by_peft = peft.PeftModel.from_pretrained(original_named(dit), path.parent)
    assert_attached_whole(peft_layers(by_peft), path)
    graft(dit, by_peft.base_model.model)
    assert (output(dit) - exact).abs().max() <= 1e-5 * exact.abs().max()

    dit = load_pipeline(ace_encoded[2] / "tiny").transformer
    network, _ = create_lycoris_from_weights(
        1.0, str(path.parent / files.LYCORIS), original_named(dit)
    )
    assert_attached_whole(len(network.loras), path.parent / files.LYCORIS)
    network.apply_to()
    by_lycoris = output(dit)
    # the PEFT file's bf16 w1, scale folded in: measured 0.36 % and 0.58 % of the adapter's
    # effect from the float32 trainer, as the PEFT folder's reading
    assert (by_lycoris - expected).abs().max() <= 0.03 * (expected - base).abs().max()


@pytest.mark.parametrize("name", list(SETTINGS))
def test_peft_loads_each_folder_whole_onto_the_model_that_names_it(written, ace_encoded, name):
    """The twin onto diffusers' DiT, the first folder onto ACE-Step's original decoder names
    (as Side-Step loads it): every layer attached, the trainer's DiT computed."""
    ours, path = written[name]
    tiny = ace_encoded[2] / "tiny"
    trainer, exact = output(ours.transformer), rounded(ours)
    effect = (trainer - output(load_pipeline(tiny).transformer)).abs().max()
    twin = files.twin_folder(path)
    by_twin = peft.PeftModel.from_pretrained(load_pipeline(tiny).transformer, twin)
    assert_attached_whole(peft_layers(by_twin), twin / files.WEIGHTS)
    assert peft_layers(by_twin) == 22
    dit = load_pipeline(tiny).transformer
    by_original = peft.PeftModel.from_pretrained(original_named(dit), path.parent)
    assert_attached_whole(peft_layers(by_original), path)
    graft(dit, by_original.base_model.model)
    for loaded in (output(by_twin.base_model.model), output(dit)):
        assert (loaded - exact).abs().max() <= 1e-5 * exact.abs().max()
        # bf16 factors against the float32 trainer: measured 0.36 % to 1.2 % of the effect
        assert (loaded - trainer).abs().max() <= 0.03 * effect


def test_each_folder_in_the_other_models_loader_attaches_only_the_mlp_or_nothing(
    written, ace_encoded
):
    """The rows of docs/conventions/ace-step.md that say which loader not to use: PEFT renames
    nothing, so a folder on the model that names its attention otherwise keeps only the MLP;
    diffusers' loader takes PEFT keys only under ACE-Step's names."""
    _, path = written["lora"]
    twin = files.twin_folder(path)
    tiny = ace_encoded[2] / "tiny"
    assert layers_in_file(path) == layers_in_file(twin / files.WEIGHTS) == 22
    on_diffusers = peft.PeftModel.from_pretrained(load_pipeline(tiny).transformer, path.parent)
    assert peft_layers(on_diffusers) == 6  # 2 layers x gate, up, down
    on_original = peft.PeftModel.from_pretrained(
        original_named(load_pipeline(tiny).transformer), twin
    )
    assert peft_layers(on_original) == 6
    pipe = load_pipeline(tiny)
    pipe.load_lora_weights(str(twin), weight_name=files.WEIGHTS, adapter_name="x")
    assert peft_layers(pipe.transformer) == 0


def comfy_key_map(decoder_modules: list[str]) -> dict[str, str]:
    """ComfyUI's rule for ACE-Step 1.5 LoRAs, from reading its `comfy/lora.py`
    (`model_lora_keys_unet`, the `ACEStep15` branch): each decoder weight
    `diffusion_model.decoder.<m>.weight` is found under `base_model.model.<m>` and under
    `lycoris_<m with dots as underscores>`."""
    out = {}
    for module in decoder_modules:
        out[f"base_model.model.{module}"] = f"diffusion_model.decoder.{module}.weight"
        out["lycoris_" + module.replace(".", "_")] = f"diffusion_model.decoder.{module}.weight"
    return out


def test_every_key_maps_through_comfyuis_ace_step_key_map(written, ace_pipe):
    # ComfyUI's ACE-Step 1.5 decoder keeps the original module names (q_proj ... o_proj).
    decoder = [
        files.original_name(n)
        for n, m in ace_pipe.transformer.named_modules()
        if isinstance(m, nn.Linear)
    ]
    key_map = comfy_key_map(decoder)

    def modules(target: Path) -> set[str]:
        return {
            key.rsplit(".", 2 if key.endswith(".weight") else 1)[0] for key in load_file(target)
        }

    for name, (_, path) in written.items():
        targets = [path] + ([path.parent / files.LYCORIS] if name.startswith("lokr") else [])
        for target in targets:
            found = modules(target)
            assert len(found) == 22 and found <= set(key_map), (target, found - set(key_map))
        # the diffusers twin is not ComfyUI's: only its MLP layers map
        assert len(modules(files.twin_folder(path) / files.WEIGHTS) & set(key_map)) == 6


def test_the_trigger_and_lineage_are_in_the_weights_not_the_config(written):
    for name, (_, path) in written.items():
        with safe_open(path, "pt") as f:
            metadata = f.metadata()
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
        assert metadata["hot_step_trigger"] == metadata["modelspec.trigger_phrase"] == "zqx"
        assert metadata["hot_step_trigger_position"] == "prepend"
        assert metadata["tunesmith.run_key"] == "k" and metadata["tunesmith.step"] == "3"
        config = json.loads((path.parent / files.CONFIG).read_text())
        assert not any("trigger" in key or "tunesmith" in key for key in config)
        rank = SETTINGS[name]["rank"]
        assert (config.get("lora_alpha") or config.get("alpha")) == rank  # the scale is folded
        assert metadata["tunesmith.alpha"] == f"{SETTINGS[name]['alpha']:g}"
        assert files.validate_files(path) == metadata
        assert files.validate_files(files.twin_folder(path)) == metadata  # the same pair


def test_the_file_check_refuses_what_loaders_misread(written, tmp_path):
    _, path = written["lora"]
    folder = tmp_path / "bad"
    shutil.copytree(path.parent, folder)
    config = json.loads((folder / files.CONFIG).read_text())
    (folder / files.CONFIG).write_text(json.dumps({**config, "hot_step_trigger": "zqx"}))
    with pytest.raises(ValueError, match="holds metadata keys; PEFT reads every key"):
        files.validate_files(folder / files.WEIGHTS)
    (folder / files.CONFIG).write_text(json.dumps(config))
    tensors = load_file(folder / files.WEIGHTS)
    with safe_open(folder / files.WEIGHTS, "pt") as f:
        metadata = f.metadata()
    write_safetensors(folder / files.WEIGHTS, {k: v.float() for k, v in tensors.items()}, metadata)
    with pytest.raises(ValueError, match=r"tensors in \['F32'\]; expected BF16"):
        files.validate_files(folder)
    renamed = {k.replace(".q_proj.", ".to_q."): v for k, v in tensors.items()}
    write_safetensors(folder / files.WEIGHTS, renamed, metadata)
    with pytest.raises(ValueError, match="is a diffusers name"):
        files.validate_files(folder)
    _, lokr = written["lokr"]
    shutil.copytree(lokr.parent, tmp_path / "lokr")
    (tmp_path / "lokr" / files.LYCORIS).unlink()
    with pytest.raises(ValueError, match="without its LyCORIS twin"):
        files.validate_files(tmp_path / "lokr")


def test_the_file_check_refuses_a_twin_that_is_not_the_folders(written, tmp_path):
    _, path = written["lora"]
    folder, twin = tmp_path / "good", tmp_path / "good.diffusers"
    shutil.copytree(path.parent, folder)
    with pytest.raises(ValueError, match="no diffusers-named twin good.diffusers/"):
        files.validate_files(folder)
    shutil.copytree(files.twin_folder(path), twin)
    assert files.validate_files(folder)["tunesmith.run_key"] == "k"
    tensors = load_file(twin / files.WEIGHTS)
    with safe_open(twin / files.WEIGHTS, "pt") as f:
        metadata = f.metadata()
    key = next(k for k in tensors if k.endswith("to_q.lora_B.weight"))
    changed = {**tensors, key: tensors[key] * 2}
    write_safetensors(twin / files.WEIGHTS, changed, metadata)
    with pytest.raises(ValueError, match="its tensors or metadata are not those of good/"):
        files.validate_files(folder)
    original = {k.replace(".to_q.", ".q_proj."): v for k, v in tensors.items()}
    write_safetensors(twin / files.WEIGHTS, original, metadata)
    with pytest.raises(ValueError, match="is ACE-Step's original name"):
        files.validate_files(folder)


@pytest.mark.parametrize("name", ["lora", "lokr"])
def test_strength_zero_renders_the_base_model_byte_for_byte(written, ace_encoded, name):
    from tunesmith.families.ace_step.config import AceStepDemo

    demo = AceStepDemo(prompt="zqx, a loop", lyrics="[Verse]\nla la", duration=0.5, steps=2)
    base = Renderer(ace_encoded[2] / "tiny", PLACEMENT).render(demo, 0.0)
    renderer = Renderer(ace_encoded[2] / "tiny", PLACEMENT, written[name][1])
    dit = renderer.pipe.transformer  # LoRA: diffusers' loader; LoKr: tunesmith's own layer
    attached = len(torch_lokr.adapter_layers(dit)) if name == "lokr" else peft_layers(dit)
    assert_attached_whole(attached, written[name][1])
    assert base.shape == (2, SAMPLE_RATE // 2)
    assert wav_bytes(renderer.render(demo, 0.0), SAMPLE_RATE) == wav_bytes(base, SAMPLE_RATE)
    assert wav_bytes(renderer.render(demo, 1.0), SAMPLE_RATE) != wav_bytes(base, SAMPLE_RATE)
    with pytest.raises(ValueError, match="only strength 0"):
        Renderer(ace_encoded[2] / "tiny", PLACEMENT).render(replace(demo), 1.0)

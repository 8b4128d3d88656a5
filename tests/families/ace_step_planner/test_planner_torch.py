"""The planner LoRA on PyTorch: the objective, and the PEFT folder transformers + PEFT load."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from safetensors import safe_open

from tests.families.ace_step_planner.conftest import nonzero_b
from tunesmith.families.ace_step_planner.adapter_files import read_metadata, validate_folder
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import ALPHA, RANK, TorchPlannerLora, collate
from tunesmith.formats import FormatError, mlx_lm

TARGETS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
LINEAGE = {"tunesmith.base_model_fingerprint": "abc123", "tunesmith.training_config": "{}"}


def test_lora_on_every_attention_and_mlp_projection(planner):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing between PEFT and transformers reaches a person
        lora = TorchPlannerLora(planner)
    names = lora.parameters()
    layers = planner.model.config.num_hidden_layers
    assert len(names) == 2 * len(TARGETS) * layers  # A and B per projection per layer
    assert {n.split(".")[-4] for n in names} == TARGETS
    a = next(p for n, p in names.items() if "lora_A" in n)
    assert a.shape[0] == RANK == 16 and ALPHA == 32
    assert all(p.dtype == torch.float32 for p in names.values())


def test_loss_is_the_answer_token_cross_entropy(planner, examples):
    lora = TorchPlannerLora(planner)
    nonzero_b(lora.parameters())
    ids, labels, mask = collate(examples[:1], planner.tokenizer.pad_token_id)
    # transformers' own causal-LM loss with the same labels (-100 on the prompt)
    reference = lora.model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert torch.allclose(lora.loss(examples[:1]), reference, rtol=1e-5)
    # a batch is the mean over all its answer tokens, not the mean of the items' means
    singles = [float(lora.loss([e]).detach()) for e in examples]
    weights = [e.answer_tokens for e in examples]
    expected = sum(s * w for s, w in zip(singles, weights, strict=True)) / sum(weights)
    assert float(lora.loss(examples).detach()) == pytest.approx(expected, rel=1e-5)
    assert lora.validation_loss(examples) == pytest.approx(expected, rel=1e-5)


def test_exactly_the_answer_tokens_are_scored(planner, examples):
    lora = TorchPlannerLora(planner)
    nonzero_b(lora.parameters())
    example = examples[0]
    ids = torch.tensor([example.input_ids])
    n = example.prompt_tokens
    with torch.no_grad():
        logits = lora.model(input_ids=ids).logits[0]
    # by hand: positions n-1 .. L-2 predict tokens n .. L-1 (from <think> to <|im_end|>)
    by_hand = torch.nn.functional.cross_entropy(logits[n - 1 : -1], ids[0, n:])
    assert float(lora.loss([example]).detach()) == pytest.approx(float(by_hand), rel=1e-5)
    with_prompt = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:])
    assert float(by_hand) != pytest.approx(float(with_prompt), rel=1e-3)
    lora.loss([example]).backward()
    grads = [p.grad for p in lora.parameters().values()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert all(float(g.abs().max()) > 0 for g in grads)  # B non-zero: A gets gradients too


def test_peft_folder_loads_in_transformers_and_peft(tiny_planner, planner, examples, tmp_path):
    from peft import PeftModel

    lora = TorchPlannerLora(planner)
    nonzero_b(lora.parameters())
    folder = lora.save(tmp_path / "adapter", trigger="zqx", lineage=LINEAGE)
    assert sorted(p.name for p in folder.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["lora_alpha"] == 32 and config["peft_type"] == "LORA"
    assert set(config["target_modules"]) == TARGETS
    assert "zqx" not in json.dumps(config)  # the trigger lives in the weights' metadata only
    with safe_open(folder / "adapter_model.safetensors", "pt") as f:
        keys = list(f.keys())
        assert all(f.get_tensor(k).dtype == torch.bfloat16 for k in keys)
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in keys
    meta = read_metadata(folder)
    assert meta["hot_step_trigger"] == "zqx" == meta["modelspec.trigger_phrase"]
    assert meta["hot_step_trigger_position"] == "prepend"
    assert meta["tunesmith.base_model_fingerprint"] == "abc123"

    lora.load(folder)  # the trainer now holds the bf16-rounded factors it wrote
    ids = torch.tensor([examples[1].input_ids])
    fresh = load_planner(tiny_planner).model
    loaded = PeftModel.from_pretrained(fresh, folder)
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, lora.model(input_ids=ids).logits)
        with loaded.disable_adapter():
            base = loaded(input_ids=ids).logits
        assert not torch.allclose(base, lora.model(input_ids=ids).logits, atol=1e-4)


def test_lineage_must_be_text(planner, tmp_path):
    lora = TorchPlannerLora(planner)
    with pytest.raises(TypeError, match="lineage values must be strings"):
        lora.save(tmp_path / "adapter", lineage={"tunesmith.steps": 10})
    assert not (tmp_path / "adapter").exists()  # nothing half-written


def test_a_twin_that_is_not_the_peft_folder_s_values_is_refused(planner, tmp_path):
    """The check holds the mlx-lm twin to the PEFT folder's (bf16) values, stored as float32."""
    lora = TorchPlannerLora(planner)
    nonzero_b(lora.parameters())
    lora.save(tmp_path / "run.mlx-lm", "mlx-lm")
    folder = lora.save(tmp_path / "run", "peft")
    assert validate_folder(folder) == read_metadata(folder)
    # the unrounded float32 factors beside the bf16 file: another planner, by 4.6e-3 relative
    unrounded = lora.factors()
    document = mlx_lm.config("", 2, RANK, ALPHA / RANK, ())
    mlx_lm.write(tmp_path / "run.mlx-lm", unrounded.factors, document)
    with pytest.raises(FormatError, match="its scale or factors differ"):
        validate_folder(folder)

"""The MLX Stable Audio 3 DiT and duration embedder against diffusers', in float32 on the CPU.

One tiny real base model (`build_tiny_stable_audio_3`, every path awake), converted by
`mlx_convert.from_diffusers`; one set of inputs made once in numpy and fed to both: a batch
of 2 with different timesteps and durations, the second prompt padded, and the training
`local_add_cond` = [ones | zeros]. The torch side is the project's torch path
(`model.conditioning`, then the diffusers transformer), the MLX side its MLX counterpart.

Thresholds: PSNR ≥ 70 dB (fp32 reduction-order differences sit far above it,
a convention bug — RoPE, a transpose, AdaLN chunk order — far below), loss within 1e-4.
"""

from __future__ import annotations

import re

import mlx.core as mx
import numpy as np
import pytest
import torch
from mlx.utils import tree_flatten

from tunesmith.families.stable_audio_3 import model as sa3
from tunesmith.families.stable_audio_3.mlx import convert as mlx_convert
from tunesmith.families.stable_audio_3.mlx.convert import KeyMapError
from tunesmith.families.stable_audio_3.mlx.model import cross_attention_context
from tunesmith.families.stable_audio_3.tiny import build_tiny_stable_audio_3

MIN_PSNR_DB = 70.0
MAX_LOSS_RELATIVE = 1e-4
FRAMES, PROMPT_TOKENS = 24, 8


def psnr(reference: np.ndarray, other: np.ndarray) -> float:
    """10·log10(max|ref|² / MSE), in dB."""
    reference, other = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    mse = np.mean((reference - other) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(np.abs(reference).max() ** 2 / mse))


def rectified_flow_loss(predict, x0, noise, t, frame_mask):
    """noised = x0·(1 − t) + noise·t, target = noise − x0; the squared error averaged over
    valid frames × channels per sample, then over the batch. Works on torch and MLX arrays."""
    noised = x0 * (1 - t)[:, None, None] + noise * t[:, None, None]
    target = noise - x0
    valid = frame_mask[:, None, :]
    squared = (predict(noised) - target) ** 2 * valid
    per_sample = squared.sum(axis=(1, 2)) / (valid.sum(axis=(1, 2)) * x0.shape[1])
    return per_sample.mean()


@pytest.fixture(scope="module")
def pipe():
    return build_tiny_stable_audio_3(seed=0)


@pytest.fixture(scope="module")
def converted(pipe):
    return mlx_convert.from_diffusers(pipe.transformer, pipe.duration_embedder)


@pytest.fixture(scope="module")
def inputs(pipe) -> dict[str, np.ndarray]:
    config = pipe.transformer.config
    rng = np.random.default_rng(0)
    batch, channels, width = 2, config.io_channels, config.cond_token_dim
    prompt_mask = np.ones((batch, PROMPT_TOKENS), bool)
    prompt_mask[1, 3:] = False  # the second prompt is 3 tokens and padding
    frame_mask = np.ones((batch, FRAMES), np.float32)
    frame_mask[1, 17:] = 0.0  # the second clip is shorter than the crop
    return {
        "x0": rng.standard_normal((batch, channels, FRAMES)).astype(np.float32),
        "noise": rng.standard_normal((batch, channels, FRAMES)).astype(np.float32),
        "t": np.array([0.3, 0.85], np.float32),
        "prompt_embeds": rng.standard_normal((batch, PROMPT_TOKENS, width)).astype(np.float32),
        "prompt_mask": prompt_mask,
        "seconds": np.array([10.0, 47.5], np.float32),
        "frame_mask": frame_mask,
        # The training inpaint input: all-ones mask channel, zero context latents.
        "local_add_cond": np.concatenate(
            [np.ones((batch, 1, FRAMES)), np.zeros((batch, channels, FRAMES))], axis=1
        ).astype(np.float32),
    }


@pytest.fixture(scope="module")
def torch_run(pipe, inputs) -> dict[str, np.ndarray]:
    x = {k: torch.from_numpy(v) for k, v in inputs.items()}
    transformer = pipe.transformer
    captured = {}
    hooks = [
        getattr(transformer, name).register_forward_hook(
            lambda _m, _i, out, name=name: captured.__setitem__(name, out.detach().numpy())
        )
        for name in ("to_cond_embed", "global_cond_embedder")
    ]
    try:
        with torch.no_grad():
            context, context_mask, global_states = sa3.conditioning(
                pipe, x["prompt_embeds"], x["prompt_mask"], x["seconds"]
            )

            def predict(noised):
                out = transformer(
                    hidden_states=noised,
                    timestep=x["t"],
                    encoder_hidden_states=context,
                    global_hidden_states=global_states,
                    encoder_attention_mask=context_mask,
                    local_add_cond=x["local_add_cond"],
                ).sample
                captured["prediction"] = out.numpy()
                return out

            loss = rectified_flow_loss(predict, x["x0"], x["noise"], x["t"], x["frame_mask"])
    finally:
        for hook in hooks:
            hook.remove()
    return {
        "global": global_states.numpy(),
        "context": context.numpy(),
        "context_mask": context_mask.bool().numpy(),
        "projected_context": captured["to_cond_embed"],
        "modulation": captured["global_cond_embedder"],
        "prediction": captured["prediction"],
        "loss": float(loss),
    }


@pytest.fixture(scope="module")
def mlx_run(converted, inputs) -> dict[str, np.ndarray]:
    dit, duration_embedder = converted
    x = {k: mx.array(v) for k, v in inputs.items()}
    global_states = duration_embedder(x["seconds"])
    context, context_mask = cross_attention_context(
        x["prompt_embeds"], x["prompt_mask"], global_states
    )
    projected, modulation = dit.condition(x["t"], context, global_states, context_mask)
    captured = {}

    def predict(noised):
        captured["prediction"] = dit(
            noised, x["t"], context, global_states, context_mask, x["local_add_cond"]
        )
        return captured["prediction"]

    loss = rectified_flow_loss(predict, x["x0"], x["noise"], x["t"], x["frame_mask"])
    arrays = {
        "global": global_states,
        "context": context,
        "context_mask": context_mask,
        "projected_context": projected,
        "modulation": modulation,
        "prediction": captured["prediction"],
    }
    mx.eval(list(arrays.values()), loss)
    return {k: np.array(v) for k, v in arrays.items()} | {"loss": loss.item()}


def test_prediction_matches_diffusers(torch_run, mlx_run):
    reference = torch_run["prediction"]
    assert reference.shape == mlx_run["prediction"].shape == (2, 16, FRAMES)
    assert psnr(reference, mlx_run["prediction"]) >= MIN_PSNR_DB
    # Each sample on its own too: a swapped timestep or mask would hide in the batch mean.
    for i in range(2):
        assert psnr(reference[i], mlx_run["prediction"][i]) >= MIN_PSNR_DB


def test_cross_attention_context_with_duration_token_matches(torch_run, mlx_run):
    np.testing.assert_array_equal(mlx_run["context_mask"], torch_run["context_mask"])
    assert mlx_run["context"].shape == (2, PROMPT_TOKENS + 1, 32)
    assert psnr(torch_run["context"], mlx_run["context"]) >= MIN_PSNR_DB
    # What cross-attention attends to: padding substituted, then to_cond_embed.
    assert psnr(torch_run["projected_context"], mlx_run["projected_context"]) >= MIN_PSNR_DB


def test_global_conditioning_from_the_duration_embedder_matches(torch_run, mlx_run):
    assert psnr(torch_run["global"], mlx_run["global"]) >= MIN_PSNR_DB
    # The AdaLN modulation: duration embedding + timestep embedding, expanded to 6·E.
    assert psnr(torch_run["modulation"], mlx_run["modulation"]) >= MIN_PSNR_DB


def test_rectified_flow_loss_matches(torch_run, mlx_run):
    relative = abs(mlx_run["loss"] - torch_run["loss"]) / abs(torch_run["loss"])
    assert relative <= MAX_LOSS_RELATIVE


CONVERTERS = {
    "transformer": mlx_convert.dit_from_state_dict,
    "duration_embedder": mlx_convert.duration_embedder_from_state_dict,
}


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ("transformer", "transformer_blocks.1.self_attn.to_qkv.weight"),
        ("transformer", "rotary_pos_emb.inv_freq"),  # a buffer is a key like any other
        ("duration_embedder", "freqs"),
    ],
)
def test_a_missing_torch_key_is_named(pipe, part, key):
    module = getattr(pipe, part)
    state = dict(module.state_dict())
    del state[key]
    with pytest.raises(KeyMapError, match=re.escape(key)):
        CONVERTERS[part](module.config, state)


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ("transformer", "transformer_blocks.0.self_attn.to_qkv.lora_A.weight"),
        ("duration_embedder", "linear.lora_B.weight"),
    ],
)
def test_an_unexpected_torch_key_is_named(pipe, part, key):
    module = getattr(pipe, part)
    state = dict(module.state_dict()) | {key: torch.zeros(2, 2)}
    with pytest.raises(KeyMapError, match=re.escape(key)):
        CONVERTERS[part](module.config, state)


def test_every_torch_tensor_lands_in_mlx_transposed_where_mlx_needs_it(pipe, converted):
    """Values, not just names: each diffusers tensor equals its MLX parameter exactly."""
    for module, mlx_module, key_map in (
        (
            pipe.transformer,
            converted[0],
            mlx_convert.dit_key_map(
                pipe.transformer.config.depth, pipe.transformer.config.num_memory_tokens
            ),
        ),
        (pipe.duration_embedder, converted[1], mlx_convert.duration_embedder_key_map()),
    ):
        params = dict(tree_flatten(mlx_module.parameters()))
        for key, tensor in module.state_dict().items():
            target = key_map[key]
            expected = tensor.numpy()
            if target.transpose is not None:
                expected = expected.transpose(target.transpose)
            np.testing.assert_array_equal(np.array(params[target.key]), expected, err_msg=key)
    # The fixed tables are frozen: a trainer never updates them.
    trainable = dict(tree_flatten(converted[0].trainable_parameters()))
    assert "rotary_pos_emb.inv_freq" not in trainable
    assert "freqs" not in dict(tree_flatten(converted[1].trainable_parameters()))

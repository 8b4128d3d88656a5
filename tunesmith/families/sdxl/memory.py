"""What an SDXL run holds at its peak, for the estimate before it trains
(`tunesmith.train.footprint`).

The trainer loads the whole pipeline (the UNet, the VAE and both text encoders, which the
demos' samples need) at the placement's dtype and trains `SdxlLora` on the UNet; its step runs
the UNet alone on stored posteriors and caption encodings. Here each of the four is built on
`meta` from the base model's own `config.json` files (`full_size.build`), the adapter attached
by `SdxlLora` itself with the run's rank, alpha and checkpointing, and the step is the
trainer's: `SdxlLora.squared_error` (the loss as a sum in half precision, the mean in float32,
as `SdxlLora.backward`) and `backward()`, on `meta` tensors of the run's shapes: its batch
(this process's share where the run trains on several), latents of `train.size` over the VAE's
downsampling, the caption's 77 token encodings (152 or 227 with `max_token_length`) and the
pooled one. The adapter is the run's type (`adapter.type`, `conv_dim`), attached as the trainer
attaches it.

The demos' renders at validation (`render`) are traced too: at SDXL's sizes the VAE's decode
of the picture holds more than anything else a render does (1.6 GB at 1024² in bfloat16,
against 0.3 GB for the guided UNet call), and more than a checkpointed step (0.6 GB), so with
checkpointing on it is the render that sets the peak.

Not counted: DDP's gradient buckets on several processes (the adapter's size again); an EMA's
float32 copy of the adapter (`ema_decay`, the adapter's size again); the text encoders'
activations and their adapters' gradients where they train (`train_text_encoder`); with
buckets, a bucket larger than the square of `size` (a bucket holds at most that many pixels,
but its latent can be longer on one side).
"""

from __future__ import annotations

from pathlib import Path

import torch

from tunesmith.families.sdxl import captions, data_options, full_size
from tunesmith.families.sdxl.adapters import AdapterSpec
from tunesmith.families.sdxl.objective import Picture, SdxlLora
from tunesmith.train.config import world_size
from tunesmith.train.footprint import MemoryModel

# What the fit may lower when a run does not fit: its batch, down to one picture. Never
# train.size: it is the side the user's pictures are trained and rendered at.
KNOBS = (("batch_size", (64, 32, 16, 8, 4, 2, 1)),)
FROZEN = ("vae", "text_encoder", "text_encoder_2")  # loaded for the samples, never trained


def memory(run, base_model: Path, dtype: torch.dtype) -> MemoryModel:
    """The `MemoryModel` of `run` on the base model folder `base_model` at `dtype`."""
    return memory_of(full_size.folder_configs(base_model), run, dtype)


def memory_of(configs: dict[str, dict], run, dtype: torch.dtype) -> MemoryModel:
    """`memory` from the configs themselves (keyed as `full_size.CONFIGS`)."""
    parts = {name: full_size.build(configs[name], "meta", dtype) for name in full_size.COMPONENTS}
    for name in FROZEN:
        parts[name].requires_grad_(False)
    lora = SdxlLora(
        parts["unet"],
        full_size.build_scheduler(configs["scheduler"]),
        configs["vae"]["scaling_factor"],
        run.adapter.rank,
        run.adapter.scale_alpha,
        run.train.seed,
        checkpointing=run.train.gradient_checkpointing is True,
        spec=AdapterSpec.of(run.adapter),
    )
    shapes = _Shapes(configs, data_options.tokens_of(run.train))
    return MemoryModel(
        parts,
        lambda trial: _step(lora, shapes, trial),
        KNOBS,
        render=lambda trial: _render(lora.unet, parts["vae"], shapes, trial),
    )


class _Shapes:
    """What of the configs a step's tensors are shaped by."""

    def __init__(self, configs: dict[str, dict], text_tokens: int) -> None:
        vae = configs["vae"]
        self.downsampling = 2 ** (len(vae["block_out_channels"]) - 1)
        self.channels = int(vae["latent_channels"])
        # a caption's encodings: CLIP's 77 positions, or kohya's chunks put back together
        self.window = int(configs["text_encoder"]["max_position_embeddings"])
        self.tokens = text_tokens // captions.CHUNK * (self.window - 2) + 2
        self.text = int(configs["unet"]["cross_attention_dim"])
        self.pooled = int(configs["text_encoder_2"]["projection_dim"])


def _step(lora: SdxlLora, shapes: _Shapes, run) -> None:
    """One training step's forward, loss and backward on `meta`, as `SdxlLora.backward`."""
    unet = lora.unet
    if run.train.gradient_checkpointing is True:
        unet.enable_gradient_checkpointing()
    else:
        unet.disable_gradient_checkpointing()
    for p in lora.parameters():  # the optimizer's zero_grad(set_to_none=True)
        p.grad = None
    batch = -(-run.train.batch_size // world_size(run.train))  # rank 0's share, the largest
    side = run.train.size // shapes.downsampling
    latent = (shapes.channels, side, side)

    def meta(*shape: int) -> torch.Tensor:
        return torch.empty(shape, device="meta")  # float32, as the stored ones

    pictures = [
        Picture(
            meta(*latent),
            meta(*latent),
            meta(shapes.tokens, shapes.text),
            meta(shapes.pooled),
            meta(6),
        )
        for _ in range(batch)
    ]
    t = torch.zeros(batch, dtype=torch.long, device="meta")
    eps1, noise = meta(batch, *latent), meta(batch, *latent)
    if lora.half:
        lora.squared_error(pictures, t, eps1, noise).backward()
    else:
        lora.loss(pictures, t, eps1, noise).backward()


def _render(unet, vae, shapes: _Shapes, run) -> None:
    """A demo's render at validation on `meta`, its two largest pieces as
    `StableDiffusionXLPipeline` runs them (`render_demo`): one UNet call, a batch of two (the
    prompt and the empty one) where a demo is guided (cfg over 1), and the VAE's decode at
    `train.size` (in float32 where the VAE is float16 and asks for it, `force_upcast`). The
    text encoders' one caption holds less than either."""
    if not run.demos:
        return
    guided = any(d.cfg > 1 for d in run.demos) and unet.config.time_cond_proj_dim is None
    batch = 2 if guided else 1
    side = run.train.size // shapes.downsampling

    def meta(*shape: int, dtype=unet.dtype) -> torch.Tensor:
        return torch.empty(shape, device="meta", dtype=dtype)

    with torch.no_grad():
        unet(
            meta(batch, shapes.channels, side, side),
            meta(dtype=torch.float32),
            encoder_hidden_states=meta(batch, shapes.window, shapes.text),  # the pipeline's 77
            added_cond_kwargs={
                "text_embeds": meta(batch, shapes.pooled),
                "time_ids": meta(batch, 6),
            },
        )
        upcast = vae.dtype == torch.float16 and vae.config.force_upcast
        if upcast:
            vae.to(torch.float32)
        vae.decode(
            meta(1, shapes.channels, side, side, dtype=vae.dtype) / vae.config.scaling_factor
        )
        if upcast:
            vae.to(torch.float16)

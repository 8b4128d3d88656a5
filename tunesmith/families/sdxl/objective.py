"""The SDXL LoRA objective: the UNet with adapters, its loss, and the validation loss.

As kvad and diffusers' train_text_to_image_lora_sdxl train SDXL LoRA adapters.

One step (docs/conventions/sdxl.md, "One step"):

    x0  = (mean + exp(logvar / 2)·ε₁) · scaling_factor   a fresh draw from the stored posterior
    t   ~ uniform over the scheduler's 1000 levels
    x_t = √ᾱ_t·x0 + √(1 − ᾱ_t)·ε                          ᾱ from the scheduler's own alphas_cumprod
    loss = mean((UNet(x_t, t, prompt_embeds, text_embeds = pooled, time_ids) − target)²)

with target ε, or v = √ᾱ_t·ε − √(1 − ᾱ_t)·x0 where the scheduler says `v_prediction`, and
time_ids = [orig_h, orig_w, crop_top, crop_left, target_h, target_w] as
`StableDiffusionXLPipeline._get_add_time_ids` builds them (the target is the square of
`size`, or the picture's bucket).

kohya's data options (data_options.py) come to a step as the pictures it sees (`Choices`):
with `flip_aug`, each picture is its flipped posterior (its time_ids' crop left, its mask
flipped) with probability ½; with caption variants or dropout, its caption is one of its
variants, or the empty caption at `caption_dropout_rate` (`captions.pick_caption`). These draws
come from the training generator after t, ε₁ and ε and before the noise options' (the adaptive
offset reads the chosen picture's x0), so a run without them draws what it drew before. With
`masked_loss`, the element-wise loss is weighed by the picture's latent mask before the
per-picture weights and the mean (kohya: `apply_masked_loss`, then min-SNR or debiased, then
the mean): a half-masked picture weighs half, a fully masked one gives no gradient.

The adapter (`adapters.py`): by default PEFT LoRA on every `to_q`, `to_k`, `to_v`, `to_out.0` of
the UNet, the layer answering W·x + (alpha/rank)·B·(A·x), A random and B zero, so step 0 is
exactly the base model; `[runs.adapter] type` makes it PEFT's DoRA or LyCORIS's LoCon, LoKr or
LoHa (with the resnets' and samplers' convolutions at `conv_dim`), each starting as the base
model too.

The text encoders (`train.train_text_encoder`, kohya's `--train_text_encoder` for SDXL LoRA):
both get the run's adapter on their attention and MLP layers (`adapters.py`), and the step's
prompt embeddings and pooled embedding are computed from the chosen captions' tokens by the
encoders as they train (`TextEncoders`: what the encoded stage computes, with gradients), for
the training loss and the validation loss alike. The cached encodings then serve no step; they
still serve every run that keeps the encoders frozen. SDXL reads CLIP-L's penultimate hidden
states, so CLIP-L's last layer never reaches the loss: its adapter is frozen at its start
(kohya's files carry it all the same; DDP wants every trained tensor to get a gradient) and
the first step's check passes it over.

Gradient checkpointing (`checkpointing=True`, a run's `train.gradient_checkpointing = true`):
diffusers' own `enable_gradient_checkpointing`, which recomputes each resnet and transformer
block of the UNet in the backward pass (torch's non-reentrant checkpoint): the same gradients
for less memory and about a third more time. It acts only where gradients are taken, so
validation and samples run as without it.

Where the UNet runs in half precision the loss goes into backward as a sum and the fp32 adapter
gradients are divided back by the element count: a mean's per-element gradient (≈1e-5 at 1024²)
is rounded away in fp16 (kvad measured cosine 0.934 against fp32 without this).

kohya's loss and noise options (`options.py`: min-SNR and debiased weights, the Huber losses,
noise offset and multires noise) change the training loss and the noise it is drawn with;
at their defaults the step is the MSE above, draw for draw. The validation loss stays the plain
MSE at fixed levels whatever the run trains with: it is the number that compares across runs.

The loop around it is `trainer.py`; the files it writes are `files.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from tunesmith.families.sdxl import captions, data_options, masks
from tunesmith.families.sdxl.adapters import TEXT_ENCODERS, Adapter, AdapterSpec
from tunesmith.families.sdxl.options import (
    LossOptions,
    debiased_weight,
    elementwise_loss,
    huber_threshold,
    kohya_noise,
    min_snr_weight,
    signal_to_noise,
)
from tunesmith.train.trainer import TrainingError

TARGET_MODULES = ("to_q", "to_k", "to_v", "to_out.0")
VALIDATION_LEVELS = (125, 375, 625, 875)
RANK = 16
ADAPTER = "default"


@dataclass(frozen=True)
class Flipped:
    """A picture flipped left to right (`flip_aug`): its own posterior and crop conditioning."""

    mean: torch.Tensor  # [4, h, w]
    logvar: torch.Tensor
    time_ids: torch.Tensor  # [6]: the crop left counted from the right edge (buckets.py)


@dataclass
class Picture:
    """One training picture as the `encoded` stage stores it, ready for a step; the fields
    after `name` are kohya's data options' (the defaults: none of them)."""

    mean: torch.Tensor  # [4, h, w] posterior mean, unscaled
    logvar: torch.Tensor  # [4, h, w]
    prompt_embeds: torch.Tensor  # [77 (152, 227), C1 + C2]: the caption as written
    pooled: torch.Tensor  # [P]
    time_ids: torch.Tensor  # [6]
    name: str = ""
    text: str = ""  # the caption's text.safetensors (as written)
    mask: torch.Tensor | None = None  # [h, w] weights on the latent grid (masked_loss)
    flipped: Flipped | None = None  # the picture flipped (flip_aug)
    variants: tuple[str, ...] = ()  # text.safetensors of the captions a step picks from
    empty: tuple[torch.Tensor, torch.Tensor] | None = None  # the empty caption (dropout)
    caption: str = ""  # the caption's text (as written, or the step's pick): for the encoders
    variant_texts: tuple[str, ...] = ()  # the variants' texts, as `variants` (a run's seed)

    @property
    def bucket(self) -> tuple[int, int]:
        """(width, height) of its target size: its bucket, or the square."""
        return int(self.time_ids[5]), int(self.time_ids[4])

    def chosen(self, flip: bool = False, caption: int | None = 0) -> Picture:
        """The picture as one step sees it: flipped or not, with caption `caption` of its
        variants (0 where it has none: the caption as written), None: the empty caption."""
        from tunesmith.families.sdxl.encoded import load_caption

        mean, logvar, ids, mask = self.mean, self.logvar, self.time_ids, self.mask
        if flip:
            if self.flipped is None:
                raise ValueError(f"{self.name}: no flipped posterior (encoded without flip_aug)")
            mean, logvar, ids = self.flipped.mean, self.flipped.logvar, self.flipped.time_ids
            mask = masks.flipped(mask) if mask is not None else None
        embeds, pooled, text = self.prompt_embeds, self.pooled, self.caption
        if caption is None:
            if self.empty is None:
                raise ValueError(f"{self.name}: no empty caption (encoded without dropout)")
            embeds, pooled, text = *self.empty, ""
        elif self.variants and self.variants[caption] != self.text:
            embeds, pooled = load_caption(self.variants[caption])  # read when picked
            text = self.variant_texts[caption] if self.variant_texts else text
        return Picture(mean, logvar, embeds, pooled, ids, self.name, mask=mask, caption=text)


def time_ids(
    original_size: tuple[int, int], crop_top_left: tuple[int, int], target_size: tuple[int, int]
) -> torch.Tensor:
    """SDXL's size and crop conditioning, as `StableDiffusionXLPipeline._get_add_time_ids`:
    list(original_size + crops_coords_top_left + target_size)."""
    return torch.tensor([*original_size, *crop_top_left, *target_size], dtype=torch.float32)


def pictures_from_frame(frame, option=None, seed: int | None = None) -> list[Picture]:
    """`Picture`s from the `encoded` stage's frame (one row per picture, its store files).

    A frame with kohya's data options' columns (`encoded.SHAPED_COLUMNS`) gives each picture
    its target size (its bucket), its flipped posterior, its mask and its caption choices; a
    column that is missing or empty (None, NaN) leaves that option off, and so does
    `option` (a run's `SdxlDataOptions`) where it is given and has it off. The caption as
    written, the posteriors and the mask are read now; a variant is read when a step picks
    it, so a run holds one caption per picture, as before, however many variants it has.
    With `seed` (the run's, which drew them: `captions.variants`) each picture also has its
    variants' texts, for a run that encodes its captions as it trains."""
    from tunesmith.families.sdxl.encoded import (
        load_caption,
        load_mask,
        load_posterior,
        text_choices,
    )

    flips = option is None or option.flip_aug
    masked = option is None or option.masked_loss
    varied = option is None or data_options.varied(option)
    dropped = option is None or option.caption_dropout_rate > 0
    empties: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # read once, shared
    out = []
    for row in frame.to_dict("records"):
        mean, logvar = load_posterior(row["posterior"])
        embeds, pooled = load_caption(row["text"])
        size = int(row["size"])
        target = (_whole(row.get("target_height"), size), _whole(row.get("target_width"), size))
        original = (int(row["original_height"]), int(row["original_width"]))
        top = int(row["crop_top"])
        ids = time_ids(original, (top, int(row["crop_left"])), target)
        flipped = None
        if flips and _given(row.get("flipped_posterior")):
            flipped_mean, flipped_logvar = load_posterior(row["flipped_posterior"])
            crop = (top, int(row["flipped_crop_left"]))
            flipped = Flipped(flipped_mean, flipped_logvar, time_ids(original, crop, target))
        mask = load_mask(row["mask"]) if masked and _given(row.get("mask")) else None
        variants, empty_path = text_choices(row)
        variants = variants if varied else [row["text"]]
        caption = str(row.get("caption") or "")
        texts = ()
        if seed is not None and option is not None and varied and len(variants) > 1:
            texts = tuple(captions.variants(caption, option, seed))
            if len(texts) != len(variants):
                raise ValueError(
                    f"{row['path']}: {len(variants)} caption variants encoded, the run draws "
                    f"{len(texts)}: build the encoded stage again"
                )
        empty = None
        if dropped and empty_path is not None:
            if empty_path not in empties:
                empties[empty_path] = load_caption(empty_path)
            empty = empties[empty_path]
        out.append(
            Picture(
                mean,
                logvar,
                embeds,
                pooled,
                ids,
                row["path"],
                text=row["text"],
                mask=mask,
                flipped=flipped,
                variants=tuple(variants),
                empty=empty,
                caption=caption,
                variant_texts=texts,
            )
        )
    return out


def _given(value) -> bool:
    """A path in a table column: a string (None and NaN are no path)."""
    return isinstance(value, str) and bool(value)


def _whole(value, default: int) -> int:
    """An int column's value; `default` where the column is missing or empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    return int(value)


@dataclass(frozen=True)
class Choices:
    """What a step draws for each of its pictures under kohya's data options: flipped or not
    (½, `flip_aug`), and which caption (`captions.pick_caption`: one of its variants, or the
    empty caption at `caption_dropout_rate`). Per picture, in the batch's order: the flip,
    then the caption's two draws. A run with neither option draws nothing (`of` is None)."""

    flip: bool = False
    captions: bool = False
    dropout_rate: float = 0.0

    @classmethod
    def of(cls, train) -> Choices | None:
        o = data_options.options(train)
        picks = data_options.varied(o) or o.caption_dropout_rate > 0
        if not (o.flip_aug or picks):
            return None
        return cls(o.flip_aug, picks, float(o.caption_dropout_rate))

    def __call__(self, pictures: list[Picture], generator: torch.Generator) -> list[Picture]:
        out = []
        for picture in pictures:
            # kohya: flip_aug and random.random() < 0.5, per picture (train_util.py)
            flip = self.flip and torch.rand((), generator=generator).item() < 0.5
            caption = 0
            if self.captions:
                count = max(1, len(picture.variants))
                caption = captions.pick_caption(count, self.dropout_rate, generator)
            out.append(picture.chosen(flip, caption))
        return out


@dataclass
class ValidationSet:
    """Held-out pictures with fixed noise: per picture and level, ε₁ (the posterior draw) and ε."""

    pictures: list[Picture]
    levels: tuple[int, ...] = VALIDATION_LEVELS
    eps1: list[torch.Tensor] = field(default_factory=list)  # [L, 4, h, w] per picture
    noise: list[torch.Tensor] = field(default_factory=list)

    @classmethod
    def make(cls, pictures: list[Picture], seed: int = 0, levels=VALIDATION_LEVELS):
        g = torch.Generator().manual_seed(seed)
        shape = lambda p: (len(levels), *p.mean.shape)  # noqa: E731
        eps1 = [torch.randn(shape(p), generator=g) for p in pictures]
        noise = [torch.randn(shape(p), generator=g) for p in pictures]
        return cls(pictures, tuple(levels), eps1, noise)


class TextEncoders:
    """Both text encoders of a pipeline as a step runs them on its captions: the captions'
    token ids (kohya's chunks at `tokens` text tokens, `model.tokenize_chunks`, each caption
    tokenized once), each encoder's penultimate hidden states put in one sequence and CLIP-G's
    projected end-of-text embedding of the first chunk as the pooled one: what
    `model.encode_long_captions` computes for the encoded stage, here with gradients."""

    def __init__(self, pipe, tokens: int = captions.CHUNK) -> None:
        self.pairs = ((pipe.tokenizer, pipe.text_encoder), (pipe.tokenizer_2, pipe.text_encoder_2))
        self.encoders = {"text_encoder": pipe.text_encoder, "text_encoder_2": pipe.text_encoder_2}
        self.chunks = tokens // captions.CHUNK
        self._ids: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def ids(self, caption: str) -> tuple[torch.Tensor, torch.Tensor]:
        """[chunks, 77] token ids of `caption` for each tokenizer."""
        from tunesmith.families.sdxl.model import tokenize_chunks

        if caption not in self._ids:
            self._ids[caption] = tuple(
                tokenize_chunks(tokenizer, [caption], self.chunks)[0] for tokenizer, _ in self.pairs
            )
        return self._ids[caption]

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(prompt_embeds [B, 75·chunks + 2, C1 + C2], pooled [B, P]) in the encoders' dtype."""
        from tunesmith.families.sdxl.model import encode_ids

        ids = [torch.stack([self.ids(text)[i] for text in texts]) for i in range(len(self.pairs))]
        return encode_ids([encoder for _, encoder in self.pairs], ids)


class SdxlLora:
    """The UNet (and, with `text`, both text encoders) with the run's adapter, and the loss it
    is trained with. `spec` is the adapter (`adapters.AdapterSpec`; None: a LoRA of `rank` and
    `alpha`, as before the other types)."""

    def __init__(
        self,
        unet,
        scheduler,
        scaling_factor: float,
        rank: int = RANK,
        alpha: float | None = None,
        seed: int = 0,
        checkpointing: bool = False,
        options: LossOptions | None = None,
        spec: AdapterSpec | None = None,
        text: TextEncoders | None = None,
    ) -> None:
        self.unet, self.scheduler, self.text = unet, scheduler, text
        self.scaling_factor = float(scaling_factor)
        self.rank, self.alpha = int(rank), float(alpha if alpha is not None else rank)
        spec = spec or AdapterSpec("lora", self.rank, self.alpha)
        self.rank, self.alpha = spec.rank, spec.alpha
        models = {"unet": unet, **(text.encoders if text is not None else {})}
        # the initial factors drawn under `seed` (a LoRA draws what it drew before the types)
        self.adapter = Adapter(spec, models, seed)
        self.config = self.adapter.configs.get("unet")  # PEFT's LoraConfig (lora, dora)
        for layer in self._unused():  # no gradient ever: frozen, as DDP wants every trained
            for p in self.adapter.factors(layer).values():  # tensor to get one
                p.requires_grad_(False)
        if checkpointing:
            unet.enable_gradient_checkpointing()
        # Training mode, as diffusers' SDXL LoRA script; SDXL's dropouts are 0, so no number moves.
        for model in models.values():
            model.train()
        self.device, self.dtype = unet.device, unet.dtype
        self.half = self.dtype in (torch.float16, torch.bfloat16)
        self.alphas_cumprod = scheduler.alphas_cumprod.to(torch.float64)
        self.levels = int(scheduler.config.num_train_timesteps)
        self.prediction_type = scheduler.config.prediction_type
        if self.prediction_type not in ("epsilon", "v_prediction"):
            raise ValueError(f"prediction_type {self.prediction_type!r}: epsilon or v_prediction")
        self.options = options or LossOptions()  # kohya's loss and noise options; none: MSE
        self._checked = False
        self._weighed = False  # a picture of this step counted (its mask is not all zero)
        self.gradient_note = ""  # check_gradients' note at the first step, for the run's log

    # -- the factors ----------------------------------------------------------------------

    def named_factors(self) -> dict[str, tuple[nn.Parameter, nn.Parameter]]:
        """module name → (A weight [r, in], B weight [out, r]) of a LoRA or DoRA on the UNet,
        in its module order."""
        return self.adapter.named_factors()

    def parameters(self) -> list[nn.Parameter]:
        """Every trained tensor, the UNet's layers first, then the text encoders'."""
        return self.adapter.parameters()

    def text_parameters(self) -> list[nn.Parameter]:
        """The text encoders' trained tensors (for their own learning rate)."""
        return [
            p
            for layer in self.adapter.layers
            if layer.component in TEXT_ENCODERS
            for p in self.adapter.factors(layer).values()
        ]

    def b_parameters(self) -> list[nn.Parameter]:
        """Each layer's factor that starts at zero (LoRA's B)."""
        return list(self.adapter.zero_factors().values())

    def targets(self) -> list[str]:
        """The adapted layers, as the run's state names them (`Adapter.targets`)."""
        return self.adapter.targets()

    # -- the loss ---------------------------------------------------------------------------

    def unet_output(self, x_t: torch.Tensor, t: torch.Tensor, pictures: list[Picture]):
        """The UNet's answer for `pictures`' conditioning (fp32 copy of its output): their
        cached caption encodings, or their captions through the training text encoders."""
        if self.text is not None:
            embeds, pooled = self.text([p.caption for p in pictures])
        else:
            embeds = torch.stack([p.prompt_embeds for p in pictures])
            pooled = torch.stack([p.pooled for p in pictures])
        embeds, pooled = embeds.to(self.device, self.dtype), pooled.to(self.device, self.dtype)
        ids = torch.stack([p.time_ids for p in pictures]).to(self.device, self.dtype)
        return self.unet(
            x_t.to(self.dtype),
            t.to(self.device),
            encoder_hidden_states=embeds,
            added_cond_kwargs={"text_embeds": pooled, "time_ids": ids},
        ).sample.float()

    def x0(self, pictures: list[Picture], eps1: torch.Tensor, device=None) -> torch.Tensor:
        """The scaled latents drawn from the pictures' posteriors with ε₁, fp32."""
        device = self.device if device is None else device
        mean = torch.stack([p.mean for p in pictures]).to(device, torch.float32)
        logvar = torch.stack([p.logvar for p in pictures]).to(device, torch.float32)
        return (mean + torch.exp(0.5 * logvar) * eps1.to(mean)) * self.scaling_factor

    def prediction_and_target(
        self, pictures: list[Picture], t: torch.Tensor, eps1: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(UNet(x_t) as fp32, its target: ε or v) for levels `t` [B] (ints)."""
        x0 = self.x0(pictures, eps1)
        noise = noise.to(x0)
        ac = self.alphas_cumprod.to(self.device)[t.to(self.device)].float()[:, None, None, None]
        x_t = ac.sqrt() * x0 + (1 - ac).sqrt() * noise
        if self.prediction_type == "v_prediction":
            target = ac.sqrt() * noise - (1 - ac).sqrt() * x0
        else:
            target = noise
        return self.unet_output(x_t, t, pictures), target

    def squared_error(
        self,
        pictures: list[Picture],
        t: torch.Tensor,
        eps1: torch.Tensor,
        noise: torch.Tensor,
    ) -> torch.Tensor:
        """Σ (UNet(x_t) − target)² over every element, fp32, for levels `t` [B] (ints)."""
        prediction, target = self.prediction_and_target(pictures, t, eps1, noise)
        return ((prediction - target) ** 2).sum()

    def training_error(
        self,
        pictures: list[Picture],
        t: torch.Tensor,
        eps1: torch.Tensor,
        noise: torch.Tensor,
    ) -> torch.Tensor:
        """Σ over pictures of w_b · Σ m·ℓ over the picture's elements, fp32: the training loss
        times the element count (`options.py`; m the latent mask where the batch has one,
        applied before the weights as kohya's `apply_masked_loss`); `squared_error` at the
        default options."""
        options = self.options
        weights = self.masks(pictures)
        self._weighed = self._weighed or weights is None or bool(weights.any())
        if options.plain_loss and weights is None:
            return self.squared_error(pictures, t, eps1, noise)
        prediction, target = self.prediction_and_target(pictures, t, eps1, noise)
        t = t.to(self.device)
        c = None
        if options.loss_type in ("huber", "smooth_l1"):
            c = huber_threshold(
                t, options.huber_c, options.huber_schedule, self.alphas_cumprod, self.levels
            )
        per_element = elementwise_loss(prediction, target, options.loss_type, c)
        per_element = masks.apply_masked_loss(per_element, weights)
        per_picture = per_element.sum(dim=tuple(range(1, per_element.ndim)))
        v_prediction = self.prediction_type == "v_prediction"
        snr = signal_to_noise(self.alphas_cumprod, t).to(per_picture)
        if options.min_snr_gamma:
            per_picture = per_picture * min_snr_weight(snr, options.min_snr_gamma, v_prediction)
        if options.debiased_estimation:
            per_picture = per_picture * debiased_weight(snr, v_prediction)
        return per_picture.sum()

    def masks(self, pictures: list[Picture]) -> torch.Tensor | None:
        """[B, h, w] latent masks on the device (ones for a picture without one); None where
        no picture of the batch has a mask."""
        if all(p.mask is None for p in pictures):
            return None
        ones = lambda p: torch.ones(p.mean.shape[-2:])  # noqa: E731
        stacked = torch.stack([p.mask if p.mask is not None else ones(p) for p in pictures])
        return stacked.to(self.device, torch.float32)

    def loss(self, pictures, t, eps1, noise) -> torch.Tensor:
        """The training loss: mean((UNet(x_t, t, caption) − target)²) at the default options,
        fp32."""
        return self.training_error(pictures, t, eps1, noise) / eps1.numel()

    def draw(self, pictures: list[Picture], generator: torch.Generator):
        """(t [B], ε₁, ε) for one step: a level uniform over the scheduler's, fresh noises;
        then, where the run asks, ε with kohya's noise offset and multires noise, drawn after
        them (`options.kohya_noise`, on the whole batch)."""
        return self.draw_step(pictures, generator)[1]

    def draw_step(
        self, pictures: list[Picture], generator: torch.Generator, choose: Choices | None = None
    ) -> tuple[list[Picture], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(the pictures as the step sees them, (t, ε₁, ε)): `draw`, with `choose`'s flips and
        captions drawn after t, ε₁ and ε and before the noise options' draws."""
        shape = (len(pictures), *pictures[0].mean.shape)
        t = torch.randint(0, self.levels, (len(pictures),), generator=generator)
        eps1 = torch.randn(shape, generator=generator)
        noise = torch.randn(shape, generator=generator)
        if choose is not None:
            pictures = choose(pictures, generator)
        if not self.options.plain_noise:
            # The adaptive offset reads x0's mean: the same draw the loss makes, on the CPU.
            x0 = self.x0(pictures, eps1, "cpu") if self.options.adaptive_noise_scale else None
            noise = kohya_noise(noise, x0, self.options, generator)
        return pictures, (t, eps1, noise)

    def backward(self, pictures, t, eps1, noise) -> float:
        """Gradients of the mean loss on the factors; returns the loss.

        In half precision the sum goes into backward and the fp32 gradients are divided back."""
        count = eps1.numel()
        value = self.accumulate(pictures, t, eps1, noise, 1.0, count)
        self.finish(count)
        return value

    def accumulate(self, pictures, t, eps1, noise, share: float, reference: int) -> float:
        """Add `share` × the gradient of the mean loss of one micro-batch to the factors'
        gradients; returns its loss. In half precision the sum goes into backward, scaled by
        `share · reference / count`, and `finish(reference)` divides the fp32 gradients back."""
        count = eps1.numel()
        if self.half:
            total = self.training_error(pictures, t, eps1, noise)
            scale = share * reference / count
            (total if scale == 1 else total * scale).backward()
            return total.detach().item() / count
        loss = self.loss(pictures, t, eps1, noise)
        (loss if share == 1 else loss * share).backward()
        return loss.detach().item()

    def finish(self, reference: int) -> None:
        """After a step's micro-batches: the half-precision gradients divided back by
        `reference`, and every B's gradient checked at the first step."""
        if self.half:
            for p in self.parameters():
                if p.grad is not None:
                    p.grad.div_(reference)
        # A step whose pictures were all masked out has no gradient to check: the check waits.
        if not self._checked and self._weighed:
            self.gradient_note = self.check_gradients()
            self._checked = True
        self._weighed = False

    def check_gradients(self) -> str:
        """Every layer's B has a gradient that is finite and not zero, at the first step.

        Returns a note where only self-attention queries and keys got none: those layers see
        positions that are all alike (pictures of one flat colour, or a side so small the
        attention blocks see little), so attention cannot shift between them; the run trains
        its other layers and the note says why these wait. Raises TrainingError otherwise."""
        zero, broken = [], []
        for name, b in self._checked_factors().items():
            g = b.grad
            if g is None:
                broken.append(f"{name} (none)")
            elif not torch.isfinite(g).all():
                broken.append(f"{name} (not finite)")
            elif not g.abs().sum() > 0:
                (zero if _self_attention_query_or_key(name) else broken).append(name)
        if broken:
            finite = all("not finite" not in b for b in broken)
            what = (
                "the adapter does not reach the loss there (a model this trainer does not know)"
                if finite
                else "the loss overflowed: lower train.lr, or train in float32"
            )
            raise TrainingError(
                f"{len(broken)} adapter layer(s) got no usable gradient at the first step "
                f"({_first(broken)}): {what}"
            )
        if not zero:
            return ""
        return (
            f"{len(zero)} self-attention query/key layer(s) got no gradient at the first step "
            f"({_first(zero)}): every position they see is alike, as in pictures of one flat "
            "colour or at a small train.size; they learn once the pictures have detail there, "
            "the other layers train now"
        )

    def _unused(self) -> list:
        """CLIP-L's last layer's adapters: SDXL reads CLIP-L's penultimate hidden states, so
        they never reach the loss (module docstring)."""
        if self.text is None:
            return []
        last = self.text.encoders["text_encoder"].config.num_hidden_layers - 1
        return [
            layer
            for layer in self.adapter.layers
            if layer.component == "text_encoder" and f".layers.{last}." in f".{layer.name}"
        ]

    def _checked_factors(self) -> dict[str, nn.Parameter]:
        """Each layer's zero-started factor by its state name (`targets`), less the unused."""
        unused = {id(layer) for layer in self._unused()}
        zero = self.adapter.zero_factors()
        return {
            name: zero[f"{layer.component}.{layer.name}"]
            for name, layer in zip(self.targets(), self.adapter.layers, strict=True)
            if id(layer) not in unused
        }

    @torch.no_grad()
    def validation_loss(self, validation: ValidationSet) -> float:
        """Mean loss over held-out pictures × levels with their fixed noise."""
        total, count = 0.0, 0
        for picture, eps1, noise in zip(
            validation.pictures, validation.eps1, validation.noise, strict=True
        ):
            for i, level in enumerate(validation.levels):
                t = torch.tensor([level])
                total += self.squared_error([picture], t, eps1[i : i + 1], noise[i : i + 1]).item()
                count += eps1[i].numel()
        return total / count


def _self_attention_query_or_key(name: str) -> bool:
    return ".attn1.to_q" in name or ".attn1.to_k" in name


def _first(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more

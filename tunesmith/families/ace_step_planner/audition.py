"""The pure-LM audition: what a planner adapter changes in the plan, heard without the DiT.

For a demo (caption, lyrics, duration, seed) the planner writes its plan twice from the same
sampling seed, with the adapter off and on: the prompt of data.py, then sampling as ACE-Step
1.5 samples its planner. The answer is read back as ACE-Step's `parse_lm_output` reads it (the
`<think>` YAML as metas, every `<|audio_code_N|>` token as a code), and the codes are decoded
the way HOT-Step's `/codes-decode` hears them: the base model's own FSQ codebook
(`audio_tokenizer.quantizer.get_output_from_indices`), its `AceStepAudioTokenDetokenizer` (5 Hz
codes to 25 Hz latents) and its VAE, with no DiT. `render_codes` renders the same codes
through the DiT instead (`AceStepPipeline(audio_codes=...)`, which diffusers 0.42.1 treats as
the cover task), for hearing what the plan becomes in a full render.

Sampling (ACE-Step 1.5 `acestep/inference.py`, `GenerationParams`): temperature 0.85, top-p
0.9, top-k off (0), and no repetition penalty (1.0, `LLMHandler.generate_with_stop_condition`'s
default, which `generate_music` does not override). Without CFG and constrained decoding,
ACE-Step's PyTorch path calls `model.generate` with exactly these (`_run_pt_single`); so does
this module. `max_new_tokens` is ACE-Step's: 5 codes a second of the duration (clamped to 10 ..
600 s) plus 500 for the metas.

Not handled: the planner's CFG (ACE-Step's `lm_cfg_scale` 2.0 against an unconditional
prompt) and its constrained decoding (metas kept to valid values, codes to the codebook, the
end held back until the duration is reached).
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from tunesmith.families.ace_step.model import codes_text, first_noise
from tunesmith.families.ace_step_planner.data import CODES_PER_SECOND, prompt_text
from tunesmith.families.ace_step_planner.model import PlannerVocab


@dataclass(frozen=True)
class Sampling:
    """The planner's sampling settings; the defaults are ACE-Step 1.5's."""

    temperature: float = 0.85  # GenerationParams.lm_temperature
    top_k: int = 0  # GenerationParams.lm_top_k: 0 is off
    top_p: float = 0.9  # GenerationParams.lm_top_p
    repetition_penalty: float = 1.0  # generate_with_stop_condition's default: off


@dataclass(frozen=True)
class Demo:
    caption: str
    lyrics: str = ""
    duration: float = 30.0
    seed: int = 0


@dataclass
class Plan:
    """One planner answer, read back."""

    token_ids: list[int]
    text: str  # decoded with special tokens kept, as ACE-Step decodes
    metas: dict = field(default_factory=dict)  # the <think> YAML; {} when there is none
    codes: list[int] = field(default_factory=list)


@dataclass
class AuditionSide:
    plan: Plan
    samples: torch.Tensor  # [2, N] float32 at the VAE's rate; [2, 0] when there are no codes


def max_new_tokens(duration: float) -> int:
    """ACE-Step's budget: the duration's codes (10 .. 600 s) plus 500 tokens for the metas."""
    return int(min(600.0, max(10.0, duration)) * CODES_PER_SECOND) + 500


@torch.no_grad()
def plan(
    model,
    tokenizer,
    vocab: PlannerVocab,
    demo: Demo,
    sampling: Sampling = Sampling(),
    max_tokens: int | None = None,
) -> Plan:
    """Sample the planner's answer to the demo's prompt from `demo.seed`."""
    prompt = tokenizer(prompt_text(tokenizer, demo.caption, demo.lyrics), return_tensors="pt")
    device = model.get_input_embeddings().weight.device
    ids = prompt["input_ids"].to(device)
    sample = sampling.temperature > 0
    # fork_rng: the sampling seed is the demo's, and the caller's generator is left alone.
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]):
        torch.manual_seed(demo.seed)
        out = model.generate(
            input_ids=ids,
            attention_mask=prompt["attention_mask"].to(device),
            do_sample=sample,
            temperature=sampling.temperature if sample else None,
            top_k=sampling.top_k if sample else None,
            top_p=sampling.top_p if sample and 0 < sampling.top_p < 1 else None,
            repetition_penalty=sampling.repetition_penalty,
            max_new_tokens=max_tokens or max_new_tokens(demo.duration),
            eos_token_id=vocab.im_end,
            pad_token_id=tokenizer.pad_token_id,
        )
    return read_answer(out[0, ids.shape[1] :].tolist(), tokenizer, vocab)


def read_answer(token_ids: list[int], tokenizer, vocab: PlannerVocab) -> Plan:
    """Metas and codes of an answer, as ACE-Step's `parse_lm_output` finds them."""
    import yaml

    text = tokenizer.decode(token_ids, skip_special_tokens=False)
    code_of = vocab.code_of()
    codes = [code_of[t] for t in token_ids if t in code_of]
    metas: dict = {}
    found = re.search(r"<think>(.*?)</think>", text, re.DOTALL)
    if found:
        try:
            parsed = yaml.safe_load(found.group(1))
        except yaml.YAMLError:
            parsed = None  # a malformed block is reported as no metas, as ACE-Step skips it
        metas = parsed if isinstance(parsed, dict) else {}
    return Plan(list(token_ids), text, metas, codes)


@torch.no_grad()
def codes_to_latents(pipe, codes: list[int]) -> torch.Tensor:
    """25 Hz latents [1, 5 * len(codes), C] of 5 Hz codes: the base model's FSQ codebook, then
    its detokenizer (what `AceStepPipeline.prepare_src_latents` does with `audio_codes`)."""
    tokenizer, detokenizer = pipe.audio_tokenizer, pipe.audio_token_detokenizer
    if tokenizer is None or detokenizer is None:
        raise ValueError("the base model has no audio_tokenizer/ or audio_token_detokenizer/")
    size = tokenizer.quantizer.codebook_size
    if not codes or not all(0 <= c < size for c in codes):
        raise ValueError(f"expected codes from 0 to {size - 1}, got {len(codes)} codes")
    device, dtype = detokenizer.device, detokenizer.dtype
    indices = torch.tensor(codes, dtype=torch.long, device=device)[None, :, None]
    quantized = tokenizer.quantizer.get_output_from_indices(indices).to(dtype=dtype)
    return detokenizer(quantized)


@torch.no_grad()
def decode_codes(pipe, codes: list[int]) -> torch.Tensor:
    """Audio [2, N] float32 from 5 Hz codes: codebook -> detokenizer -> VAE, no DiT.
    No codes give [2, 0]."""
    if not codes:
        return torch.zeros(2, 0)
    latents = codes_to_latents(pipe, codes)
    vae = pipe.vae
    audio = vae.decode(latents.transpose(1, 2).to(device=vae.device, dtype=vae.dtype)).sample
    return audio[0].float().cpu()


@torch.no_grad()
def render_codes(
    pipe, codes: list[int], demo: Demo, steps: int = 8, guidance_scale: float = 7.0
) -> torch.Tensor:
    """Audio [2, N] of the same codes rendered by the DiT (diffusers' audio_codes input)."""
    if not codes:
        return torch.zeros(2, 0)
    generator = torch.Generator("cpu").manual_seed(demo.seed)
    window = int(pipe.audio_token_detokenizer.config.pool_window_size)  # 25 Hz frames a code
    out = pipe(
        prompt=demo.caption,
        lyrics=demo.lyrics,
        audio_codes=codes_text(torch.tensor(codes)),
        num_inference_steps=steps,
        guidance_scale=guidance_scale,
        latents=first_noise(pipe, window * len(codes), generator),
        output_type="pt",
    )
    return out.audios[0].float().cpu()


def audition(
    peft_model,
    tokenizer,
    vocab: PlannerVocab,
    pipe,
    demo: Demo,
    sampling: Sampling = Sampling(),
    max_tokens: int | None = None,
) -> tuple[AuditionSide, AuditionSide]:
    """(base, adapted) for one demo: the same seed and settings, the adapter off then on.

    `peft_model` is a PEFT-wrapped planner (TorchPlannerLora.model); with the adapter
    disabled PEFT runs the base layers alone, the same operations as an adapterless planner.
    """
    sides = []
    for adapted in (False, True):
        context = nullcontext() if adapted else peft_model.disable_adapter()
        with context:
            answer = plan(peft_model, tokenizer, vocab, demo, sampling, max_tokens)
        sides.append(AuditionSide(answer, decode_codes(pipe, answer.codes)))
    return sides[0], sides[1]


def seconds(codes: list[int]) -> float:
    """How long a plan's codes last (0.2 s a code)."""
    return len(codes) / CODES_PER_SECOND if codes else 0.0


__all__ = [
    "AuditionSide",
    "Demo",
    "Plan",
    "Sampling",
    "audition",
    "codes_to_latents",
    "decode_codes",
    "max_new_tokens",
    "plan",
    "read_answer",
    "render_codes",
    "seconds",
]

"""The pure-LM audition: base side as an adapterless planner, codes decoded without the DiT."""

from __future__ import annotations

import torch

from tests.families.ace_step_planner.conftest import nonzero_b
from tunesmith.families.ace_step.model import codes_text
from tunesmith.families.ace_step_planner import audition
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora

DEMO = audition.Demo("zqx, warm lo-fi", lyrics="[Verse]\nhello night", duration=12.0, seed=5)
TOKENS = 60  # the tiny planner's plans are short; ACE-Step's budget would be 560


def test_sampling_settings_are_ace_steps():
    settings = audition.Sampling()
    assert (settings.temperature, settings.top_k, settings.top_p) == (0.85, 0, 0.9)
    assert settings.repetition_penalty == 1.0
    assert audition.max_new_tokens(30) == 650 and audition.max_new_tokens(2) == 550


def test_base_side_is_an_adapterless_run_and_the_adapter_changes_the_plan(
    tiny_planner, planner, ace_pipe
):
    plain = load_planner(tiny_planner)
    alone = audition.plan(plain.model, plain.tokenizer, plain.vocab, DEMO, max_tokens=TOKENS)
    alone_audio = audition.decode_codes(ace_pipe, alone.codes)

    lora = TorchPlannerLora(planner)
    nonzero_b(lora.parameters())
    base, adapted = audition.audition(
        lora.model, planner.tokenizer, planner.vocab, ace_pipe, DEMO, max_tokens=TOKENS
    )
    assert base.plan.token_ids == alone.token_ids
    assert base.samples.numpy().tobytes() == alone_audio.numpy().tobytes()
    assert alone.codes, "the tiny planner wrote no codes at all from this seed"
    assert base.samples.shape == (2, len(alone.codes) * 5 * 1920)  # 0.2 s a code at 48 kHz
    assert adapted.plan.token_ids != base.plan.token_ids
    again = audition.plan(lora.model, planner.tokenizer, planner.vocab, DEMO, max_tokens=TOKENS)
    assert again.token_ids == adapted.plan.token_ids  # the same seed, the same plan


def test_answers_are_read_as_ace_step_reads_them(planner, examples):
    example = examples[1]
    answer = list(example.input_ids[example.prompt_tokens :])
    plan = audition.read_answer(answer, planner.tokenizer, planner.vocab)
    assert plan.metas["bpm"] == 92 and plan.metas["keyscale"] == "A minor"
    assert plan.metas["caption"] == "zqx, warm lo-fi hip hop, dusty drums"
    assert plan.metas["timesignature"] == 4 and plan.metas["genres"] == "lo-fi, hip hop"
    codes = [planner.vocab.code_of()[t] for t in answer if t in planner.vocab.code_of()]
    assert plan.codes == codes and len(codes) == 22
    broken = audition.read_answer(answer[5:], planner.tokenizer, planner.vocab)
    assert broken.metas == {} and broken.codes == codes  # no <think>: codes still read


def test_codes_decode_through_the_checkpoints_detokenizer(ace_pipe):
    codes = [3, 17, 150, 199, 0, 42]
    latents = audition.codes_to_latents(ace_pipe, codes)
    # the pipeline's own audio_codes path gives the same 25 Hz latents
    expected, frames = ace_pipe.prepare_src_latents(
        torch.device("cpu"), torch.float32, audio_codes=codes_text(torch.tensor(codes))
    )
    assert frames == 30 and torch.equal(latents, expected)
    audio = audition.decode_codes(ace_pipe, codes)
    assert audio.shape == (2, 30 * 1920) and torch.isfinite(audio).all()
    assert audition.decode_codes(ace_pipe, []).shape == (2, 0)


def test_the_same_codes_render_through_the_dit(ace_pipe):
    codes = [3, 17, 150, 199, 0, 42, 8, 8, 9, 100]
    audio = audition.render_codes(ace_pipe, codes, DEMO, steps=2)
    assert audio.shape == (2, 10 * 5 * 1920) and torch.isfinite(audio).all()
    again = audition.render_codes(ace_pipe, codes, DEMO, steps=2)
    assert torch.equal(audio, again)
    other = audition.render_codes(ace_pipe, codes[::-1], DEMO, steps=2)
    assert not torch.equal(audio, other)  # the codes steer the render


def test_codes_of_any_count_render_through_the_dit(ace_pipe):
    # 49 codes are 245 frames, 9.8 s, and diffusers' pipeline, taking the noise's length back
    # from seconds, would draw 246 (9.8 * 25 = 245.00000000000003, rounded up)
    codes = [(7 * i) % 200 for i in range(49)]
    audio = audition.render_codes(ace_pipe, codes, DEMO, steps=1)
    assert audio.shape == (2, 49 * 5 * 1920) and torch.isfinite(audio).all()

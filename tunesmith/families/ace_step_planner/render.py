"""A planner run's renders: the pure-LM audition of `audition.py` for the renders stage.

Each demo is planned from its seed with the adapter off (strength 0: PEFT's
`disable_adapter`, the base layers alone) and on (the trained LoRA at the demo's strength),
and the plan's codes are heard without the DiT: the base model's FSQ codebook, its
detokenizer and its VAE. `details()` gives what the audition page shows beside the audio:
the code count, the seconds they last and the `<think>` metas. A plan without codes is
rendered as 0.2 s of silence (a render must have samples; the details say 0 codes).

`extra_audio()` gives the same codes rendered through the DiT as well (`audition.render_codes`:
`AceStepPipeline(audio_codes=...)` with the demo's caption, lyrics, steps and guidance, the
demo's seed), so the page can play what each plan becomes in a full render beside what the
plan alone sounds like.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tunesmith.families.ace_step.model import SAMPLE_RATE, load_pipeline
from tunesmith.families.ace_step.text import INSTRUMENTAL
from tunesmith.families.ace_step_planner import adapter_files
from tunesmith.families.ace_step_planner.audition import (
    Demo,
    decode_codes,
    plan,
    render_codes,
    seconds,
)
from tunesmith.families.ace_step_planner.inputs import resolve_planner
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora
from tunesmith.families.ace_step_planner.trainer import DTYPES


class PlannerRenderer:
    kind, sample_rate = "audio", SAMPLE_RATE

    def __init__(self, run, base_model: Path, placement, adapter: Path | None = None) -> None:
        dtype = DTYPES[placement.dtype]
        self.pipe = load_pipeline(base_model, dtype, placement.device)
        planner = load_planner(resolve_planner(run, base_model), dtype, placement.device)
        self.adapter = adapter
        self.lora, self.trained, self.strength = None, None, 1.0
        if adapter is not None:
            folder = Path(adapter).parent if Path(adapter).is_file() else Path(adapter)
            trained, _ = adapter_files.read(folder)
            self.lora = TorchPlannerLora(planner, trained.rank, trained.alpha)
            self.trained = trained
            self.lora.set_factors(trained)
        self.planner = planner
        self.model = self.lora.model if self.lora is not None else planner.model
        self._details: dict = {}
        self._extra: dict = {}

    def render(self, demo, strength: float) -> np.ndarray:
        if self.lora is None and strength != 0:
            raise ValueError("no adapter is attached: only strength 0 (the base) can render")
        lyrics = getattr(demo, "lyrics", "").strip() or INSTRUMENTAL
        wanted = Demo(demo.prompt, lyrics, float(demo.duration), demo.seed)
        if strength == 0 and self.lora is not None:
            with self.lora.model.disable_adapter():
                answer = self._plan(wanted)
        else:
            if self.lora is not None and strength != self.strength:
                self._scale(strength)
            answer = self._plan(wanted)
        samples = decode_codes(self.pipe, answer.codes).numpy()
        if samples.shape[-1] == 0:
            samples = np.zeros((2, SAMPLE_RATE // 5), dtype=np.float32)
        self._details = {
            "plan": {
                "codes": len(answer.codes),
                "seconds": seconds(answer.codes),
                "metas": answer.metas,
            }
        }
        self._extra = {}
        if answer.codes:
            dit = render_codes(self.pipe, answer.codes, wanted, demo.steps, demo.cfg)
            self._extra["dit"] = dit.numpy()
        return samples

    def extra_audio(self) -> dict:
        """The last plan's codes rendered through the DiT, as {"dit": samples [2, N]}; {} for
        a plan without codes."""
        return self._extra

    def details(self) -> dict:
        """What the last render's plan held (the renders' sidecar keeps it)."""
        return self._details

    def _plan(self, demo: Demo):
        return plan(self.model, self.planner.tokenizer, self.planner.vocab, demo)

    def _scale(self, strength: float) -> None:
        """The adapter at `strength`: its B factors scaled (PEFT's scale is per config)."""
        factors = {m: (a, b * strength) for m, (a, b) in self.trained.factors.items()}
        self.lora.set_factors(
            adapter_files.LoraFactors(factors, self.trained.rank, self.trained.alpha)
        )
        self.strength = strength

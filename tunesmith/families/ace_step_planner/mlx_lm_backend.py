"""The planner adapter's objective on MLX, built on mlx-lm.

mlx-lm supplies every piece: `mlx_lm.load` reads the planner folder (its qwen3 model, the
same config.json and model.safetensors transformers reads), `linear_to_lora_layers` puts its
`LoRALinear` on the seven projections of every layer, and `tuner.trainer.default_loss` is the
masked token cross-entropy. Defaults and the loss are those of torch_lm.py, so the two
backends compute the same numbers from the same factors:

- scale: mlx-lm's LoRALinear adds `scale * (x @ lora_a) @ lora_b`; PEFT adds
  `(alpha / r) * B A x`, so scale = alpha / r and lora_a = A.T, lora_b = B.T
  (adapter_files.LoraFactors holds PEFT's orientation);
- the mask: `default_loss` trains the targets at positions offset .. length of each row, and
  its upper bound reaches one position past the last real token (it counts a padding token:
  mlx-lm pull request 1697); passing length - 1 keeps exactly the answer tokens, the same set
  torch_lm.py trains.

Gradient checkpointing (`checkpointing=True`): mlx-lm's own `grad_checkpoint`
(`mlx_lm.tuner.trainer`, what `mlx_lm.lora --grad-checkpoint` uses), which recomputes each
transformer block in the backward (`mx.checkpoint`). It replaces the `__call__` of the block's
class, for every instance in the process; so that it reaches this model's blocks only, they are
moved to a subclass of their class (`checkpoint_blocks`, one per class), and the subclass
takes the patch. A planner loaded without checkpointing in the same process is left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tunesmith.families.ace_step_planner import adapter_files
from tunesmith.families.ace_step_planner.adapter_files import MLX_KEYS, LoraFactors
from tunesmith.families.ace_step_planner.data import PlannerExample
from tunesmith.families.ace_step_planner.torch_lm import ALPHA, RANK


class MlxPlannerLora(adapter_files.AdapterFolders):
    """The planner in mlx-lm with LoRA layers on every projection; only they train."""

    default_layout = "mlx-lm"

    def __init__(
        self,
        folder: Path,
        rank: int = RANK,
        alpha: float = ALPHA,
        seed: int = 0,
        checkpointing: bool = False,
    ):
        import mlx.core as mx
        from mlx_lm import load
        from mlx_lm.tuner.utils import linear_to_lora_layers

        self.folder = Path(folder)
        self.rank, self.alpha = rank, alpha
        self.model, self.tokenizer = load(str(self.folder))
        self.model.freeze()
        mx.random.seed(seed)  # LoRALinear draws lora_a from MLX's global generator
        config = {"rank": rank, "scale": alpha / rank, "dropout": 0.0, "keys": list(MLX_KEYS)}
        linear_to_lora_layers(self.model, len(self.model.layers), config)
        self.model.eval()
        if checkpointing:
            checkpoint_blocks(self.model.layers)

    @property
    def num_layers(self) -> int:
        return len(self.model.layers)

    def parameters(self) -> dict:
        """The adapter's trainable arrays by name (`model.layers.0.self_attn.q_proj.lora_a`)."""
        from mlx.utils import tree_flatten

        return dict(tree_flatten(self.model.trainable_parameters()))

    def batch(self, examples: Sequence[PlannerExample]):
        """(tokens [B, T], lengths [B, 2]) as default_loss takes them (see the module note)."""
        import mlx.core as mx
        import numpy as np

        length = max(len(e.input_ids) for e in examples)
        pad = self.tokenizer.pad_token_id or 0
        tokens = np.full((len(examples), length), pad, dtype=np.int32)
        for row, example in enumerate(examples):
            tokens[row, : len(example.input_ids)] = example.input_ids
        # A row's first trained target is the first answer token (at prompt_tokens); the last
        # is its last real token (at len - 1).
        bounds = [[e.prompt_tokens, len(e.input_ids) - 1] for e in examples]
        return mx.array(tokens), mx.array(bounds, dtype=mx.int32)

    def loss(self, examples: Sequence[PlannerExample]):
        """Mean cross-entropy of the answer tokens (an mx scalar)."""
        from mlx_lm.tuner.trainer import default_loss

        tokens, bounds = self.batch(examples)
        loss, _ = default_loss(self.model, tokens, bounds)
        return loss

    def loss_and_grad(self, examples: Sequence[PlannerExample]):
        """(loss, gradients of the trainable arrays as a nested dict)."""
        import mlx.nn as nn
        from mlx_lm.tuner.trainer import default_loss

        tokens, bounds = self.batch(examples)
        value_and_grad = nn.value_and_grad(self.model, default_loss)
        (loss, _), grads = value_and_grad(self.model, tokens, bounds)
        return loss, grads

    def validation_loss(self, examples: Sequence[PlannerExample], batch_size: int = 1) -> float:
        """Answer-token cross-entropy over a fixed subset, weighted by tokens."""
        total, tokens = 0.0, 0
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            count = sum(e.answer_tokens for e in batch)
            total += self.loss(batch).item() * count
            tokens += count
        return total / max(tokens, 1)

    def logits(self, input_ids: Sequence[int]):
        """Logits [T, V] (float32 numpy) of one token sequence."""
        import mlx.core as mx
        import numpy as np

        out = self.model(mx.array([list(input_ids)]))[0]
        return np.array(out.astype(mx.float32))

    def factors(self) -> LoraFactors:
        """The current factors in PEFT's orientation, float32 torch tensors."""
        import mlx.core as mx
        import numpy as np
        import torch

        named = self.parameters()
        factors = {}
        for name, a in named.items():
            if name.endswith(".lora_a"):
                module = name[: -len(".lora_a")]
                b = named[f"{module}.lora_b"]
                to_torch = lambda x: torch.from_numpy(np.array(x.astype(mx.float32)))  # noqa: E731
                factors[module] = (to_torch(a).T.contiguous(), to_torch(b).T.contiguous())
        return LoraFactors(factors, self.rank, self.alpha)

    def set_factors(self, lora: LoraFactors) -> None:
        """Copy factors in (from a file or the other backend); every module must match."""
        import mlx.core as mx

        if lora.rank != self.rank or abs(lora.scale - self.alpha / self.rank) > 1e-9:
            raise ValueError(
                f"adapter r={lora.rank}, scale {lora.scale:g}; this one has r={self.rank}, "
                f"scale {self.alpha / self.rank:g}"
            )
        named = self.parameters()
        mine = {name[: -len(".lora_a")] for name in named if name.endswith(".lora_a")}
        if set(lora.factors) != mine:
            raise ValueError(f"adapter modules differ from the model's {len(mine)} LoRA modules")
        weights = []
        for module, (a, b) in lora.factors.items():
            dtype = named[f"{module}.lora_a"].dtype
            weights.append((f"{module}.lora_a", mx.array(a.float().T.numpy()).astype(dtype)))
            weights.append((f"{module}.lora_b", mx.array(b.float().T.numpy()).astype(dtype)))
        self.model.load_weights(weights, strict=False)
        mx.eval(self.model.parameters())

    @property
    def base_folder(self) -> Path:
        return self.folder


_CHECKPOINTED: dict[type, type] = {}  # an mlx-lm block class → its checkpointed subclass


def checkpoint_blocks(layers: list) -> None:
    """Move a model's transformer blocks (all of one mlx-lm class) to the subclass of that class
    whose `__call__` mlx-lm's `grad_checkpoint` has patched, made once per class."""
    from mlx_lm.tuner.trainer import grad_checkpoint

    block = type(layers[0])
    made = block not in _CHECKPOINTED
    if made:
        _CHECKPOINTED[block] = type(f"Checkpointed{block.__name__}", (block,), {})
    for layer in layers:
        layer.__class__ = _CHECKPOINTED[block]
    if made:
        grad_checkpoint(layers[0])  # patches the class of the layer it is given: the subclass

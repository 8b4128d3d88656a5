"""The optimizer of a run's adapter parameters: AdamW, or Muon beside AdamW.

`adamw`  torch.optim.AdamW on every parameter.
`muon`   HOT-Step Training Studio's DiT default, chosen PER PARAMETER: a 2-D parameter whose
         short side is ≥ `muon_min_dim` gets Muon (momentum orthogonalised by Newton–Schulz),
         every other one AdamW. Orthogonalising a matrix with a short side of 4 (a LoKr w1)
         shapes a 4-dimensional subspace, which means nothing; every published Muon keeps such
         parameters on AdamW. A LoRA A's (and B's) short side is its rank, so a rank below
         `muon_min_dim` puts the LoRA on AdamW (the split's summary says so).

Muon is torch.optim.Muon's update, parameter for parameter (`BucketedMuon`):

    B ← μ·B + (1−μ)·g                    (torch's lerp form: an EMA; HOT-Step's μ·B + g differs
    U ← (1−μ)·g + μ·B   (nesterov)        by a factor that the normalisation below removes)
    O ← NS₅(U / max(‖U‖_F, eps))         quintic Newton–Schulz, (a, b, c) = (3.4445, −4.775,
                                          2.0315), on the wide orientation (Uᵀ when rows > cols)
    θ ← θ·(1 − lr·wd) − lr·√max(1, rows/cols)·O

with lr the Muon group's own lr: the shared schedule's lr times `muon_lr_scale` (20: HOT-Step's
sweep on the DiT, where 5 undershot and 50 overshot; Muon's update is normalised, so per element
it is ~20x smaller than AdamW's). The scale lives in the group's lr, so LambdaLR, which
multiplies each group's `initial_lr`, keeps it at every step (`schedules.py`). Weight decay is
AdamW's 0.01 for both, as in HOT-Step (torch.optim.Muon's own default, 0.1, is not used).

What differs from torch.optim.Muon is how the work is done, not what is computed: torch's step
orthogonalises one parameter at a time; a LoKr run has hundreds of same-shape parameters (HOT-Step:
448 in three shapes), so here each shape's parameters go through ONE batched Newton–Schulz over a
stacked [n, rows, cols] tensor, `muon_bucket` at a time (`newton_schulz`). Its Frobenius norm is
taken per slab: one norm over the bucket would scale each parameter by its neighbours'
magnitudes. What batching saves is per-call overhead, which is large on a GPU (HOT-Step's
optimizer step went from 298.6 to 138 ms) and small on a CPU (bench/muon_step.py: about 1.4x
on a LoKr set of small matrices, nothing measurable on LoRA rank-128 matrices).
Newton–Schulz runs in float32 by default (HOT-Step's precision); with `ns_dtype="bfloat16"`,
torch's, the result is torch.optim.Muon's (bit for bit on the CPU, buckets of 4, in the tests).

Both halves sit in one `MuonAdamW` optimizer (a torch.optim.Optimizer, so LR schedulers and
`state_dict()`/`load_state_dict()` work on it as on any other) whose state holds tensors only:
AdamW's `step`/`exp_avg`/`exp_avg_sq` and Muon's `momentum_buffer`, the layout
`tunesmith.train.state` writes to safetensors + JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim._muon import _adjust_lr  # torch's own step-size rule, so ours is its exactly

OPTIMIZERS = ("adamw", "muon")
NS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}


class OptimizerError(ValueError):
    """Bad optimizer settings, or a parameter set Muon cannot train; the message says why."""


@dataclass(frozen=True)
class OptimizerSettings:
    name: str = "adamw"  # "muon" is HOT-Step's DiT default; AdamW what every other run uses
    weight_decay: float = 0.01  # torch AdamW's default, Side-Step's and HOT-Step's (both halves)
    betas: tuple[float, float] = (0.9, 0.999)  # torch AdamW's defaults, HOT-Step's
    eps: float = 1e-8  # idem
    muon_min_dim: int = 16  # HOT-Step's --muon-min-dim
    muon_lr_scale: float = 20.0  # HOT-Step's DiT sweep: 5 undershoots, 20 matches, 50 overshoots
    muon_momentum: float = 0.95  # torch.optim.Muon's and HOT-Step's
    muon_nesterov: bool = True  # idem
    muon_ns_steps: int = 5  # idem
    # Parameters per batched Newton–Schulz (HOT-Step's default bucket). HOT-Step's optimum came
    # from a gather that is quadratic in the bucket; torch.stack is linear, so here the cap only
    # bounds the stacked copy.
    muon_bucket: int = 16
    # HOT-Step's precision. "bfloat16" is torch.optim.Muon's: fast on GPUs, but on a CPU without
    # bfloat16 matrix units ~10x slower than float32 (bench/muon_step.py).
    muon_ns_dtype: str = "float32"
    # torch's default and HOT-Step's rule, lr·√max(1, rows/cols). torch's "match_rms_adamw"
    # (0.2·√max(rows, cols), Moonshot's) is meant to reuse AdamW's lr: muon_lr_scale 1 with it.
    muon_adjust_lr: str = "original"

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise OptimizerError(f"optimizer {self.name!r} is not one of {', '.join(OPTIMIZERS)}")
        if self.muon_ns_dtype not in NS_DTYPES:
            raise OptimizerError(
                f"muon_ns_dtype {self.muon_ns_dtype!r} is not one of {', '.join(NS_DTYPES)}"
            )
        for field in ("muon_min_dim", "muon_ns_steps", "muon_bucket"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptimizerError(f"{field} must be an integer ≥ 1, got {value!r}")
        if not self.muon_lr_scale > 0:
            raise OptimizerError(f"muon_lr_scale must be > 0, got {self.muon_lr_scale!r}")


@dataclass(frozen=True)
class Split:
    """Which parameter goes to which optimizer, by name and shape, and why."""

    optimizer: str
    muon: tuple[tuple[str, tuple[int, ...]], ...]
    adamw: tuple[tuple[str, tuple[int, ...]], ...]
    min_dim: int

    def summary(self) -> str:
        """The run's start line, e.g. `448 Muon / 352 AdamW (...)`."""
        if self.optimizer == "adamw":
            return f"optimizer adamw: {len(self.adamw)} parameters on AdamW"
        head = f"optimizer muon: {len(self.muon)} Muon / {len(self.adamw)} AdamW"
        shapes: dict[tuple[int, ...], int] = {}
        for _, shape in self.muon:
            shapes[shape] = shapes.get(shape, 0) + 1
        parts = [f"muon_min_dim {self.min_dim}"]
        if shapes:
            listed = ", ".join(f"{n} x {list(s)}" for s, n in sorted(shapes.items()))
            parts.append(f"Muon shapes: {listed}")
        flat = [(n, s) for n, s in self.adamw if len(s) != 2]
        narrow = [(n, s) for n, s in self.adamw if len(s) == 2]
        if narrow:
            name, shape = narrow[0]
            parts.append(
                f"{len(narrow)} 2-D with a short side below {self.min_dim} on AdamW, "
                f"e.g. {name} {list(shape)}"
            )
        if flat:
            parts.append(f"{len(flat)} not 2-D on AdamW, e.g. {flat[0][0]} {list(flat[0][1])}")
        if not self.muon:
            largest = max((min(s) for _, s in narrow), default=None)
            parts.append(
                f"no 2-D parameter has a short side ≥ muon_min_dim {self.min_dim} (largest: "
                f"{largest}), so every parameter trains with AdamW; a lower [runs.train] "
                "muon_min_dim puts them on Muon (a LoKr w2's short side is the layer's size "
                "divided by the factor)"
            )
        ranks = sorted({min(s) for n, s in narrow if "lora_A" in n or "lora_B" in n})
        if ranks:
            parts.append(
                f"a LoRA A's (and B's) short side is its rank: rank "
                f"{', '.join(map(str, ranks))} < muon_min_dim {self.min_dim}, so those "
                f"factors train with AdamW"
            )
        return f"{head} ({'; '.join(parts)})"


def split_parameters(
    named: Iterable[tuple[str, nn.Parameter]], settings: OptimizerSettings
) -> Split:
    """Sort the parameters by the per-parameter rule (module docstring)."""
    muon, adamw = [], []
    for name, param in named:
        shape = tuple(param.shape)
        eligible = (
            settings.name == "muon" and param.ndim == 2 and min(shape) >= settings.muon_min_dim
        )
        (muon if eligible else adamw).append((name, shape))
    return Split(settings.name, tuple(muon), tuple(adamw), settings.muon_min_dim)


def build_optimizer(
    named: Iterable[tuple[str, nn.Parameter]], lr: float, settings: OptimizerSettings
) -> tuple[torch.optim.Optimizer, Split]:
    """The optimizer for `named` (name, parameter) pairs at peak lr `lr`, and its split.

    Muon where no parameter qualifies is AdamW on all of them (the split's summary says so).
    """
    named = [(name, p) for name, p in named if p.requires_grad]
    if not named:
        raise OptimizerError("build_optimizer: no trainable parameters")
    if not lr > 0:
        raise OptimizerError(f"build_optimizer: lr must be > 0, got {lr!r}")
    split = split_parameters(named, settings)
    adamw_kwargs = dict(betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay)
    if settings.name == "adamw" or not split.muon:
        # Muon with no parameter it can take (a small LoKr, a LoRA of a low rank) is AdamW on
        # every parameter, as the per-parameter rule gives; the split's summary says so.
        return torch.optim.AdamW([p for _, p in named], lr=lr, **adamw_kwargs), split
    by_name = dict(named)
    muon = BucketedMuon(
        [{"params": [by_name[n] for n, _ in split.muon], "lr_scale": settings.muon_lr_scale}],
        lr=lr * settings.muon_lr_scale,
        weight_decay=settings.weight_decay,
        momentum=settings.muon_momentum,
        nesterov=settings.muon_nesterov,
        ns_steps=settings.muon_ns_steps,
        adjust_lr_fn=settings.muon_adjust_lr,
        ns_dtype=settings.muon_ns_dtype,
        bucket_size=settings.muon_bucket,
    )
    adamw = None
    if split.adamw:
        groups = [{"params": [by_name[n] for n, _ in split.adamw], "lr_scale": 1.0}]
        adamw = torch.optim.AdamW(groups, lr=lr, **adamw_kwargs)
    return MuonAdamW(muon, adamw), split


def newton_schulz(
    updates: torch.Tensor,
    coefficients: tuple[float, float, float],
    steps: int,
    eps: float,
    dtype: torch.dtype,
) -> torch.Tensor:
    """torch.optim.Muon's `_zeropower_via_newtonschulz` on each [rows, cols] slab of `updates`
    ([n, rows, cols]) at once, in `dtype`.

    The same operations in the same order, batched (baddbmm for addmm); the Frobenius norm is
    per slab (dims -2, -1), so slab i's result does not depend on slab j's scale.
    """
    a, b, c = coefficients
    x = updates.to(dtype)
    tall = updates.size(-2) > updates.size(-1)
    if tall:
        x = x.mT  # iterate on the wide orientation: the Gram matrix is the small one
    x = x / torch.linalg.vector_norm(x, dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)  # b·A + c·A·A
        x = torch.baddbmm(x, poly, x, beta=a)  # a·X + (b·A + c·A²)·X
    return x.mT if tall else x


class BucketedMuon(torch.optim.Muon):
    """torch.optim.Muon with same-shape parameters orthogonalised together (module docstring).

    Its groups and state are torch.optim.Muon's (`momentum_buffer` per parameter) plus two group
    keys: `ns_dtype` (a name in NS_DTYPES, so that the group stays JSON) and `bucket_size`.
    """

    def __init__(self, params, *, ns_dtype: str = "float32", bucket_size: int = 16, **kwargs):
        super().__init__(params, **kwargs)
        self.defaults.update(ns_dtype=ns_dtype, bucket_size=bucket_size)
        for group in self.param_groups:
            group.setdefault("ns_dtype", ns_dtype)
            group.setdefault("bucket_size", bucket_size)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, buffers = [], [], []
            self._init_group(group, params, grads, buffers)
            if params:
                self._update_group(group, params, grads, buffers)
        return loss

    def _update_group(self, group: dict, params: list, grads: list, buffers: list) -> None:
        lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
        torch._foreach_lerp_(buffers, grads, 1 - momentum)  # B ← μ·B + (1−μ)·g
        if group["nesterov"]:
            updates = [g.lerp(b, momentum) for g, b in zip(grads, buffers, strict=True)]
        else:
            updates = buffers
        dtype = NS_DTYPES[group["ns_dtype"]]
        for bucket in _buckets(params, group["bucket_size"]):
            ortho = newton_schulz(
                torch.stack([updates[i] for i in bucket]),
                tuple(group["ns_coefficients"]),
                group["ns_steps"],
                group["eps"],
                dtype,
            )
            members = [params[i] for i in bucket]
            step_size = _adjust_lr(lr, group["adjust_lr_fn"], members[0].shape)
            torch._foreach_mul_(members, 1 - lr * weight_decay)  # decoupled, unadjusted lr
            torch._foreach_add_(members, list(ortho.unbind(0)), alpha=-step_size)


def _buckets(params: list[torch.Tensor], size: int) -> list[list[int]]:
    """Indices of `params` grouped by exact shape (first-seen order), `size` at most per group."""
    by_shape: dict[tuple[int, ...], list[list[int]]] = {}
    for index, param in enumerate(params):
        chunks = by_shape.setdefault(tuple(param.shape), [[]])
        if len(chunks[-1]) == size:
            chunks.append([])
        chunks[-1].append(index)
    return [chunk for chunks in by_shape.values() for chunk in chunks]


class MuonAdamW(torch.optim.Optimizer):
    """One optimizer over a BucketedMuon and a torch.optim.AdamW (either may be None).

    Its `param_groups` are the very group dicts of the two (AdamW's first, so that
    `param_groups[0]["lr"]` is the schedule's lr whenever AdamW has parameters; every group
    carries `lr_scale`), and its `state` is the one dict both write into, so torch's own
    `state_dict()` / `load_state_dict()` and any LR scheduler see one optimizer.
    """

    def __init__(self, muon: BucketedMuon | None, adamw: torch.optim.AdamW | None) -> None:
        self.parts = [part for part in (adamw, muon) if part is not None]
        if not self.parts:
            raise OptimizerError("MuonAdamW: neither a Muon nor an AdamW part")
        super().__init__([g for part in self.parts for g in part.param_groups], {})
        self._link()

    def _link(self) -> None:
        """Point the parts at this optimizer's groups and state (again after a load, which
        replaces both)."""
        start = 0
        for part in self.parts:
            count = len(part.param_groups)
            part.param_groups = self.param_groups[start : start + count]
            start += count
        for part in self.parts:
            for param in (p for g in part.param_groups for p in g["params"]):
                if param in part.state and param not in self.state:
                    self.state[param] = part.state[param]
            part.state = self.state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._link()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for part in self.parts:
            part.step()
        return loss

    @property
    def schedule_lr(self) -> float:
        """The shared schedule's current lr (a group's lr over its `lr_scale`)."""
        group = self.param_groups[0]
        return group["lr"] / group.get("lr_scale", 1.0)

"""The full state of a run, to resume it exactly: adapter, optimizer, random states, data
order, step, validation history. Tensors go to `state.safetensors`, the rest to
`state.json` (no pickle anywhere). Written whole into a temporary folder and renamed.

Resuming checks that the state belongs to the same base model and adapter: a state of
another base model, adapter type, rank, alpha or target set is refused, saying which.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from tunesmith.store.atomic import disk_space, writer_lock
from tunesmith.store.tensors import safetensors_bytes

IDENTITY_KEYS = ("base_model", "adapter_type", "rank", "alpha", "targets")


class ResumeError(ValueError):
    """A saved state that cannot continue this run."""


@dataclass
class RunState:
    step: int
    params: list[torch.Tensor]
    optimizer: dict[str, Any]  # torch.optim state_dict
    train_rng: torch.Tensor
    sampler_rng: torch.Tensor
    sampler: dict[str, Any]
    prompt_rng: tuple
    history: list[dict[str, Any]] = field(default_factory=list)  # validation measurements
    best: dict[str, Any] = field(default_factory=dict)  # step, loss, path
    checkpoints: list[str] = field(default_factory=list)
    identity: dict[str, Any] = field(default_factory=dict)


def save_state(folder: Path, state: RunState) -> Path:
    """Write `state` as `folder/step=<step>/`; keeps the two newest states."""
    final = folder / f"step={state.step}"
    tmp = folder / f".tmp-step={state.step}"
    shutil.rmtree(tmp, ignore_errors=True)
    with disk_space(tmp, f"the training state at step {state.step}"):
        tmp.mkdir(parents=True)
        with writer_lock(tmp):
            _write(tmp, state)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in sorted(_states(folder))[:-2]:
        shutil.rmtree(old[1], ignore_errors=True)
    return final


def _write(tmp: Path, state: RunState) -> None:
    tensors = {f"param.{i}": p.detach().cpu().contiguous() for i, p in enumerate(state.params)}
    tensors["rng.train"], tensors["rng.sampler"] = state.train_rng, state.sampler_rng
    scalars = {}
    for index, entry in state.optimizer["state"].items():
        for name, value in entry.items():
            if torch.is_tensor(value):
                tensors[f"adam.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{name}"] = value
    (tmp / "state.safetensors").write_bytes(safetensors_bytes(tensors))
    document = {
        "step": state.step,
        "param_groups": state.optimizer["param_groups"],
        "optimizer_scalars": scalars,
        "sampler": state.sampler,
        "prompt_rng": _to_json(state.prompt_rng),
        "history": state.history,
        "best": state.best,
        "checkpoints": state.checkpoints,
        "identity": state.identity,
    }
    (tmp / "state.json").write_text(json.dumps(document, indent=1), encoding="utf-8")


def latest_state(folder: Path, at_most: int) -> Path | None:
    """The newest saved state at or before step `at_most`."""
    found = [(step, path) for step, path in _states(folder) if step <= at_most]
    return max(found)[1] if found else None


def load_state(path: Path, identity: dict[str, Any]) -> RunState:
    document = json.loads((path / "state.json").read_text(encoding="utf-8"))
    saved = document["identity"]
    for key in IDENTITY_KEYS:
        if saved.get(key) != identity.get(key):
            raise ResumeError(
                f"{path}: cannot resume: the saved run has {key} {saved.get(key)!r}, "
                f"this run has {identity.get(key)!r}"
            )
    tensors = load_file(path / "state.safetensors")
    params = [tensors[f"param.{i}"] for i in range(_count(tensors))]
    optimizer_state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, index, name = key.split(".", 2)
            optimizer_state.setdefault(int(index), {})[name] = value
    for key, value in document["optimizer_scalars"].items():
        index, name = key.split(".", 1)
        optimizer_state.setdefault(int(index), {})[name] = value
    return RunState(
        step=document["step"],
        params=params,
        optimizer={"state": optimizer_state, "param_groups": document["param_groups"]},
        train_rng=tensors["rng.train"],
        sampler_rng=tensors["rng.sampler"],
        sampler=document["sampler"],
        prompt_rng=_from_json(document["prompt_rng"]),
        history=document["history"],
        best=document["best"],
        checkpoints=document["checkpoints"],
        identity=saved,
    )


def restore(state: RunState, params: list[torch.nn.Parameter], optimizer) -> None:
    """Put a saved state's adapter values and optimizer state back (torch loops)."""
    with torch.no_grad():
        for param, value in zip(params, state.params, strict=True):
            param.copy_(value)
    optimizer.load_state_dict(state.optimizer)


def _count(tensors: dict[str, torch.Tensor]) -> int:
    return sum(1 for key in tensors if key.startswith("param."))


def _states(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    return [
        (int(p.name.split("=", 1)[1]), p)
        for p in folder.glob("step=*")
        if (p / "state.json").exists()
    ]


def _to_json(value: Any) -> Any:
    return [_to_json(v) for v in value] if isinstance(value, tuple | list) else value


def _from_json(value: Any) -> Any:
    return tuple(_from_json(v) for v in value) if isinstance(value, list) else value

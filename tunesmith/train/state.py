"""The full state of a run, to resume it exactly, in `<run>/state/step=<step>/`.

Tensors (the adapter, the optimizer's moments, random generator states) go to
`state.safetensors`, everything else to `state.json`; no pickle anywhere. A state is written
whole into a temporary folder, under the writer's lock, and renamed; the two newest are kept.
Beside them the state keeps a copy of the best adapter's files as written, so a deleted
output can be written again without training.

Resuming checks that the state belongs to the same base model and adapter: a state of
another base model, adapter type, rank, alpha or target set is refused, saying which. A state
trained on several processes (`world_size` in its identity; one where it has none) resumes
only on as many: each holds the draws of a global batch split over that many ranks.

The helpers at the end turn a torch optimizer's and a generator's state into tensors and
JSON and back, for the torch trainers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from tunesmith.store.atomic import disk_space, writer_lock
from tunesmith.store.tensors import safetensors_bytes

IDENTITY_KEYS = ("base_model", "adapter_type", "rank", "alpha", "targets")
KEEP = 2  # states kept: the newest and the one before, in case the newest is damaged
BEST = "best"  # the folder of the best adapter's files inside a state


class ResumeError(ValueError):
    """A saved state that cannot continue this run."""


def save_state(
    folder: Path,
    step: int,
    tensors: dict[str, torch.Tensor],
    document: dict[str, Any],
    best_files: list[Path] = (),
) -> Path:
    """Write a state as `folder/step=<step>/` (with copies of `best_files`)."""
    final = folder / f"step={step}"
    tmp = folder / f".tmp-step={step}"
    shutil.rmtree(tmp, ignore_errors=True)
    with disk_space(tmp, f"the training state at step {step}"):
        tmp.mkdir(parents=True)
        with writer_lock(tmp):
            tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
            (tmp / "state.safetensors").write_bytes(safetensors_bytes(tensors))
            (tmp / "state.json").write_text(json.dumps(document, indent=1), encoding="utf-8")
            for path in best_files:
                copy = tmp / BEST / _copy_name(path)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
    for _, old in sorted(_states(folder))[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_state(folder: Path, at_most: int) -> Path | None:
    """The newest saved state at or before step `at_most`."""
    found = [(step, path) for step, path in _states(folder) if step <= at_most]
    return max(found)[1] if found else None


def load_state(path: Path, identity: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, document) of a saved state, refused if it belongs to another run."""
    document = json.loads((path / "state.json").read_text(encoding="utf-8"))
    saved = document.get("identity", {})
    for key in IDENTITY_KEYS:
        if saved.get(key) != identity.get(key):
            raise ResumeError(
                f"{path}: cannot resume: the saved run has {key} {saved.get(key)!r}, "
                f"this run has {identity.get(key)!r}"
            )
    saved_world, world = saved.get("world_size", 1), identity.get("world_size", 1)
    if saved_world != world:
        raise ResumeError(
            f"{path}: cannot resume: the saved run was trained on {saved_world} process(es), "
            f"this run has {world} (train.devices × train.nodes); resume with "
            f"{saved_world}, or remove {path.parent} to start this run over"
        )
    return load_file(path / "state.safetensors"), document


def best_copy(state: Path, path: Path) -> Path | None:
    """The state's copy of the best adapter's file `path`, if it has one (a state written
    before copies were kept by folder holds them by file name alone)."""
    for copy in (state / BEST / _copy_name(path), state / BEST / path.name):
        if copy.exists():
            return copy
    return None


def _copy_name(path: Path) -> str:
    """Where a state keeps its copy of `path`: under its folder's name, since two files of one
    adapter may share a name (a PEFT folder's adapter_config.json and its mlx-lm twin's)."""
    return f"{path.parent.name}/{path.name}"


def _states(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    return [
        (int(p.name.split("=", 1)[1]), p)
        for p in folder.glob("step=*")
        if (p / "state.json").exists()
    ]


# --- torch pieces of a trainer's state ----------------------------------------------------------


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """A torch optimizer's state dict as tensors (`adam.<param>.<name>`) and JSON."""
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, entry in state["state"].items():
        for name, value in entry.items():
            if torch.is_tensor(value):
                tensors[f"adam.{index}.{name}"] = value
            else:
                scalars[f"{index}.{name}"] = value
    return tensors, {"param_groups": state["param_groups"], "optimizer_scalars": scalars}


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], document: dict
) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for key, value in document["optimizer_scalars"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": document["param_groups"]})


def params_state(params: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The adapter's values in fp32, `param.<i>` in the trainer's parameter order."""
    return {f"param.{i}": p.detach().float() for i, p in enumerate(params)}


def load_params(params: list[torch.nn.Parameter], tensors: dict[str, torch.Tensor]) -> None:
    count = sum(1 for key in tensors if key.startswith("param."))
    if count != len(params):
        raise ResumeError(f"the saved state has {count} adapter tensors, this run {len(params)}")
    with torch.no_grad():
        for i, param in enumerate(params):
            param.copy_(tensors[f"param.{i}"])


def trainer_state(
    params: list[torch.Tensor], optimizer: torch.optim.Optimizer, order, key: str, **counters
) -> tuple[dict[str, torch.Tensor], dict]:
    """What a torch trainer's state holds in every family: the adapter's parameters, the
    optimizer's moments and the data order (`train/order.py`, saved under `key`), with the
    trainer's own JSON `counters` in the document."""
    optimizer_tensors, optimizer_document = optimizer_state(optimizer)
    order_tensors, order_document = order.state(key)
    tensors = {**params_state(params), **optimizer_tensors, **order_tensors}
    return tensors, {"optimizer": optimizer_document, **order_document, **counters}


def load_trainer_state(
    params: list[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    order,
    key: str,
    tensors: dict[str, torch.Tensor],
    document: dict,
) -> None:
    """Put back what `trainer_state` saved."""
    load_params(params, tensors)
    load_optimizer_state(optimizer, tensors, document["optimizer"])
    order.load_state(tensors, document, key)


def to_json(value: Any) -> Any:
    """Tuples (Python's random state) as lists, for JSON."""
    return [to_json(v) for v in value] if isinstance(value, tuple | list) else value


def from_json(value: Any) -> Any:
    return tuple(from_json(v) for v in value) if isinstance(value, list) else value

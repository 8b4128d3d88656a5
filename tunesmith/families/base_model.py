"""Checkpoint folders in the diffusers layout: what must be there, and a content fingerprint.

Each family names its pipeline class and its parts; `check_folder` reports every missing or
refused part at once, so a user fixes a folder in one go. Only `.safetensors` weights are
ever loaded: a part whose weights are pickles only is refused, never converted.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PICKLE_SUFFIXES = (".bin", ".pt", ".ckpt", ".pth", ".pkl")


@dataclass(frozen=True)
class Part:
    """One component folder of the base model and what it must hold."""

    name: str  # folder name and key in model_index.json
    classes: tuple[str, ...]  # class names model_index.json may give it
    config: str  # file that must be in the folder
    weights: bool  # whether the folder must hold .safetensors weights
    any_of: tuple[str, ...] = ()  # at least one of these files must be there too

    def describe(self) -> str:
        files = [self.config, *(["*.safetensors"] if self.weights else [])]
        if self.any_of:
            files.append(" or ".join(self.any_of))
        return f"{self.name}/ ({' | '.join(self.classes)}: {', '.join(files)})"


def check_folder(folder: Path, pipeline: str, parts: tuple[Part, ...], family: str) -> None:
    """Raise ValueError naming every missing or refused part, or return if the folder is whole.

    `pipeline` is the diffusers pipeline class model_index.json must name; `family` is how
    the model is called in the message ("Stable Audio 3").
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(_error(folder, [f"{folder} is not a folder"], pipeline, parts, family))
    problems: list[str] = []
    index = _read_model_index(folder, problems, pipeline)
    for part in parts:
        problems.extend(_part_problems(folder, part, index))
    if problems:
        raise ValueError(_error(folder, problems, pipeline, parts, family))


def _read_model_index(folder: Path, problems: list[str], pipeline: str) -> dict | None:
    path = folder / "model_index.json"
    if not path.is_file():
        problems.append("model_index.json is missing")
        return None
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        problems.append(f"model_index.json is not valid JSON ({err})")
        return None
    if not isinstance(index, dict):
        problems.append("model_index.json is not a JSON object")
        return None
    if index.get("_class_name") != pipeline:
        problems.append(
            f"model_index.json describes {index.get('_class_name')!r}, not {pipeline!r}"
        )
    return index


def _part_problems(folder: Path, part: Part, index: dict | None) -> list[str]:
    problems = []
    if index is not None:
        entry = index.get(part.name)
        # An entry is [library, class]; the library may be "diffusers" or, for the duration
        # embedder, the pipeline module "stable_audio_3" (what save_pretrained writes).
        declared = entry[1] if isinstance(entry, list) and len(entry) == 2 else None
        if entry is None:
            problems.append(f"model_index.json has no {part.name!r} entry")
        elif declared not in part.classes:
            expected = " or ".join(part.classes)
            problems.append(f"model_index.json gives {part.name!r} as {entry}, expected {expected}")
    sub = folder / part.name
    if not sub.is_dir():
        return [*problems, f"{part.name}/ is missing"]
    if not (sub / part.config).is_file():
        problems.append(f"{part.name}/{part.config} is missing")
    if part.any_of and not any((sub / name).is_file() for name in part.any_of):
        problems.append(f"{part.name}/ has none of {', '.join(part.any_of)}")
    if part.weights and not any(sub.glob("*.safetensors")):
        pickles = sorted(p.name for p in sub.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            problems.append(
                f"{part.name}/ has only pickle weights ({', '.join(pickles)}), which tunesmith "
                "refuses to load: convert them to .safetensors"
            )
        else:
            problems.append(f"{part.name}/ has no .safetensors weights")
    return problems


def _error(
    folder: Path, problems: list[str], pipeline: str, parts: tuple[Part, ...], family: str
) -> str:
    lines = [f"{folder} is not a usable {family} base model:"]
    lines += [f"  - {p}" for p in problems]
    lines.append(
        f"A {family} base model is a diffusers {pipeline} folder: model_index.json "
        "and " + "; ".join(part.describe() for part in parts) + "."
    )
    return "\n".join(lines)


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Load without diffusers'/transformers' progress bars and known deprecation noise."""
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    diffusers_logging.disable_progress_bar()
    transformers_logging.disable_progress_bar()
    with warnings.catch_warnings():
        # AutoencoderSAME still builds its convolutions with the old weight_norm.
        warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
        yield


def frozen(pipe):
    """`pipe` with no base weight asking for a gradient: nothing trains them (adapters are
    attached and made trainable by the trainers). It also keeps one arithmetic for a layer
    whatever is attached to it: torch folds a batched linear into one matrix product or not
    depending on whether the weight requires a gradient, and the two round differently on some
    processors (measured: a base render and the render at adapter strength 0 differed by 4e-7
    on an AVX-512 Xeon until both pipelines were frozen)."""
    import torch

    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            component.requires_grad_(False)
    return pipe


# Building a published architecture without its weights (each family's full_size.py).


@contextmanager
def default_dtype(dtype) -> Iterator[None]:
    """Parameters made at `dtype` from the start, never in float32 first."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextmanager
def without_init(device: str) -> Iterator[None]:
    """Modules made on `device` without their classes' default init: on `meta` nothing is
    allocated; elsewhere the parameters are left for `fill_normal` (the classes' own init of
    billions of parameters takes minutes)."""
    import torch

    if device == "meta":
        with torch.device("meta"):
            yield
        return
    from diffusers.models.modeling_utils import no_init_weights
    from transformers.initialization import no_init_weights as no_transformers_init

    with torch.device(device), no_init_weights(), no_transformers_init():
        yield


def fill_normal(module, std: float, seed: int) -> None:
    """Every parameter of `module` drawn from N(0, std²), from one generator seeded `seed`."""
    import torch

    with torch.no_grad():
        generator = torch.Generator(device=next(module.parameters()).device).manual_seed(seed)
        for parameter in module.parameters():
            parameter.normal_(0.0, std, generator=generator)

"""Which published Stable Audio 3 model a base model folder holds, by underfit's model id.

An adapter file's `lora_config.base_model` is read by underfit's dashboard when the file seeds
a run (`dashboard/server.py`, the seed upload handler; `dashboard/index.html`, the seed
dialog). A name it knows (its `dashboard/models/<id>/registry.json` keys) starts the run on
that model; a name it does not know stops with "Base model not loaded"; no name at all makes
it infer the model from the file's layer names and shapes (every `model.*` layer must be one
of the model's `lora_layer_template` layers). So the key holds underfit's id when the folder
is one of the published checkpoints, and is left out otherwise.

The published weights cannot be compared here (nothing is downloaded), so a folder is
recognised by what it states about itself, and only when that is unambiguous:

1. its architecture: the DiT's config (`transformer/config.json`) and the VAE's width
   (`vae/config.json`) must be exactly one published model's. These are the values of
   underfit's model templates (`dashboard/models/<id>/training_template.json`,
   `model.diffusion.config` and the pretransform's encoder), under the names diffusers'
   `scripts/convert_stable_audio_3_to_diffusers.py` gives them, and they agree with the
   layer shapes in underfit's `registry.json` (`ui.lora_layer_template`). The medium is
   recognised by its architecture alone; small-music and small-sfx share theirs.
2. its provenance, for the models that share an architecture: a path component naming the
   published repository, as the Hugging Face cache lays it out
   (`models--stabilityai--stable-audio-3-small-sfx-base/snapshots/<rev>`) or as a folder
   named after it (`…/stable-audio-3-small-sfx-base`). It must agree with the architecture.

Anything else (a tiny model, another architecture, a small model of unknown origin, a name
that contradicts the architecture) gets no id: the dashboard's own inference then offers the
models whose layers fit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# diffusers' StableAudio3DiTModel config of each published DiT (underfit's templates).
MEDIUM_DIT = {
    "io_channels": 256,
    "patch_size": 1,
    "embed_dim": 1536,
    "depth": 24,
    "num_heads": 24,
    "cond_token_dim": 768,
    "global_cond_dim": 768,
    "local_add_cond_dim": 257,
    "timestep_features_dim": 256,
    "ff_mult": 4,
    "num_memory_tokens": 64,
    "use_differential_attention": True,
}
SMALL_DIT = {
    **MEDIUM_DIT,
    "embed_dim": 1024,
    "depth": 20,
    "num_heads": 16,
    "use_differential_attention": False,  # the small templates' attn_kwargs.differential
}
SAME_L = {"latent_dim": 256, "encoder_channels": 256}  # the medium's VAE (registry: SAME-L)
SAME_S = {"latent_dim": 256, "encoder_channels": 128}  # the small models' (registry: SAME-S)


@dataclass(frozen=True)
class Published:
    model_id: str  # underfit's id: dashboard/models/<id>/registry.json `key`
    repos: tuple[str, ...]  # its registry.json `hf_repo` (base, then arc)
    dit: dict
    vae: dict


PUBLISHED = (
    Published(
        "sa3-medium",
        ("stabilityai/stable-audio-3-medium-base", "stabilityai/stable-audio-3-medium"),
        MEDIUM_DIT,
        SAME_L,
    ),
    Published(
        "sa3-sm-music",
        ("stabilityai/stable-audio-3-small-music-base", "stabilityai/stable-audio-3-small-music"),
        SMALL_DIT,
        SAME_S,
    ),
    Published(
        "sa3-sm-sfx",
        ("stabilityai/stable-audio-3-small-sfx-base", "stabilityai/stable-audio-3-small-sfx"),
        SMALL_DIT,
        SAME_S,
    ),
)
UNDERFIT_MODEL_IDS = tuple(p.model_id for p in PUBLISHED)


def underfit_model_id(folder: Path) -> str | None:
    """underfit's id of the published model in `folder`, or None (see the module doc)."""
    folder = Path(folder)
    dit = _config(folder / "transformer" / "config.json")
    vae = _config(folder / "vae" / "config.json")
    fits = [p for p in PUBLISHED if _holds(dit, p.dit) and _holds(vae, p.vae)]
    named = [p for p in fits if _names(folder, p)]
    if named:  # the path names a published repository whose architecture this is
        return named[0].model_id
    if len(fits) == 1 and not _names_another(folder, fits[0]):
        return fits[0].model_id
    return None


def _config(path: Path) -> dict:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _holds(config: dict, expected: dict) -> bool:
    # == on purpose: 4 and 4.0 are the same ff_mult; True is not 1 (a bool is checked as one).
    return all(
        key in config
        and isinstance(config[key], bool) == isinstance(value, bool)
        and config[key] == value
        for key, value in expected.items()
    )


def _repo_names(folder: Path) -> set[str]:
    """Repository names the path states: cache folders (`models--org--name`) and plain names."""
    found = set()
    for part in folder.absolute().parts:
        if part.startswith("models--"):
            found.add(part[len("models--") :].replace("--", "/"))
        found.add(part)
    return found


def _names(folder: Path, published: Published) -> bool:
    stated = _repo_names(folder)
    return any(repo in stated or repo.split("/", 1)[1] in stated for repo in published.repos)


def _names_another(folder: Path, published: Published) -> bool:
    return any(_names(folder, other) for other in PUBLISHED if other is not published)

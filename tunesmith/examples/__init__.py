"""Example datasets and tiny models, made by code (nothing downloaded).

`loops` (audio at known tempi and keys) trains a Stable Audio 3 adapter on the tiny
Stable Audio 3 in `<models>/tiny-stable-audio-3` (its ARC sibling, for demos with `arc = true`,
in `<models>/tiny-stable-audio-3-arc`); `rings` (drawn images) is encoded for
the tiny SDXL in `<models>/tiny-sdxl`; `songs` (sung and instrumental clips with lyrics
sidecars) trains an ACE-Step LoRA on the tiny ACE-Step 1.5 in `<models>/tiny-ace-step` and a
planner LoRA on the tiny planner LM in `<models>/tiny-acestep-5Hz-lm`.
"""

from __future__ import annotations

import json
from pathlib import Path

TINY_SA3 = "tiny-stable-audio-3"
# Its ARC sibling, where a demo with `arc = true` renders (stable_audio_3/arc.py
# `arc_model_name`; named here without importing torch).
TINY_SA3_ARC = TINY_SA3 + "-arc"
TINY_SDXL = "tiny-sdxl"
TINY_ACE_STEP = "tiny-ace-step"
# The tiny planner LM in the published acestep-5Hz-lm layout, beside the tiny ACE-Step (a
# planner run's adapter.planner names it; relative names resolve beside the base model).
TINY_PLANNER = "tiny-acestep-5Hz-lm"
# The embedding models that measure each checkpoint's renders ([metrics]): CLAP for audio,
# CLIP and DINOv2 for pictures, the real transformers classes at tiny sizes.
TINY_CLAP, TINY_CLIP, TINY_DINO = "tiny-clap", "tiny-clip", "tiny-dinov2"

# The rings' run: the tiny SDXL at a size its 8x VAE turns into 8x8 latents, a learning rate
# a random tiny UNet moves at in 200 steps (SDXL's usual is 1e-4).
RINGS_TOML = f"""\
# Written by `tunesmith examples`. Every key not given takes the family's default.
# The models that measure every checkpoint's renders (prompt, style, Fréchet distance).
[metrics]
clip = "{TINY_CLIP}"
dino = "{TINY_DINO}"

[[runs]]
name = "rings-lora"
family = "sdxl"
base_model = "{TINY_SDXL}"
trigger = "rngstyle"

[runs.adapter]
rank = 16

[runs.train]
size = 64
steps = 200
lr = 1e-3
eval_every = 50
checkpoint_every = 100

# Drawn with and without the adapter, same seed, at the run's size.
[[runs.demos]]
prompt = "{{trigger}}, three discs with thick dark rings on a cream ground"
seed = 42
steps = 20
cfg = 5.0

[[runs.demos]]
prompt = "a picture"
seed = 43
steps = 20
cfg = 5.0
"""

# The loops' run: the tiny model, a trigger word, and a run short enough for a CPU.
LOOPS_TOML = f"""\
# Written by `tunesmith examples`. Every key not given takes the family's default.
# The model that measures every checkpoint's renders (prompt, style, Fréchet distance).
[metrics]
clap = "{TINY_CLAP}"

[[runs]]
name = "loops-dora"
family = "stable-audio-3"
base_model = "{TINY_SA3}"
trigger = "lpzloop"

[runs.adapter]
type = "dora-rows"
rank = 16

[runs.train]
steps = 200
lr = 1e-3
eval_every = 50
checkpoint_every = 100
latent_crop_length = 256

# Rendered with and without the adapter, same seed (the family's defaults are an empty
# prompt and the trigger word, 10 s, 50 steps, cfg 7).
[[runs.demos]]
prompt = ""
seed = 42
duration = 8.0
steps = 25

[[runs.demos]]
prompt = "{{trigger}}, Genre: lo-fi hip hop"
seed = 43
duration = 8.0
steps = 25

# Uncomment to render a demo as underfit's ARC demos are: on the ARC model beside the base
# ({TINY_SA3_ARC}) with the adapter merged, sampled ping-pong (8 steps, cfg 1).
# [[runs.demos]]
# prompt = "{{trigger}}, Genre: lo-fi hip hop"
# seed = 44
# duration = 8.0
# arc = true
"""


# The songs' run: HOT-Step's LoRA with Muon and its schedule, on crops of 5 s, a horizon short
# enough for a CPU (HOT-Step's is 400 epochs), a rank the tiny DiT's 32-wide layers can hold.
SONGS_TOML = f"""\
# Written by `tunesmith examples`. Every key not given takes the family's default.
# The model that measures every checkpoint's renders (prompt, style, Fréchet distance).
[metrics]
clap = "{TINY_CLAP}"

[dataset]
default_language = "en"   # declared, never detected
custom_tag = "sngz"       # the trigger word, put before every caption (tag_position)

[[runs]]
name = "songs-lora"
family = "ace-step"
base_model = "{TINY_ACE_STEP}"
trigger = "sngz"

[runs.adapter]
type = "lora"
rank = 16                 # alpha: 2 x rank, HOT-Step's ratio

[runs.train]
epochs = 60
crop_frames = 128         # 5.1 s of latents at 25 Hz
eval_every = 15
checkpoint_every = 30

# Rendered with and without the adapter, same seed.
[[runs.demos]]
prompt = "{{trigger}}, bright synth pop song with a female voice"
lyrics = "[Verse]\\nlast bus home through the city light"
seed = 42
duration = 8.0
steps = 8

[[runs.demos]]
prompt = "warm lo-fi hip hop instrumental"
seed = 43
duration = 8.0
steps = 8

# The planner LM (HOT-Step's LM training): a LoRA of rank 16 on every attention and MLP
# projection, trained on the songs' audio codes; its demos are planned with and without the
# adapter from the same seed and heard without the DiT.
[[runs]]
name = "songs-planner"
family = "ace-step-planner"
base_model = "{TINY_ACE_STEP}"
trigger = "sngz"

[runs.adapter]
planner = "{TINY_PLANNER}"

[runs.train]
epochs = 30               # HOT-Step's 75 is for real songs; 30 shows the change on a CPU
lr = 1e-3                 # a random tiny LM moves at this rate (HOT-Step's is 1e-4)
target_loss = 0.0         # off: the tiny planner's loss starts near ln(vocabulary)
eval_every = 15
checkpoint_every = 15

[[runs.demos]]
prompt = "{{trigger}}, bright synth pop song with a female voice"
lyrics = "[Verse]\\nlast bus home through the city light"
seed = 42
duration = 8.0
steps = 8                 # the DiT's steps when the plan's codes are rendered through it
"""


def make_examples(
    datasets_root: Path, models_root: Path | None = None, record: Path | None = None
) -> dict[str, Path]:
    """Write every example dataset under `datasets_root` (and the tiny models under
    `models_root`, when given); returns name → folder.

    With `record` (a `tunesmith.store.verdicts` record), the state this call leaves is
    remembered (`_state_key`: the code, the libraries' versions, every file's bytes), and a
    later call that finds that very state writes and imports nothing: rendering the audio and
    importing torch to check the models took six seconds of a `make demo` that changed
    nothing."""
    from tunesmith.store import verdicts

    folders = {name: datasets_root / name for name in ("loops", "rings", "songs")}
    if models_root is not None:
        tiny = (TINY_SA3, TINY_SA3_ARC, TINY_SDXL, TINY_ACE_STEP, TINY_PLANNER)
        for name in (*tiny, TINY_CLAP, TINY_CLIP, TINY_DINO):
            folders[name] = models_root / name
    if record is not None and verdicts.passed(record, _state_key(folders)):
        return folders
    _write(folders, models_root)
    if record is not None:
        verdicts.remember(record, _state_key(folders))
    return folders


def _write(folders: dict[str, Path], models_root: Path | None) -> None:
    from tunesmith.examples.loops import make_loops
    from tunesmith.examples.rings import make_rings
    from tunesmith.examples.songs import make_songs
    from tunesmith.store.atomic import write_if_changed

    make_loops(folders["loops"])
    write_if_changed(folders["loops"] / "tunesmith.toml", LOOPS_TOML.encode())
    make_rings(folders["rings"])
    write_if_changed(folders["rings"] / "tunesmith.toml", RINGS_TOML.encode())
    make_songs(folders["songs"])
    write_if_changed(folders["songs"] / "tunesmith.toml", SONGS_TOML.encode())
    if models_root is not None:
        from tunesmith.families.ace_step.tiny import make_tiny_ace_step
        from tunesmith.families.ace_step_planner.tiny import make_tiny_planner
        from tunesmith.families.sdxl.tiny import make_tiny_sdxl
        from tunesmith.families.stable_audio_3.tiny import (
            make_tiny_stable_audio_3,
            make_tiny_stable_audio_3_arc,
        )
        from tunesmith.quality.tiny import make_tiny_clap, make_tiny_clip, make_tiny_dino

        make_tiny_stable_audio_3(folders[TINY_SA3])
        make_tiny_stable_audio_3_arc(folders[TINY_SA3_ARC])
        make_tiny_sdxl(folders[TINY_SDXL])
        make_tiny_ace_step(folders[TINY_ACE_STEP])
        make_tiny_planner(folders[TINY_PLANNER])
        make_tiny_clap(folders[TINY_CLAP])
        make_tiny_clip(folders[TINY_CLIP])
        make_tiny_dino(folders[TINY_DINO])


def _state_key(folders: dict[str, Path]) -> str:
    """What decides the files `_write` leaves, and those files: every source file of the
    `tunesmith` package (what writes the examples and the models, and what it calls), the
    versions of the libraries that build the models, and each file under `folders` with its
    bytes. Content, not modification times: a file written a moment ago has a key too."""
    import hashlib
    from importlib import metadata

    from tunesmith.store import sha256_file

    package = Path(__file__).resolve().parents[1]
    state: list = [[metadata.version(d) for d in ("torch", "diffusers", "transformers")]]
    for source in sorted(package.rglob("*.py")):
        state.append([source.relative_to(package).as_posix(), sha256_file(source)])
    for name, folder in sorted(folders.items()):
        files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        state.append([name, [[p.relative_to(folder).as_posix(), sha256_file(p)] for p in files]])
    return hashlib.sha256(json.dumps(state).encode("utf-8")).hexdigest()

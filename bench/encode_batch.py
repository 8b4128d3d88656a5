"""The `encoded` stage's batched encode against a bare loop that calls the VAE one item at a time.

For each family with a VAE stage (SDXL: pictures; Stable Audio 3: clips), on N items written by
`bench/make_large.py` (pictures of 48 to 112 px fitted to `--size`; clips of 2.5 to 4 s at 16
lengths), with the tiny model of the family loaded once:

- ours: the encode loop's work on everything missing, with the family's item encoder
  (`tunesmith.encoding.encode_batches` over the encoder's plan: decode, batch by shape within
  the placement's memory budget, one VAE call a batch, write each entry into a fresh store);
- bare: the loop a user writes by hand: per item decode it the same way, call the diffusers VAE
  on that one item, save its result with safetensors / numpy.

Printed: seconds of each (best of `--rounds`, interleaved, each round in a fresh store; this
thread's CPU time on a CPU with one torch thread, as bench/sdxl_step.py's `clock`, so that time
the OS gives other processes is not counted; wall time otherwise), the ratio ours / bare (goal
≤ 0.8 on a CPU) and the batches the stage made. For the clips also the seconds inside the VAE
calls alone: the tiny SAME VAE takes a few milliseconds a clip, so the stage's fixed work per
clip (decoding, the hash check of the source, writing a store entry) is a large share of its
time, where a real VAE's encode would dwarf it. Never asserted: the ratio is measured in one
run.

    .venv/bin/python bench/encode_batch.py [--n 64] [--size 64] [--rounds 3] [--quick]
                                           [--device cpu] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import soundfile
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import make_large  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from sdxl_step import clock  # noqa: E402

from tunesmith.backends import batches  # noqa: E402
from tunesmith.backends.placement import Placement  # noqa: E402
from tunesmith.encoding import Unit, encode_batches  # noqa: E402
from tunesmith.families.sdxl import encoded as sdxl_stage  # noqa: E402
from tunesmith.families.sdxl import model as sdxl_model  # noqa: E402
from tunesmith.families.stable_audio_3 import encoded as sa3_stage  # noqa: E402
from tunesmith.families.stable_audio_3 import model as sa3_model  # noqa: E402
from tunesmith.media import audio as media_audio  # noqa: E402
from tunesmith.media import images  # noqa: E402
from tunesmith.store import Store, content_key, sha256_file  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=64, help="items of each kind")
    parser.add_argument("--size", type=int, default=64, help="SDXL's training size (px)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="8 items, one round: check only")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads (0: default)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds = 8, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    placement = Placement("torch", args.device, "float32", "bench")
    print(
        f"encode in batches against one at a time: N = {args.n}, {args.device}, "
        f"budget {batches.memory_budget(placement) / 2**20:.0f} MiB, "
        f"{torch.get_num_threads()} thread(s), {clock(args.device).__name__}"
    )
    with tempfile.TemporaryDirectory(prefix="tunesmith-encode-") as tmp:
        root = Path(tmp)
        pictures(root, args, placement)
        clips(root, args, placement)


def best(rounds: int, arms: dict, device: str) -> dict[str, float]:
    """Best seconds of each arm over `rounds` interleaved rounds; each call gets a fresh folder."""
    times, now = {name: [] for name in arms}, clock(device)
    for r in range(rounds):
        for name, run in arms.items():
            with tempfile.TemporaryDirectory() as folder:
                start = now()
                run(Path(folder), r)
                times[name].append(now() - start)
    return {name: min(values) for name, values in times.items()}


def encoder_for(kind, checkpoint: Path, folder: Path, root: Path, placement: Placement):
    """The family's item encoder for `checkpoint`, as the stage builds it."""
    request = SimpleNamespace(
        folder=folder,
        placement=placement,
        store=Store(root / "store"),
        fingerprint_cache=root / "fp.json",
        out=root / "out",
    )
    return kind(checkpoint, request)


def ours_encode(encoder, pipe, units: list, store_root: Path, placement: Placement) -> None:
    """The loop's batches of `units` into a fresh store, the model already loaded."""
    planned = encoder.plan(units, batches.memory_budget(placement))
    encode_batches(encoder, lambda: pipe, planned, Store(store_root))


def report(what: str, seconds: dict[str, float], made: Counter) -> None:
    ours, bare = seconds["ours"], seconds["bare"]
    sizes = ", ".join(f"{count} of {size}" for size, count in sorted(made.items(), reverse=True))
    print(
        f"{what:<16} ours {ours:7.3f} s   bare {bare:7.3f} s   ratio {ours / bare:.2f} "
        f"(goal ≤ 0.8 on a CPU)   batches: {sizes}"
    )


# --- SDXL -------------------------------------------------------------------------------------


def pictures(root: Path, args, placement: Placement) -> None:
    from tunesmith.families.sdxl.tiny import make_tiny_sdxl

    folder = root / "pictures"
    folder.mkdir()
    items = []
    for i in range(args.n):
        path = make_large.write_picture(folder, i)
        items.append({"path": path.name, "sha256": sha256_file(path)})
    checkpoint = make_tiny_sdxl(root / "tiny-sdxl")
    pipe = sdxl_model.load_pipeline(checkpoint, torch.float32, args.device, skip=("unet",))
    vae = pipe.vae
    encoder = encoder_for(sdxl_stage.Pictures, checkpoint, folder, root, placement)
    original, made = encoder.encode, Counter()

    def ours(store_root: Path, round_: int) -> None:
        def counted(model, part):
            made[len(part)] += round_ == 0
            return original(model, part)

        encoder.encode = counted
        units = [Unit(content_key(round=round_, path=i["path"]), i, args.size) for i in items]
        ours_encode(encoder, pipe, units, store_root, placement)

    def bare(out: Path, round_: int) -> None:
        for item in items:
            image = images.load_image(folder / item["path"], item["path"])
            pixels = images.fit_square(image, args.size)
            x = torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 127.5 - 1.0
            with torch.no_grad():
                posterior = vae.encode(x.to(vae.device)).latent_dist
            tensors = {"mean": posterior.mean[0].cpu(), "logvar": posterior.logvar[0].cpu()}
            save_file(tensors, out / f"{item['path']}.safetensors")

    seconds = best(args.rounds, {"ours": ours, "bare": bare}, args.device)
    report(f"SDXL VAE {args.size} px", seconds, made)


# --- Stable Audio 3 ---------------------------------------------------------------------------


def clips(root: Path, args, placement: Placement) -> None:
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    folder = root / "songs"
    folder.mkdir()
    items = []
    for i in range(args.n):
        path = make_large.write_song(folder, i)
        duration = soundfile.info(path).duration  # what the labels stage records
        items.append({"path": path.name, "sha256": sha256_file(path), "duration": duration})
    checkpoint = make_tiny_stable_audio_3(root / "tiny-sa3", seed=0)
    pipe = sa3_model.load_pipeline(checkpoint, torch.float32, args.device)
    vae = pipe.vae
    encoder = encoder_for(sa3_stage.Clips, checkpoint, folder, root, placement)
    original, made = encoder.encode, Counter()
    now = clock(args.device)
    in_vae = {"ours": [], "bare": []}  # per round: seconds inside the VAE calls alone

    def ours(store_root: Path, round_: int) -> None:
        in_vae["ours"].append(0.0)

        def counted(model, part):
            made[len(part)] += round_ == 0
            start = now()
            writers = original(model, part)
            in_vae["ours"][-1] += now() - start
            return writers

        encoder.encode = counted
        units = [Unit(content_key(round=round_, path=i["path"]), i) for i in items]
        ours_encode(encoder, pipe, units, store_root, placement)

    def bare(out: Path, round_: int) -> None:
        ratio = vae.downsampling_ratio
        in_vae["bare"].append(0.0)
        for item in items:
            audio = media_audio.for_model(folder / item["path"], 44100, ratio, item["path"])
            start = now()
            with torch.no_grad():
                latents = vae.encode(audio.samples[None].to(vae.device)).latents[0]
            in_vae["bare"][-1] += now() - start
            np.save(out / f"{item['path']}.npy", latents.float().cpu().numpy())

    report("SA3 VAE clips", best(args.rounds, {"ours": ours, "bare": bare}, args.device), made)
    ours_vae, bare_vae = min(in_vae["ours"]), min(in_vae["bare"])
    print(
        f"{'  VAE calls alone':<16} ours {ours_vae:7.3f} s   bare {bare_vae:7.3f} s   "
        f"ratio {ours_vae / bare_vae:.2f} (the rest: decoding, the source's hash check, "
        "the store's entries)"
    )


if __name__ == "__main__":
    main()

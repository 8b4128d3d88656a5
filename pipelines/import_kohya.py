"""`tunesmith import-kohya CONFIG [DATASET_CONFIG]`: a kohya sd-scripts SDXL LoRA run as the
dataset's `tunesmith.toml`.

Reads sd-scripts' training config and its dataset config (the second file, or the config's own
`dataset_config`; without either, the config's `train_data_dir` and its `<repeats>_<tokens>`
folders), the `sample_prompts` file the config names (`.txt`, `.toml` or `.json`, as sd-scripts
reads them) and counts the pictures of each `image_dir` where they are on this machine (an
epoch's steps, for `max_train_epochs`). A relative path is taken from the working folder, then
from the folder of the file that names it. `tunesmith.formats.kohya_config` makes the run; this
writes it, atomically, to the dataset's folder under the datasets root (the folder the kohya
files' pictures are in, by its name), or to `--out`, and prints each setting carried over,
each option not honoured and why, and each ignored as changing nothing a run trains. The run
is then read back by tunesmith's own settings loader: a setting this tunesmith does not take
yet is named, with the file still written.

A file that is not TOML, not kohya's, or missing; no dataset folder of that name; an existing
`tunesmith.toml` without `--force`: one line naming the file, exit status 1, nothing written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

FILE = "tunesmith.toml"
_NOT_A_SETTING = re.compile(r": (\S+) is not a setting;")  # tunesmith.train.schema.problems
# The picture suffixes sd-scripts' glob_images takes (library/train_util.py IMAGE_EXTENSIONS,
# with its upper-case twins; .avif where pillow-avif is installed), to count an image_dir as
# sd-scripts counts it.
KOHYA_IMAGES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".avif"})


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The `import-kohya` subcommand on `tunesmith`'s subparsers."""
    parser = sub.add_parser(
        "import-kohya",
        help="write a dataset's tunesmith.toml from kohya sd-scripts' SDXL LoRA configs",
        description="Translate kohya sd-scripts' training config (and its dataset config) into "
        "the dataset's tunesmith.toml; print each option carried over, not honoured or ignored.",
    )
    parser.add_argument("config", type=Path, help="sd-scripts' training config (--config_file)")
    parser.add_argument(
        "dataset_config",
        type=Path,
        nargs="?",
        help="sd-scripts' dataset config (--dataset_config); default: the config's own",
    )
    parser.add_argument(
        "--out", type=Path, help="where to write (default: the dataset's folder's tunesmith.toml)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing tunesmith.toml")
    return parser


def run(args: argparse.Namespace) -> int:
    """Write the tunesmith.toml for `args.config` (and `args.dataset_config`); 1 on a mistake."""
    # The engine is imported here, not above: every `tunesmith` command builds this command's
    # parser (`add_parser`), and these imports take a tenth of a second or more.
    from tunesmith.formats.kohya_config import KohyaConfigError

    try:
        return _import(args.config, args.dataset_config, args.out, args.force)
    except (KohyaConfigError, _Refused) as exc:
        print(str(exc), file=sys.stderr)
        return 1


class _Refused(ValueError):
    """A mistake the command stops at: one line."""


def _import(config_path: Path, dataset_path: Path | None, out: Path | None, force: bool) -> int:
    from tunesmith.formats import kohya_config  # as in run()
    from tunesmith.store.atomic import atomic_write_text

    config = _read_toml(config_path, "kohya's training config")
    flat = kohya_config.flatten(config, str(config_path))
    dataset = folders = None
    if dataset_path is None and isinstance(flat.get("dataset_config"), str):
        dataset_path = _find(flat["dataset_config"], config_path)
        if dataset_path is None:
            raise _Refused(
                f"{config_path}: dataset_config = {flat['dataset_config']!r}: no such file; "
                "give kohya's dataset config as the second argument"
            )
    if dataset_path is not None:
        dataset = _read_toml(dataset_path, "kohya's dataset config")
    elif isinstance(flat.get("train_data_dir"), str):
        root = _find(flat["train_data_dir"], config_path)
        if root is not None and root.is_dir():
            folders = sorted(p.name for p in root.iterdir() if p.is_dir())
    named_by = dataset_path or config_path
    pictures = {}
    for folder in kohya_config.picture_folders(flat, dataset, folders):
        found = _find(folder, named_by)
        if found is not None and found.is_dir():
            pictures[folder] = sum(
                1 for p in found.iterdir() if p.is_file() and p.suffix.lower() in KOHYA_IMAGES
            )
    prompts, unread = _prompts(flat.get("sample_prompts"), config_path)
    translation = kohya_config.translate(
        config,
        dataset,
        folders=folders,
        prompts=prompts,
        pictures=pictures,
        unread=unread,
        config_name=str(config_path),
        dataset_name=str(dataset_path),
    )
    target = _target(translation, out, named_by)
    if target.exists() and not force:
        raise _Refused(f"{target}: exists; not replaced (--force replaces it)")
    text = translation.text()
    refused = _refused_by_tunesmith(text, target)
    atomic_write_text(target, text)
    print(f"wrote {target}")
    for line in translation.report():
        print(line)
    pending = [m.group(1) for line in refused if (m := _NOT_A_SETTING.search(line))]
    if pending:
        print(
            f"{target}: this tunesmith does not take {', '.join(pending)} yet; the build "
            "refuses the file until it does (or remove those lines)"
        )
    for line in refused:
        if not _NOT_A_SETTING.search(line):
            print(line)
    return 0


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Refused(f"{path}: no such file ({what} was expected)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _Refused(f"{path}: not a TOML file ({what} was expected): {exc}") from None
    except OSError as exc:
        raise _Refused(f"{path}: cannot be read ({exc.strerror})") from None


def _find(name: str, named_by: Path) -> Path | None:
    """A path a kohya file names: from the working folder, else from that file's folder."""
    path = Path(name).expanduser()
    for candidate in (path, named_by.parent / path):
        if candidate.exists():
            return candidate
    return None


def _prompts(name: Any, config_path: Path) -> tuple[list | None, dict[str, str]]:
    """The sample prompts file's prompts, as sd-scripts' load_prompts reads each format; None
    and why where it cannot be read."""
    from tunesmith.formats import kohya_config  # as in run()

    if not isinstance(name, str):
        return None, {}
    path = _find(name, config_path)
    if path is None:
        return None, {"sample_prompts": "no such file here"}
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            return kohya_config.prompt_tables(tomllib.loads(text)), {}
        if path.suffix == ".json":
            found = json.loads(text)
            if not isinstance(found, list):
                raise ValueError("a sample prompts JSON is a list of prompts")
            return found, {}
        return kohya_config.parse_prompt_lines(text), {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # TOMLDecodeError, JSONDecodeError
        return None, {"sample_prompts": f"{path} cannot be read: {exc}"}


def _target(translation, out: Path | None, named_by: Path) -> Path:
    """Where the file goes: `--out` (a folder: its tunesmith.toml), else the dataset's folder
    under the datasets root."""
    from tunesmith.config import Roots  # as in run()

    if out is not None:
        return out / FILE if out.is_dir() else out
    roots = Roots.from_env()
    folder = roots.datasets / translation.dataset
    if folder.is_dir():
        return folder / FILE
    pictures = _find(translation.folder, named_by)
    link = pictures.absolute() if pictures is not None else translation.folder
    raise _Refused(
        f"{folder}: no such dataset folder (tunesmith's datasets are the folders under "
        f"{roots.datasets}, from {roots.origin('datasets')}): link the pictures there "
        f"(ln -s {link} {folder}) and import again, or give --out"
    )


def _refused_by_tunesmith(text: str, target: Path) -> list[str]:
    """What tunesmith's own settings loader says of the run (a setting it does not take yet,
    a value outside what it allows), a line each."""
    from tunesmith.train.config import ConfigError, resolve_run  # as in run(); with pydantic

    (run,) = tomllib.loads(text)["runs"]
    try:
        resolve_run(run, target, 0)
    except ConfigError as exc:
        return exc.problems
    return []

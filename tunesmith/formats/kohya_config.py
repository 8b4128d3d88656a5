"""kohya sd-scripts' SDXL LoRA settings, read as one tunesmith run.

sd-scripts (`sdxl_train_network.py`) takes two TOML files:

- the training config (`--config_file`): its command-line options as keys, flat or in tables
  of any name, which it merges into one level (`read_config_from_file`);
- the dataset config (`--dataset_config`, `library/config_util.py`): `[general]`,
  `[[datasets]]` and `[[datasets.subsets]]`. A subset's option is the first given of: the
  subset, its dataset, `[general]`, the training config (`train_batch_size` as `batch_size`,
  `dataset_repeats` as `num_repeats`), sd-scripts' default. Without a dataset config,
  `train_data_dir`'s folders named `<repeats>_<class tokens>` are the subsets.

`translate` turns both into the `[[runs]]` table of an SDXL `tunesmith.toml` and a report:
each setting carried over and where it came from, notes on what tunesmith does differently,
every option it does not honour and why, and every option that changes nothing a run trains
(logging, caching, attention kernels, uploads). A setting sd-scripts leaves at its default is
written with sd-scripts' value where tunesmith's default differs (steps, learning rate, rank,
alpha, clipping, batch), so the run trains as the kohya run did; the settings tunesmith added
for kohya's users (noise offset, min-SNR, buckets, ...) default to sd-scripts' values and are
written only where the kohya files ask for something else. Pure: dicts in, text and report
out; `pipelines/import_kohya.py` reads and writes the files.

One tunesmith dataset is one folder of pictures with `<stem>.txt` captions: the subsets'
`image_dir` when there is one, or the folder that holds them all (tunesmith reads a dataset's
subfolders too); every picture is drawn once a pass, so `num_repeats` is not honoured.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FAMILY = "sdxl"


class KohyaConfigError(ValueError):
    """A file that is not what sd-scripts reads: one line naming the file and what was
    expected."""


# sd-scripts' defaults (argparse defaults of train_network.py and library/train_util.py;
# network_dim's and network_alpha's are networks/lora.py's `create_network`), for the options
# whose default tunesmith writes or compares against.
KOHYA_DEFAULTS: dict[str, Any] = {
    "max_train_steps": 1600,
    "learning_rate": 2e-6,
    "max_grad_norm": 1.0,
    "batch_size": 1,
    "network_dim": 4,
    "network_alpha": 1.0,
    "conv_alpha": 1.0,  # networks/lora.py, where conv_dim is given
    "caption_extension": ".caption",
    "caption_separator": ",",
    "keep_tokens": 0,
    "num_repeats": 1,
    "enable_bucket": False,
    "min_bucket_reso": 256,
    "max_bucket_reso": 1024,
    "bucket_reso_steps": 64,
    "bucket_no_upscale": False,
    "shuffle_caption": False,
    "flip_aug": False,
    "caption_dropout_rate": 0.0,
    "caption_tag_dropout_rate": 0.0,
    "multires_noise_discount": 0.3,
    "loss_type": "l2",
    "huber_c": 0.1,
    "huber_schedule": "snr",
    "lr_scheduler": "constant",
    "lr_warmup_steps": 0,
    "lr_scheduler_num_cycles": 1,
    "lr_scheduler_power": 1.0,
    "gradient_accumulation_steps": 1,
    "gradient_checkpointing": False,
    "debiased_estimation_loss": False,
    "masked_loss": False,
    "optimizer_type": "AdamW",
    # the defaults of options tunesmith does not honour, so that one left at it is "ignored"
    "caption_dropout_every_n_epochs": 0,
    "token_warmup_min": 1,
    "token_warmup_step": 0,
    "network_multiplier": 1.0,
    "huber_scale": 1.0,
    "lr_decay_steps": 0,
    "prior_loss_weight": 1.0,
    "sample_sampler": "ddim",
    "dynamo_backend": "inductor",
    "zero_stage": 2,
    "validation_split": 0.0,
    "min_timestep": 0,
    "max_timestep": 1000,
    "save_model_as": "safetensors",
    "vae_batch_size": 1,
    "max_data_loader_n_workers": 8,
    "mixed_precision": "no",
    "dataset_repeats": 1,
}
# A sample prompt's steps and guidance scale where its line gives none
# (train_util.sample_image_inference).
SAMPLE_STEPS, SAMPLE_SCALE = 30, 7.5
# What sd-scripts' optimizer_type names (compared lower-cased, as get_optimizer does) are in
# tunesmith's `train.optimizer`.
OPTIMIZERS = {
    "adamw": "AdamW",
    "adamw8bit": "AdamW8bit",
    "prodigy": "Prodigy",
    "adafactor": "Adafactor",
}
# LyCORIS's `algo` (lycoris/kohya.py; "lora" and "locon" are one module there, on linear and
# conv layers) as tunesmith's adapter type.
# What tunesmith builds each optimizer with (tunesmith/families/sdxl/options.py: torch's AdamW,
# bitsandbytes' AdamW8bit and prodigyopt's Prodigy at their own defaults; transformers'
# Adafactor at a fixed lr), for the optimizer_args that are the same.
_ADAM = {"weight_decay": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False}
OPTIMIZER_DEFAULTS = {
    "AdamW": _ADAM,
    "AdamW8bit": _ADAM,
    "Prodigy": {
        "weight_decay": 0.0, "betas": (0.9, 0.999), "eps": 1e-8, "decouple": True,
        "use_bias_correction": False, "safeguard_warmup": False, "d0": 1e-6, "d_coef": 1.0,
    },
    "Adafactor": {"scale_parameter": False, "relative_step": False, "warmup_init": False},
}  # fmt: skip
LYCORIS_TYPES = {"lora": "locon", "locon": "locon", "loha": "loha", "lokr": "lokr"}
SINGLE_FILE = (".safetensors", ".ckpt", ".pt", ".pth", ".bin")

# The dataset config's keys (library/config_util.py, ConfigSanitizer's schemas): those a
# dataset (and [general]) sets for its subsets, those a dataset alone has, those a subset
# alone has.
SUBSET_ASCENDABLE = frozenset(
    {
        "color_aug", "face_crop_aug_range", "flip_aug", "num_repeats", "random_crop",
        "shuffle_caption", "keep_tokens", "keep_tokens_separator", "secondary_separator",
        "caption_separator", "enable_wildcard", "token_warmup_min", "token_warmup_step",
        "caption_prefix", "caption_suffix", "custom_attributes", "resize_interpolation",
        "caption_dropout_every_n_epochs", "caption_dropout_rate", "caption_tag_dropout_rate",
        "caption_extension", "class_tokens", "cache_info",
    }
)  # fmt: skip
DATASET_LEVEL = frozenset(
    {
        "batch_size", "bucket_no_upscale", "bucket_reso_steps", "enable_bucket",
        "max_bucket_reso", "min_bucket_reso", "validation_seed", "validation_split",
        "resolution", "network_multiplier", "resize_interpolation",
    }
)  # fmt: skip
SUBSET_DISTINCT = frozenset(
    {"image_dir", "is_reg", "alpha_mask", "metadata_file", "conditioning_data_dir"}
)
GENERAL_KEYS = SUBSET_ASCENDABLE | DATASET_LEVEL
DATASET_ONLY = DATASET_LEVEL - SUBSET_ASCENDABLE  # looked up from the subset's dataset on
SUBSET_KEYS = SUBSET_ASCENDABLE | SUBSET_DISTINCT
# Training-config names read as a dataset option
# (ConfigSanitizer.ARGPARSE_OPTNAME_TO_CONFIG_OPTNAME).
ALIASES = {"train_batch_size": "batch_size", "dataset_repeats": "num_repeats"}

# Each dataset option tunesmith carries over: its key, and the type sd-scripts' schema asks.
CHAIN_SETTINGS = {
    "enable_bucket": ("train.buckets", bool),
    "min_bucket_reso": ("train.min_bucket_reso", int),
    "max_bucket_reso": ("train.max_bucket_reso", int),
    "bucket_reso_steps": ("train.bucket_reso_steps", int),
    "bucket_no_upscale": ("train.bucket_no_upscale", bool),
    "shuffle_caption": ("train.shuffle_caption", bool),
    "keep_tokens": ("train.keep_tokens", int),
    "caption_separator": ("train.caption_separator", str),
    "caption_dropout_rate": ("train.caption_dropout_rate", float),
    "caption_tag_dropout_rate": ("train.caption_tag_dropout_rate", float),
    "flip_aug": ("train.flip_aug", bool),
}
# Each training option tunesmith carries over as it is, written where it is not sd-scripts'
# default (`gradient_checkpointing` exists already; the others are being added).
PLAIN_SETTINGS = {
    "gradient_checkpointing": ("train.gradient_checkpointing", bool),
    "min_snr_gamma": ("train.min_snr_gamma", float),
    "noise_offset": ("train.noise_offset", float),
    "adaptive_noise_scale": ("train.adaptive_noise_scale", float),
    "multires_noise_iterations": ("train.multires_noise_iterations", int),
    "multires_noise_discount": ("train.multires_noise_discount", float),
    "debiased_estimation_loss": ("train.debiased_estimation", bool),
    "loss_type": ("train.loss_type", str),
    "huber_c": ("train.huber_c", float),
    "huber_schedule": ("train.huber_schedule", str),
    "lr_scheduler": ("train.lr_scheduler", str),
    "lr_scheduler_num_cycles": ("train.lr_scheduler_num_cycles", int),
    "lr_scheduler_power": ("train.lr_scheduler_power", float),
    "gradient_accumulation_steps": ("train.gradient_accumulation_steps", int),
    "max_token_length": ("train.max_token_length", int),
}
# The dataset options tunesmith carries over.
CARRIED = frozenset(
    {"resolution", "batch_size", "caption_extension", "validation_split", *CHAIN_SETTINGS}
)
# Training options read by the translation itself (below), beside those above.
READ = frozenset(
    {
        "pretrained_model_name_or_path", "output_name", "max_train_steps", "max_train_epochs",
        "learning_rate", "unet_lr", "text_encoder_lr", "seed", "max_grad_norm",
        "save_every_n_steps", "save_every_n_epochs", "network_dim", "network_alpha",
        "network_module", "network_args", "network_train_unet_only", "lr_warmup_steps",
        "optimizer_type", "use_8bit_adam", "sample_prompts", "sample_every_n_steps",
        "sample_every_n_epochs", "validate_every_n_steps", "validate_every_n_epochs",
        "dataset_config", "train_data_dir", "reg_data_dir", "in_json", "caption_extention",
        "masked_loss", "optimizer_args",
    }
)  # fmt: skip

_LOGS = "logging: tunesmith writes train.log and events.jsonl in the run's folder"
_UPLOAD = "uploading: tunesmith uploads nothing"
_FILES = (
    "the file's form: tunesmith writes <run>.safetensors (PEFT) and <run>.kohya.safetensors "
    "with their own metadata"
)
_SAVES = "tunesmith keeps the state to resume from, the best and the last adapter"
_SPEED = "how it computes, not what: the same training"
_CACHE = "tunesmith encodes each picture and each caption once, into its store"
_LOADING = "loading and memory: tunesmith plans its own (train.cap)"
_PRECISION = "tunesmith picks the precision for the device (TUNESMITH_DTYPE)"
_PARALLEL = "several GPUs: tunesmith runs DDP (train.devices, train.nodes)"
_CAPTIONS = "captions are used as written; put it into the <stem>.txt captions"
_FRESH = "tunesmith starts every run from a fresh adapter on the base model"
_RESUME = "tunesmith resumes its own runs from their state/ folder"
_NONE = "no such setting for SDXL in tunesmith"

IGNORED: dict[str, str] = {
    "output_dir": "tunesmith writes under TUNESMITH_OUT/<dataset>/adapters/",
    **dict.fromkeys(
        (
            "logging_dir", "log_with", "log_prefix", "log_tracker_name", "wandb_run_name",
            "log_tracker_config", "wandb_api_key", "log_config", "console_log_level",
            "console_log_file", "console_log_simple",
        ),
        _LOGS,
    ),
    **dict.fromkeys(
        (
            "huggingface_repo_id", "huggingface_repo_type", "huggingface_path_in_repo",
            "huggingface_token", "huggingface_repo_visibility", "save_state_to_huggingface",
            "resume_from_huggingface", "async_upload",
        ),
        _UPLOAD,
    ),
    **dict.fromkeys(
        (
            "save_precision", "save_model_as", "no_metadata", "training_comment",
            "metadata_title", "metadata_author", "metadata_description", "metadata_license",
            "metadata_tags", "metadata_usage_hint", "metadata_thumbnail",
            "metadata_merged_from", "metadata_trigger_phrase", "metadata_preprocessor",
            "metadata_is_negative_embedding",
        ),
        _FILES,
    ),
    **dict.fromkeys(
        (
            "save_state", "save_state_on_train_end", "save_last_n_epochs",
            "save_last_n_epochs_state", "save_last_n_steps", "save_last_n_steps_state",
            "save_n_epoch_ratio",
        ),
        _SAVES,
    ),
    **dict.fromkeys(
        (
            "mem_eff_attn", "xformers", "sdpa", "torch_compile", "dynamo_backend",
            "fused_backward_pass", "cpu_offload_checkpointing",
        ),
        _SPEED,
    ),
    **dict.fromkeys(
        (
            "cache_latents", "cache_latents_to_disk", "cache_text_encoder_outputs",
            "cache_text_encoder_outputs_to_disk", "vae_batch_size", "skip_cache_check",
            "cache_info",
        ),
        _CACHE,
    ),
    **dict.fromkeys(
        (
            "max_data_loader_n_workers", "persistent_data_loader_workers", "lowram", "highvram",
            "disable_mmap_load_safetensors", "tokenizer_cache_dir",
        ),
        _LOADING,
    ),
    **dict.fromkeys(("mixed_precision", "no_half_vae"), _PRECISION),
    **dict.fromkeys(
        (
            "ddp_timeout", "ddp_gradient_as_bucket_view", "ddp_static_graph", "deepspeed",
            "zero_stage", "offload_optimizer_device", "offload_optimizer_nvme_path",
            "offload_param_device", "offload_param_nvme_path", "zero3_init_flag",
            "zero3_save_16bit_model", "fp16_master_weights_and_gradients",
        ),
        _PARALLEL,
    ),
    "sample_at_first": "tunesmith always draws the demos at step 0 (the base model)",
    "config_file": "the command line's own plumbing",
    "output_config": "the command line's own plumbing",
    "debug_dataset": "a look at the data, no training",
    "clip_skip": "sd-scripts' SDXL training does not use it either",
    "max_validation_steps": "tunesmith validates on every held-out picture",
    "validation_seed": "tunesmith holds out the last pictures by name, the same every build",
}  # fmt: skip
NOT_HONOURED: dict[str, str] = {
    "v2": "Stable Diffusion 2 is not SDXL",
    "v_parameterization": (
        "tunesmith predicts what the base model's scheduler_config.json says "
        '(prediction_type = "v_prediction" there)'
    ),
    "vae": "tunesmith takes the base model folder's vae/: put that VAE there",
    **dict.fromkeys(
        (
            "noise_offset_random_strength", "ip_noise_gamma", "ip_noise_gamma_random_strength",
            "perlin_noise", "zero_terminal_snr", "huber_scale", "scale_v_pred_loss_like_noise_pred",
            "v_pred_like_loss", "weighted_captions", "network_dropout", "scale_weight_norms",
            "lr_decay_steps", "lr_scheduler_timescale", "lr_scheduler_min_lr_ratio",
            "lr_scheduler_type", "lr_scheduler_args",
            "optimizer_schedulefree_wrapper", "schedulefree_wrapper_args", "network_multiplier",
        ),
        _NONE,
    ),
    "min_timestep": "tunesmith draws t from all of the scheduler's levels",
    "max_timestep": "tunesmith draws t from all of the scheduler's levels",
    "use_lion_optimizer": "tunesmith's optimizers are " + ", ".join(OPTIMIZERS.values()),
    **dict.fromkeys(
        ("full_fp16", "full_bf16", "fp8_base", "fp8_base_unet"),
        "tunesmith keeps the adapter and its gradients in float32",
    ),
    **dict.fromkeys(
        ("network_weights", "dim_from_weights", "base_weights", "base_weights_multiplier"),
        _FRESH,
    ),
    "network_train_text_encoder_only": "tunesmith trains the UNet's adapter",
    **dict.fromkeys(
        ("resume", "skip_until_initial_step", "initial_epoch", "initial_step"), _RESUME
    ),
    "sample_sampler": "tunesmith draws the demos with the base model's own scheduler",
    "color_aug": "no colour augmentation in tunesmith",
    "face_crop_aug_range": "tunesmith crops each picture from its middle",
    "random_crop": "tunesmith crops each picture from its middle",
    "resize_interpolation": "tunesmith shrinks pictures by an exact box mean",
    **dict.fromkeys(
        (
            "keep_tokens_separator", "secondary_separator", "enable_wildcard",
            "token_warmup_min", "token_warmup_step", "caption_dropout_every_n_epochs",
            "custom_attributes",
        ),
        "no such caption setting in tunesmith; captions are used as written",
    ),
    "caption_prefix": _CAPTIONS,
    "caption_suffix": _CAPTIONS,
    "alpha_mask": "the masks' source is not carried over (see train.masked_loss)",
    "conditioning_data_dir": "the masks' source is not carried over (see train.masked_loss)",
    "dataset_class": "tunesmith reads a folder of pictures",
    "prior_loss_weight": "no regularisation pictures in tunesmith",
    "is_reg": "regularisation pictures; tunesmith has no prior-preservation loss",
    "metadata_file": "captions in kohya's metadata JSON; tunesmith reads <stem>.txt",
}  # fmt: skip
SECRETS = frozenset({"huggingface_token", "wandb_api_key"})
# Every option of sd-scripts' sdxl_train_network.py that this module knows.
KNOWN = frozenset(
    READ | set(PLAIN_SETTINGS) | set(IGNORED) | set(NOT_HONOURED) | GENERAL_KEYS | set(ALIASES)
)


@dataclass(frozen=True)
class Setting:
    """One tunesmith setting from the kohya files: its key (`train.steps`), its value, the
    kohya option it came from (`max_train_steps`, `datasets[0].resolution`; "" where sd-scripts'
    default), whether it is written (else tunesmith's default is the same), and a note."""

    key: str
    value: Any
    source: str
    option: str = ""  # the kohya option's name, where `source` is its default
    written: bool = True
    note: str = ""

    def line(self) -> str:
        where = self.source or f"{self.option}: sd-scripts' default"
        note = f"; {self.note}" if self.note else ""
        verb = "set" if self.written else "left out:"
        return f"{verb} {self.key} = {toml_value(self.value)} ({where}{note})"


@dataclass(frozen=True)
class Translation:
    """A kohya run as a tunesmith run: the `[[runs]]` table, the dataset it trains and what
    the kohya files asked that it does or does not carry over."""

    dataset: str  # the tunesmith dataset: the folder's name
    folder: str  # that folder as the kohya files name it
    run: dict[str, Any]
    settings: tuple[Setting, ...]
    notes: tuple[str, ...]
    not_honoured: tuple[str, ...]
    ignored: tuple[str, ...]
    sources: tuple[str, ...]  # the kohya files read, for the header

    @property
    def document(self) -> dict[str, Any]:
        return {"runs": [self.run]}

    def text(self) -> str:
        """The `tunesmith.toml` text: a header naming the kohya files and the options not
        honoured, then the run."""
        head = [
            f"# The dataset {toml_value(self.dataset)} ({self.folder}), from kohya sd-scripts' "
            + " and ".join(self.sources)
            + "."
        ]
        if self.not_honoured:
            head.append("# Not honoured:")
            head += [f"#   {line}" for line in self.not_honoured]
        # a TOML comment holds no control character but tab (a line break in a path, say)
        head = [re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", " ", line) for line in head]
        return "\n".join(head) + "\n\n" + toml_text(self.document)

    def report(self) -> list[str]:
        return [
            f"dataset {self.dataset}: kohya's {self.folder}",
            *(s.line() for s in self.settings),
            *(f"note: {line}" for line in self.notes),
            *(f"not honoured: {line}" for line in self.not_honoured),
            *(f"ignored: {line}" for line in self.ignored),
        ]


@dataclass
class _Place:
    """One table sd-scripts looks an option up in: its label in messages and its values by
    lookup name (`names`: the key as written, where it differs)."""

    label: str  # "datasets[0].subsets[1]", "datasets[0]", "general", "" (the training config)
    table: dict[str, Any]
    names: dict[str, str] = field(default_factory=dict)
    sep: str = "."  # ": " for a train_data_dir folder's subset

    def name(self, key: str) -> str:
        written = self.names.get(key, key)
        return f"{self.label}{self.sep}{written}" if self.label else written


@dataclass
class _Subset:
    place: _Place
    chain: list[_Place]  # where its options are looked up, nearest first
    dataset: _Place
    index: int  # of its dataset


def flatten(config: Any, name: str) -> dict[str, Any]:
    """The training config as sd-scripts reads it: every table's keys merged into one level
    (a later table's key wins, as in `read_config_from_file`)."""
    if not isinstance(config, Mapping):
        raise KohyaConfigError(f"{name}: not a TOML table")
    if isinstance(config.get("datasets"), list):
        raise KohyaConfigError(
            f"{name}: a kohya dataset config ([[datasets]]), not a training config: give the "
            "training config first and the dataset config second"
        )
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update(value)
        else:
            flat[key] = value
    if not any(key in KNOWN for key in flat):
        raise KohyaConfigError(
            f"{name}: not a kohya sd-scripts training config: none of its keys is an option "
            "of sdxl_train_network.py (pretrained_model_name_or_path, network_dim, "
            "learning_rate, ...)"
        )
    return flat


def subsets_from_folders(train_data_dir: str, folders: Sequence[str]) -> list[dict[str, Any]]:
    """sd-scripts' subsets of a `train_data_dir` (config_util's
    `generate_dreambooth_subsets_config_by_subdirs`): each subfolder named
    `<repeats>_<class tokens>` with repeats ≥ 1; others are passed over, as sd-scripts does."""
    subsets = []
    for folder in sorted(folders):
        repeats, _, tokens = folder.partition("_")
        try:
            count = int(repeats)
        except ValueError:
            continue
        if count >= 1:
            path = f"{train_data_dir.rstrip('/')}/{folder}"
            subsets.append({"image_dir": path, "num_repeats": count, "class_tokens": tokens})
    return subsets


def picture_folders(
    config: Mapping[str, Any], dataset: Mapping[str, Any] | None, folders: Sequence[str] | None
) -> list[str]:
    """The `image_dir` of every subset the files name, as written (for the command to count
    their pictures)."""
    found = []
    if isinstance(dataset, Mapping):
        for entry in _list(dataset.get("datasets")):
            for subset in _list(entry.get("subsets") if isinstance(entry, Mapping) else None):
                if isinstance(subset, Mapping) and isinstance(subset.get("image_dir"), str):
                    found.append(subset["image_dir"])
        return found
    train_data_dir = config.get("train_data_dir")
    if isinstance(train_data_dir, str):
        return [s["image_dir"] for s in subsets_from_folders(train_data_dir, folders or ())]
    return found


def translate(
    config: Mapping[str, Any],
    dataset: Mapping[str, Any] | None = None,
    *,
    folders: Sequence[str] | None = None,
    prompts: Sequence[str | Mapping[str, Any]] | None = None,
    pictures: Mapping[str, int] | None = None,
    unread: Mapping[str, str] | None = None,
    config_name: str = "config.toml",
    dataset_name: str = "dataset.toml",
) -> Translation:
    """The tunesmith run for a kohya training config and its dataset config (None: the
    config's `train_data_dir`, whose subfolder names are `folders`). `prompts`: the lines (or
    tables) of the config's `sample_prompts` file; `pictures`: the pictures found in each
    `image_dir` as written, to count an epoch's steps; `unread`: why a file an option names
    could not be read, by option. Raises KohyaConfigError for files that are not kohya's."""
    return _Translator(
        flatten(config, config_name),
        dataset,
        folders,
        prompts,
        dict(pictures or {}),
        dict(unread or {}),
        config_name,
        dataset_name,
    ).translate()


class _Translator:
    def __init__(
        self, args, dataset, folders, prompts, pictures, unread, config_name, dataset_name
    ):
        self.args, self.prompts, self.pictures, self.unread = args, prompts, pictures, unread
        self.config_name, self.dataset_name = config_name, dataset_name
        self.settings: list[Setting] = []
        self.notes: list[str] = []
        self.not_honoured: list[str] = []
        self.ignored: list[str] = []
        self.run: dict[str, Any] = {"name": "", "family": FAMILY, "base_model": ""}
        self.run.update(adapter={}, train={})
        self.used: set[tuple[str, str]] = set()  # (place label, key as written) of what is read
        self.per_epoch: int | None = None
        self.repeats: list[int] = []
        names = {alias: key for key, alias in ALIASES.items() if key in args}
        view = {alias: args[key] for key, alias in ALIASES.items() if key in args}
        view.update({k: v for k, v in args.items() if k in GENERAL_KEYS})
        if "caption_extention" in args:  # sd-scripts' old spelling wins where given
            view["caption_extension"] = args["caption_extention"]
            names["caption_extension"] = "caption_extention"
        self.top = _Place("", view, names)
        self.sources = [config_name]
        self.places: list[_Place] = []  # the dataset config's tables, for what no subset read
        self.root: str | None = None  # train_data_dir, where it is the dataset
        self.subsets = self._subsets(dataset, folders)

    # -- the dataset config ------------------------------------------------------------------

    def _subsets(self, dataset, folders) -> list[_Subset]:
        if dataset is None:
            return self._folder_subsets(folders)
        self.sources.append(self.dataset_name)
        name = self.dataset_name
        shape = (
            f"{name}: not a kohya dataset config: it needs [[datasets]] with "
            '[[datasets.subsets]] tables (image_dir = "...")'
        )
        listed = dataset.get("datasets") if isinstance(dataset, Mapping) else None
        if not isinstance(listed, list) or not listed:
            raise KohyaConfigError(shape)
        if not all(isinstance(d, Mapping) for d in listed):
            raise KohyaConfigError(shape)
        for key in dataset:
            if key not in ("general", "datasets"):
                self._refuse(key, dataset[key], "not a table of kohya's dataset config")
        general = dataset.get("general", {})
        if not isinstance(general, Mapping):
            raise KohyaConfigError(f"{name}: [general] must be a table")
        general = self._allowed(_Place("general", dict(general)), GENERAL_KEYS)
        subsets = []
        for i, entry in enumerate(listed):
            table = dict(entry)
            inner = table.pop("subsets", [])
            place = self._allowed(_Place(f"datasets[{i}]", table), GENERAL_KEYS)
            if not isinstance(inner, list) or not all(isinstance(s, Mapping) for s in inner):
                raise KohyaConfigError(
                    f"{name}: datasets[{i}].subsets must be [[datasets.subsets]]"
                )
            if not inner:
                self.ignored.append(f"datasets[{i}] (no subsets: nothing to train)")
            for j, raw in enumerate(inner):
                sub = self._allowed(_Place(f"datasets[{i}].subsets[{j}]", dict(raw)), SUBSET_KEYS)
                subsets.append(_Subset(sub, [sub, place, general, self.top], place, i))
        return self._training(subsets)

    def _folder_subsets(self, folders) -> list[_Subset]:
        root = self.args.get("train_data_dir")
        if not isinstance(root, str) or not root:
            raise KohyaConfigError(
                f"{self.config_name}: names no pictures: give kohya's dataset config as the "
                "second file, or a config with train_data_dir"
            )
        self.used.add(("", "train_data_dir"))
        self.root = root
        found = subsets_from_folders(root, folders or ())
        if folders is None:
            self.notes.append(
                f"train_data_dir {root} was not found here: its <repeats>_<tokens> folders "
                "are unknown"
            )
        if not found:
            found = [{"image_dir": root}]
        dataset = _Place("", {})
        subsets = []
        for raw in found:
            label = raw["image_dir"] if raw["image_dir"] != root else ""
            sub = _Place(label, dict(raw), sep=": ")
            subsets.append(_Subset(sub, [sub, self.top], dataset, 0))
        return self._training(subsets)

    def _allowed(self, place: _Place, keys: frozenset) -> _Place:
        """The place without the keys sd-scripts does not allow there (each reported)."""
        self.places.append(place)
        for key in list(place.table):
            if key not in keys:
                value = place.table.pop(key)
                self._refuse(place.name(key), value, "not a key of kohya's dataset config there")
        return place

    def _training(self, subsets: list[_Subset]) -> list[_Subset]:
        kept = []
        for sub in subsets:
            table, label = sub.place.table, sub.place.label or "the subset"
            if table.get("is_reg") is True:
                self.not_honoured.append(
                    f"{label} (is_reg = true, image_dir = {toml_value(table.get('image_dir'))}): "
                    "regularisation pictures; tunesmith has no prior-preservation loss"
                )
            elif not isinstance(table.get("image_dir"), str):
                self.not_honoured.append(
                    f"{label}: no image_dir (pictures listed in metadata_file "
                    f"{toml_value(table.get('metadata_file', ''))}); tunesmith trains a folder "
                    "of pictures with <stem>.txt captions"
                )
            else:
                kept.append(sub)
                continue
            self.used |= {(sub.place.label, k) for k in table}
        if not kept:
            raise KohyaConfigError(
                f"{self.sources[-1]}: no subset with an image_dir to train: tunesmith trains a "
                "folder of pictures"
            )
        return kept

    # -- looking options up ------------------------------------------------------------------

    def _look(self, sub: _Subset, key: str) -> tuple[Any, str]:
        """(value, where) of a dataset option for a subset; where is "" for sd-scripts'
        default."""
        chain = sub.chain[1:] if key in DATASET_ONLY else sub.chain
        for place in chain:
            if key in place.table:
                self.used.add((place.label, place.names.get(key, key)))
                return place.table[key], place.name(key)
        return KOHYA_DEFAULTS.get(key), ""

    def _arg(self, key: str, kind: type | None = None, default: Any = None) -> Any:
        """A training option's value, checked against `kind`: a value of the wrong type is
        reported and read as `default`."""
        if key not in self.args:
            return default
        self.used.add(("", key))
        value = self.args[key]
        if kind is not None and not _is(value, kind):
            self._refuse(key, value, f"must be {_KINDS[kind]}; read as sd-scripts' default")
            return default
        return value

    def _refuse(self, name: str, value: Any, why: str) -> None:
        line = f"{name} = {_shown(name, value)} ({why})"
        if line not in self.not_honoured:
            self.not_honoured.append(line)

    def _set(self, key, value, source, option="", note="", written=True) -> None:
        self.settings = [s for s in self.settings if s.key != key or s.written]
        self.settings.append(Setting(key, value, source, option, written, note))
        if written:
            section, _, name = key.rpartition(".")
            (self.run[section] if section else self.run)[name] = value

    # -- the translation ---------------------------------------------------------------------

    def translate(self) -> Translation:
        folder, dataset = self._folder()
        self._base_model()
        name = self._arg("output_name", str)
        if name:
            self._set("name", name, "output_name")
        else:
            self._set("name", dataset, "", option="output_name", note="the dataset's name")
        self._dataset_options()
        steps = self._steps()
        self._training_options(steps)
        self._network()
        self._demos()
        self._rest()
        self.run["train"] = dict(sorted(self.run["train"].items(), key=lambda kv: _rank(kv[0])))
        self.settings.sort(key=lambda s: _rank(s.key))
        return Translation(
            dataset=dataset,
            folder=folder,
            run=self.run,
            settings=tuple(self.settings),
            notes=tuple(self.notes),
            not_honoured=tuple(self.not_honoured),
            ignored=tuple(self.ignored),
            sources=tuple(self.sources),
        )

    def _folder(self) -> tuple[str, str]:
        """The one folder tunesmith trains: train_data_dir, the subsets' image_dir, or the
        folder that holds all of them."""
        dirs = list(dict.fromkeys(s.place.table["image_dir"] for s in self.subsets))
        for sub in self.subsets:
            self.used.add((sub.place.label, "image_dir"))
        parents = {_parent(d) for d in dirs}
        if self.root is not None:
            folder = self.root
        elif len(dirs) == 1:
            folder = dirs[0]
        elif len(parents) == 1 and next(iter(parents)):
            folder = next(iter(parents))
            self.notes.append(
                f"the subsets' folders {', '.join(dirs)} are read as one dataset, the folder "
                f"{folder} that holds them: tunesmith trains every picture under it, in any "
                "subfolder"
            )
        else:
            folder = dirs[0]
            for sub in self.subsets:
                if sub.place.table["image_dir"] != folder:
                    self._refuse(
                        sub.place.name("image_dir"),
                        sub.place.table["image_dir"],
                        f"a tunesmith dataset is one folder, here {folder}: move these pictures "
                        "into it, or import them on their own",
                    )
            self.subsets = [s for s in self.subsets if s.place.table["image_dir"] == folder]
        return folder, _basename(folder)

    def _base_model(self) -> None:
        given = self._arg("pretrained_model_name_or_path", str)
        if not given:
            self.notes.append(
                "no pretrained_model_name_or_path: base_model is the sdxl family's default"
            )
            del self.run["base_model"]
            return
        path = given.rstrip("/\\")
        name = _basename(path)
        if path.lower().endswith(SINGLE_FILE):
            stem = name.rsplit(".", 1)[0]
            self._set("base_model", stem, "pretrained_model_name_or_path")
            self.notes.append(
                f"pretrained_model_name_or_path = {toml_value(given)} is a single-file "
                "checkpoint; tunesmith trains from a diffusers folder: convert it once with "
                f"StableDiffusionXLPipeline.from_single_file({given!r}).save_pretrained("
                f"'<models root>/{stem}', safe_serialization=True)"
            )
        elif path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
            self._set("base_model", path, "pretrained_model_name_or_path")
        else:
            self._set("base_model", name, "pretrained_model_name_or_path")
            self.notes.append(
                f"base_model = {name!r}: a diffusers folder of that name under the models root "
                "(TUNESMITH_MODELS); tunesmith never downloads, so for a Hugging Face name: "
                f"huggingface-cli download {given} --local-dir <models root>/{name}"
            )

    # -- the dataset's options ---------------------------------------------------------------

    def _dataset_options(self) -> None:
        self._repeats()
        for key in sorted(GENERAL_KEYS - {"num_repeats"}):
            looks = [self._look(sub, key) for sub in self.subsets]
            (value, where), rest = looks[0], looks[1:]
            if key not in CARRIED:
                for other, other_where in dict((w, (v, w)) for v, w in looks if w).values():
                    if key == "class_tokens" and other:
                        self._refuse(
                            other_where, other,
                            "kohya's caption for a picture without a caption file; tunesmith "
                            "takes its file name there: write the tokens into its <stem>.txt",
                        )  # fmt: skip
                    elif key != "class_tokens":
                        self._other(other_where, key, other)
                continue
            if key == "resolution":
                self._resolution(value, where)
            elif key == "batch_size":
                self._batch(value, where)
            elif key == "caption_extension":
                self._caption_extension(value, where)
            elif key == "validation_split":
                self._validation_split(value, where)
            else:
                tunesmith, kind = CHAIN_SETTINGS[key]
                self._plain(tunesmith, key, value, where, kind)
            for other, other_where in rest:
                if other_where and other_where != where and not _same(other, value):
                    taken = f"{toml_value(value)} from {where or 'sd-scripts default'}"
                    self._refuse(other_where, other, f"one value a run: tunesmith takes {taken}")
        for sub in self.subsets:
            for key in sorted(
                SUBSET_DISTINCT - {"image_dir", "alpha_mask", "conditioning_data_dir"}
            ):
                if key in sub.place.table:
                    self.used.add((sub.place.label, key))
                    self._other(sub.place.name(key), key, sub.place.table[key])

    def _repeats(self) -> None:
        looks = [self._look(sub, "num_repeats") for sub in self.subsets]
        valid = [v if _is(v, int) and v >= 1 else 1 for v, _ in looks]
        uneven = (
            "; the subsets' different repeats are not kept apart" if len(set(valid)) > 1 else ""
        )
        for value, where in dict((w, (v, w)) for v, w in looks if w).values():
            if not _is(value, int) or value < 1:
                self._refuse(where, value, "must be an integer ≥ 1; read as 1")
            elif value != 1:
                self._refuse(
                    where, value,
                    "tunesmith draws every picture once a pass; its steps are kohya's (an "
                    f"epoch's counted with the repeats), so the pictures are seen as often{uneven}",
                )  # fmt: skip
        self.repeats = valid

    def _resolution(self, value: Any, where: str) -> None:
        if not where:
            self.notes.append("no resolution: tunesmith's train.size, 1024")
            return
        sides = _sides(value)
        if sides is None:
            self._refuse(where, value, 'must be a side or "width,height"; train.size left at 1024')
            return
        width, height = sides
        size = max(8, int(math.sqrt(width * height) / 8 + 0.5) * 8)  # the nearest multiple
        note = ""
        if width != height:
            note = (
                f"{width}x{height} becomes the side of a square of about the same area, a "
                "multiple of 8 (a picture trains at that square, or with buckets at its bucket "
                "of about that area)"
            )
        elif size != width:
            note = f"{width} rounded to a multiple of 8"
        self._set("train.size", size, where, note=note)

    def _batch(self, value: Any, where: str) -> None:
        if not _is(value, int):
            self._refuse(where, value, "must be an integer; batch 1 as sd-scripts' default")
            value, where = 1, ""
        self._set("train.batch_size", value, where, option="train_batch_size")

    def _caption_extension(self, value: Any, where: str) -> None:
        if value == ".txt":
            self._set("captions", "<stem>.txt", where, written=False, note="what tunesmith reads")
            return
        self._refuse(
            where or "caption_extension (sd-scripts' default)", value,
            "tunesmith reads each picture's caption from <stem>.txt: rename the caption files "
            "to .txt (a picture without one is captioned with its file name)",
        )  # fmt: skip

    def _validation_split(self, value: Any, where: str) -> None:
        if not where or not _is(value, float) or not 0 < value < 1:
            self.notes.append(
                "kohya trains on every picture; tunesmith holds a tenth of them out (1 to 4) to "
                "measure the validation loss it keeps the best step by: train.holdout = 0 "
                "trains on all"
            )
            if where and not _same(value, 0.0):
                self._refuse(where, value, "must be a share in (0, 1)")
            elif where:
                self.ignored.append(f"{where} = {toml_value(value)} (off, as without it)")
            return
        total = self._count()
        if total is None:
            self._refuse(where, value, "the pictures were not found here to count a holdout")
            return
        self._set("train.holdout", max(1, round(total * value)), where, note=f"of {total} pictures")

    def _count(self) -> int | None:
        counts = [self.pictures.get(s.place.table["image_dir"]) for s in self.subsets]
        return None if any(c is None for c in counts) else sum(counts)

    def _steps_per_epoch(self, accumulation: int) -> int | None:
        """sd-scripts' optimizer steps an epoch (train_network.py): its loader's batches, each
        of a dataset's `batch_size` pictures with every picture `num_repeats` times, over the
        accumulation."""
        by_dataset: dict[int, list[int]] = {}
        for sub, repeats in zip(self.subsets, self.repeats, strict=True):
            count = self.pictures.get(sub.place.table["image_dir"])
            if count is None:
                return None
            size, _ = self._look(sub, "batch_size")
            entry = by_dataset.setdefault(
                sub.index, [size if _is(size, int) and size > 0 else 1, 0]
            )
            entry[1] += count * repeats
        batches = sum(math.ceil(items / size) for size, items in by_dataset.values())
        return max(1, math.ceil(batches / accumulation))

    # -- the training options ----------------------------------------------------------------

    def _steps(self) -> int:
        accumulation = self._arg("gradient_accumulation_steps", int, 1)
        self.per_epoch = self._steps_per_epoch(max(1, accumulation))
        steps = self._arg("max_train_steps", int)
        epochs = self._arg("max_train_epochs", int)
        if epochs is not None and self.per_epoch is not None:
            total = epochs * self.per_epoch
            about = (
                " (about: kohya batches each bucket apart)"
                if self.run["train"].get("buckets")
                else ""
            )
            note = f"{_epochs(epochs)} of {self.per_epoch} steps{about}"
            self._set("train.steps", total, "max_train_epochs", note=note)
            if steps is not None:
                self.ignored.append(f"max_train_steps = {steps} (max_train_epochs wins in kohya)")
            return total
        if epochs is not None:
            self._refuse(
                "max_train_epochs", epochs,
                "the pictures were not found here to count an epoch's steps: train.steps is "
                "max_train_steps; import where the image_dir is",
            )  # fmt: skip
        if steps is None:
            steps = KOHYA_DEFAULTS["max_train_steps"]
            self._set("train.steps", steps, "", option="max_train_steps")
        else:
            self._set("train.steps", steps, "max_train_steps")
        return steps

    def _training_options(self, steps: int) -> None:
        unet_lr = self._arg("unet_lr", float)
        base_lr = self._arg("learning_rate", float)
        if unet_lr is not None:
            self._set("train.lr", unet_lr, "unet_lr")
            if base_lr is not None and self.args.get("network_train_unet_only") is True:
                self.ignored.append(f"learning_rate = {base_lr} (unet_lr wins in kohya)")
        elif base_lr is not None:
            self._set("train.lr", base_lr, "learning_rate")
        else:
            self._set("train.lr", KOHYA_DEFAULTS["learning_rate"], "", option="learning_rate")
        self._text_encoder(unet_lr, base_lr)
        clip = self._arg("max_grad_norm", float)
        if clip is None:
            self._set(
                "train.grad_clip", KOHYA_DEFAULTS["max_grad_norm"], "", option="max_grad_norm"
            )
        else:
            self._set("train.grad_clip", clip, "max_grad_norm", note="0: off" if clip == 0 else "")
        seed = self._arg("seed", int)
        if seed is None:
            self.notes.append(
                "no seed: kohya draws a new one each run; tunesmith's is fixed (train.seed, 42)"
            )
        else:
            self._set("train.seed", seed, "seed")
        self._cadences()
        for key, (tunesmith, kind) in PLAIN_SETTINGS.items():
            if key in self.args:
                value = self.args[key]
                self.used.add(("", key))
                self._plain(tunesmith, key, value, key, kind)
        self._warmup(steps)
        self._optimizer()
        self._masks()
        self._buckets()

    def _masks(self) -> None:
        """kohya weighs the loss by a mask with masked_loss (masks from conditioning_data_dir)
        or alpha_mask (the alpha channel; train_network.py applies it either way); tunesmith
        takes <stem>.mask.<ext> beside each picture, else its alpha channel."""
        masked = self._arg("masked_loss", bool, False)
        alpha, folders = [], []
        for sub in self.subsets:
            for key, found in (("alpha_mask", alpha), ("conditioning_data_dir", folders)):
                if key in sub.place.table:
                    self.used.add((sub.place.label, key))
                    found.append((sub.place.name(key), sub.place.table[key]))
        for where, value in alpha:
            if not _is(value, bool):
                self._refuse(where, value, "must be true or false")
            elif not value:
                self.ignored.append(f"{where} = false (off, as without it)")
        on = [where for where, value in alpha if value is True]
        note = "each picture's <stem>.mask.<ext> beside it, else its alpha channel"
        if masked:
            self._set("train.masked_loss", True, "masked_loss", note=note)
        elif on:
            self._set("train.masked_loss", True, on[0], note=note)
        elif "masked_loss" in self.args:
            self._set("train.masked_loss", False, "masked_loss", written=False)
        if on and len(on) < len(self.subsets):
            self.notes.append(
                "alpha_mask is on for some subsets only: tunesmith uses every picture's alpha "
                "channel where it has no <stem>.mask file"
            )
        for where, value in folders:
            self._refuse(
                where, value,
                "tunesmith reads a picture's mask from <stem>.mask.<ext> beside it: copy each "
                "mask there under that name",
            )  # fmt: skip

    def _buckets(self) -> None:
        """With buckets on, their sizes are written with kohya's values even where they are
        kohya's defaults: tunesmith's own defaults need not be kohya's."""
        if self.run["train"].get("buckets") is not True:
            return
        for option in ("min_bucket_reso", "max_bucket_reso", "bucket_reso_steps"):
            key = CHAIN_SETTINGS[option][0]
            if key.split(".")[1] in self.run["train"]:
                continue
            value, where = self._look(self.subsets[0], option)
            if _is(value, int):
                note = "kohya's, written as buckets are on"
                self._set(key, value, where, option=option, note=note)

    def _text_encoder(self, unet_lr: float | None, base_lr: float | None) -> None:
        unet_only = self._arg("network_train_unet_only", bool, False)
        given = self._arg("text_encoder_lr")
        flag = "network_train_unet_only" if "network_train_unet_only" in self.args else ""
        if unet_only:
            self._set("train.train_text_encoder", False, flag, written=False)
            if given not in (None, []):
                self.ignored.append(
                    f"text_encoder_lr = {toml_value(given)} (network_train_unet_only: kohya "
                    "trains no text encoder)"
                )
            return
        self._set(
            "train.train_text_encoder", True, flag, option="network_train_unet_only",
            note="kohya trains both text encoders' adapters unless network_train_unet_only",
        )  # fmt: skip
        values = given if isinstance(given, list) else [] if given is None else [given]
        if values and not all(_is(v, float) for v in values):
            self._refuse("text_encoder_lr", given, "must be numbers")
            values = []
        if values:
            if len(set(values)) > 1:
                self._refuse(
                    "text_encoder_lr", given,
                    f"one rate for both text encoders in tunesmith: took {values[0]}",
                )  # fmt: skip
            self._set("train.text_encoder_lr", values[0], "text_encoder_lr")
        elif unet_lr is not None:  # kohya's text encoders then train at learning_rate
            rate = KOHYA_DEFAULTS["learning_rate"] if base_lr is None else base_lr
            if not _same(rate, unet_lr):
                self._set(
                    "train.text_encoder_lr", rate, "learning_rate" if base_lr is not None else "",
                    option="learning_rate", note="kohya's text encoders train at learning_rate",
                )  # fmt: skip

    def _cadences(self) -> None:
        every = self._arg("save_every_n_steps", int)
        epochs = self._arg("save_every_n_epochs", int)
        if every is not None:
            self._set("train.checkpoint_every", every, "save_every_n_steps")
            if epochs is not None:
                self._refuse(
                    "save_every_n_epochs",
                    epochs,
                    "one cadence in tunesmith: took save_every_n_steps",
                )
        elif epochs is not None:
            self._by_epochs("train.checkpoint_every", "save_every_n_epochs", epochs)
        names = (
            "validate_every_n_steps",
            "validate_every_n_epochs",
            "sample_every_n_steps",
            "sample_every_n_epochs",
        )
        given = [(key, self._arg(key, int)) for key in names]
        given = [(key, value) for key, value in given if value is not None]
        if not given:
            return
        (key, value), rest = given[0], given[1:]
        note = "tunesmith validates and draws its demos every train.eval_every steps"
        if key.endswith("epochs"):
            self._by_epochs("train.eval_every", key, value, note)
        else:
            self._set("train.eval_every", value, key, note=note)
        for other, other_value in rest:
            self._refuse(other, other_value, f"one cadence in tunesmith: took {key}")

    def _by_epochs(self, key: str, option: str, epochs: int, note: str = "") -> None:
        if self.per_epoch is None:
            self._refuse(option, epochs, "the pictures were not found here to count an epoch")
            return
        extra = f"; {note}" if note else ""
        self._set(
            key, epochs * self.per_epoch, option,
            note=f"{_epochs(epochs)} of {self.per_epoch} steps{extra}",
        )  # fmt: skip

    def _plain(self, tunesmith: str, option: str, value: Any, where: str, kind: type) -> None:
        """A setting tunesmith takes as it is: written where it is not sd-scripts' default."""
        if not where:
            return
        if not _is(value, kind):
            self._refuse(where, value, f"must be {_KINDS[kind]}")
        elif _off(option, value):
            self._set(tunesmith, value, where, written=False, note="sd-scripts' default")
        else:
            self._set(tunesmith, value, where)

    def _warmup(self, steps: int) -> None:
        value = self._arg("lr_warmup_steps")
        if value is None:
            return
        if isinstance(value, float) and _is(value, float) and 0 < value < 1:
            warmup = int(value * steps)  # train_util.get_scheduler_fix
            note = f"{value} of {steps} steps"
            self._set("train.lr_warmup_steps", warmup, "lr_warmup_steps", note=note)
        elif _is(value, float) and value >= 0 and value == int(value):
            self._plain(
                "train.lr_warmup_steps", "lr_warmup_steps", int(value), "lr_warmup_steps", int
            )
        else:
            self._refuse("lr_warmup_steps", value, "must be steps, or a share of the steps below 1")

    def _optimizer(self) -> None:
        eight_bit = self._arg("use_8bit_adam", bool, False)
        given = self._arg("optimizer_type", str)
        where = "optimizer_type"
        if eight_bit and not given:  # train_util.get_optimizer
            given, where = "AdamW8bit", "use_8bit_adam"
        name = OPTIMIZERS.get((given or "AdamW").lower())
        if name is None:
            self._refuse(
                where, given,
                f"tunesmith's optimizers are {', '.join(OPTIMIZERS.values())}: AdamW here",
            )  # fmt: skip
        elif not given:
            pass
        elif name == KOHYA_DEFAULTS["optimizer_type"]:
            self._set("train.optimizer", name, where, written=False, note="sd-scripts' default")
        else:
            self._set("train.optimizer", name, where)
        self._optimizer_args(name or "AdamW")

    def _optimizer_args(self, name: str) -> None:
        """kohya's optimizer_args ("key=value", each value a Python literal, as get_optimizer
        reads them): tunesmith builds each optimizer at its defaults, so an argument at that
        default is honoured and any other is not."""
        given = self._arg("optimizer_args")
        entries = given if isinstance(given, list) else [] if given is None else None
        if entries is None or not all(isinstance(e, str) for e in entries):
            self._refuse("optimizer_args", given, 'must be a list of "key=value" strings')
            entries = []
        found = {}
        for entry in entries:
            key, sep, text = entry.partition("=")
            try:
                found[key.strip()] = (entry, ast.literal_eval(text.strip()) if sep else None)
            except (ValueError, SyntaxError):
                self._refuse("optimizer_args", entry, "not key=<a Python literal>")
        defaults = OPTIMIZER_DEFAULTS[name]
        if name == "Adafactor":  # kohya's: relative_step unless told, transformers' scale_parameter
            for key, kohya in (("relative_step", True), ("scale_parameter", True)):
                if key not in found:
                    found[key] = (f"{key}={kohya} (kohya's default)", kohya)
        for key, (entry, value) in found.items():
            if key in defaults and _same_value(value, defaults[key]):
                self.ignored.append(f'optimizer_args "{entry}" (tunesmith builds {name} so too)')
                continue
            if key in defaults:
                why = f"tunesmith builds {name} with {key}={defaults[key]!r}"
                if name == "Adafactor" and key == "relative_step":
                    why += " at train.lr (kohya's relative_step sets its own learning rate)"
            else:
                why = f"tunesmith builds {name} at its defaults"
            self.not_honoured.append(f'optimizer_args "{entry}" ({why})')

    # -- the adapter -------------------------------------------------------------------------

    def _network(self) -> None:
        rank, alpha = self._arg("network_dim", int), self._arg("network_alpha", float)
        module = self._arg("network_module", str)
        extra = self._network_args()
        if module is None:
            self.notes.append("no network_module (kohya needs one): read as networks.lora")
        module_name = module or "networks.lora"
        dim = KOHYA_DEFAULTS["network_dim"] if rank is None else rank
        scale = KOHYA_DEFAULTS["network_alpha"] if alpha is None else alpha
        if alpha == 0:  # networks/lora.py: alpha 0 (or None) is the rank
            scale = dim
        conv: tuple | None = None
        if module_name == "networks.lora":
            kind = "lora"
            if "conv_dim" in extra:
                conv = (extra.pop("conv_dim"), "network_args conv_dim")
                conv += (*_pop(extra, "conv_alpha", KOHYA_DEFAULTS["conv_alpha"]),)
        elif module_name == "lycoris.kohya":
            algo = extra.pop("algo", "lora").lower()
            dora = _str_bool(extra.pop("dora_wd", "false"))
            kind = LYCORIS_TYPES.get(algo)
            if kind is None:
                self._refuse(
                    "network_args", f"algo={algo}",
                    "tunesmith's LyCORIS types are locon, loha and lokr (and DoRA): a LoRA here",
                )  # fmt: skip
                kind = "lora"
            elif dora and kind == "locon":
                kind = "dora"
            elif dora:
                self._refuse("network_args", "dora_wd=True", f"no DoRA on {algo} in tunesmith")
            # LyCORIS's conv_dim and conv_alpha default to the network's (lycoris/kohya.py)
            conv = _pop(extra, "conv_dim", dim) + _pop(extra, "conv_alpha", scale)
            if kind == "lokr" and "factor" in extra:
                self._factor(extra.pop("factor"))
        else:
            self._refuse(
                "network_module", module_name,
                "tunesmith trains networks.lora's and lycoris.kohya's types: a LoRA here",
            )  # fmt: skip
            kind = "lora"
        self._set("adapter.type", kind, "network_module" if module else "", option="network_module")
        if rank is None:
            self._set("adapter.rank", dim, "", option="network_dim")
        else:
            self._set("adapter.rank", dim, "network_dim")
        if alpha is None:
            note = f"the adapter is scaled by alpha / rank = {scale:g}/{dim}"
            self._set("adapter.alpha", scale, "", option="network_alpha", note=note)
        else:
            note = "0: kohya reads it as the rank" if alpha == 0 else ""
            self._set("adapter.alpha", scale, "network_alpha", note=note)
        if conv is not None:
            self._conv(*conv)
        layers = "linear and conv" if module_name == "lycoris.kohya" else "linear"
        self.notes.append(
            f"{module_name} adapts every {layers} layer of the UNet's transformer blocks "
            "(attention, feed-forward, proj_in, proj_out); tunesmith's SDXL LoRA adapts the "
            "attention projections to_q, to_k, to_v and to_out.0"
        )
        for key, value in extra.items():
            reason = _NONE
            if key == "preset":
                reason = "tunesmith picks the layers: the attention projections"
            self._refuse("network_args", f"{key}={value}", reason)

    def _network_args(self) -> dict[str, str]:
        given = self._arg("network_args")
        if given is None:
            return {}
        if not isinstance(given, list) or not all(isinstance(a, str) for a in given):
            self._refuse("network_args", given, 'must be a list of "key=value" strings')
            return {}
        found = {}
        for entry in given:
            key, sep, value = entry.partition("=")
            if sep:
                found[key.strip()] = value.strip()
            else:
                self._refuse("network_args", entry, 'must be "key=value"')
        return found

    def _conv(self, dim: Any, dim_from: str, alpha: Any, alpha_from: str) -> None:
        try:
            dim, alpha = int(dim), float(alpha)
        except (TypeError, ValueError):
            self._refuse("network_args", f"conv_dim={dim}, conv_alpha={alpha}", "must be numbers")
            return
        self._set("adapter.conv_dim", dim, dim_from, option="conv_dim")
        self._set("adapter.conv_alpha", alpha, alpha_from, option="conv_alpha")

    def _factor(self, value: str) -> None:
        """LoKr's Kronecker factor (LyCORIS's `factor`; its range is checked as any run's when
        the written file is read back)."""
        try:
            factor = int(value)
        except ValueError:
            self._refuse("network_args", f"factor={value}", "must be a whole number")
            return
        self._set("adapter.factor", factor, "network_args factor", option="factor")

    # -- the demos ---------------------------------------------------------------------------

    def _demos(self) -> None:
        file = self._arg("sample_prompts")
        if file is None:
            return
        if self.prompts is None:
            why = self.unread.get("sample_prompts", "not read")
            self._refuse("sample_prompts", file, f"{why}: the demos are tunesmith's own")
            return
        demos, unseeded = [], False
        for i, entry in enumerate(self.prompts, 1):
            prompt = _prompt(entry) if isinstance(entry, str) else dict(entry)
            text = prompt.get("prompt")
            if not isinstance(text, str) or not text.strip():
                self.ignored.append(f"{file} prompt {i} (no prompt)")
                continue
            steps = prompt.get("sample_steps", SAMPLE_STEPS)
            scale = prompt.get("scale", SAMPLE_SCALE)
            demo: dict[str, Any] = {
                "prompt": text.strip(),
                "steps": max(1, min(1000, steps)) if _is(steps, int) else SAMPLE_STEPS,
                "cfg": scale if _is(scale, float) else SAMPLE_SCALE,
            }
            if _is(prompt.get("seed"), int) and prompt["seed"] >= 0:
                demo["seed"] = prompt["seed"]
            else:
                unseeded = True
            for key, value in prompt.items():
                if key in ("prompt", "sample_steps", "scale", "seed", "enum", "subset"):
                    continue
                if key.startswith("--"):
                    self.ignored.append(f"{file} prompt {i}: {value} (sd-scripts ignores it too)")
                else:
                    why = _PROMPT_OPTIONS.get(key, "not a sample prompt option of sd-scripts")
                    self._refuse(f"{file} prompt {i}: {key}", value, why)
            demos.append(demo)
        if demos:
            self.run["demos"] = demos
            self.settings.append(
                Setting("demos", len(demos), "sample_prompts", note="prompt, steps, cfg, seed")
            )
        if unseeded:
            self.notes.append(
                "a sample prompt without --d: kohya draws a new seed each time; tunesmith's demo "
                "seed is fixed (42)"
            )

    # -- everything else ---------------------------------------------------------------------

    def _rest(self) -> None:
        with_dataset = len(self.sources) > 1
        for key, value in self.args.items():
            if ("", key) in self.used:
                continue
            if key in GENERAL_KEYS or key in ALIASES or key == "caption_extention":
                self._unused("", key, value)
            elif key in ("train_data_dir", "reg_data_dir", "in_json") and with_dataset:
                self.ignored.append(
                    f"{key} = {toml_value(value)} (kohya ignores it beside a dataset config)"
                )
            elif key == "dataset_config":
                self.ignored.append(f"dataset_config = {toml_value(value)} (the dataset config)")
            elif key == "reg_data_dir":
                self._refuse(key, value, "regularisation pictures; tunesmith has none")
            elif key == "in_json":
                self._refuse(
                    key, value, "captions in kohya's metadata JSON; tunesmith reads <stem>.txt"
                )
            else:
                self._other(key, key, value)
        for place in self.places:
            for key, value in place.table.items():
                self._unused(place.label, key, value)

    def _unused(self, label: str, key: str, value: Any) -> None:
        if (label, key) in self.used:
            return
        name = f"{label}.{key}" if label else key
        read = any(place.label == label for sub in self.subsets for place in sub.chain)
        why = (
            "set again nearer the subsets: kohya takes that one"
            if read
            else "only for subsets tunesmith does not train"
        )
        self.ignored.append(f"{name} = {_shown(key, value)} ({why})")

    def _other(self, name: str, key: str, value: Any) -> None:
        """An option tunesmith does not carry over: ignored, or not honoured unless off."""
        if key in IGNORED:
            self.ignored.append(f"{name} = {_shown(key, value)} ({IGNORED[key]})")
        elif key not in KNOWN and key not in SUBSET_DISTINCT:
            self._refuse(name, value, "not an option of sd-scripts' sdxl_train_network.py")
        elif _off(key, value):
            self.ignored.append(f"{name} = {_shown(key, value)} (off, as without it)")
        else:
            self._refuse(name, value, NOT_HONOURED.get(key, _NONE))


# The order of a run's settings in the file and the report.
ORDER = (
    "name", "base_model", "adapter.type", "adapter.rank", "adapter.alpha", "adapter.conv_dim",
    "adapter.conv_alpha", "adapter.factor", "train.steps", "train.lr", "train.train_text_encoder",
    "train.text_encoder_lr", "train.batch_size", "train.gradient_accumulation_steps",
    "train.size", "train.seed", "train.grad_clip", "train.checkpoint_every", "train.eval_every",
    "train.holdout", "train.gradient_checkpointing", "train.optimizer", "train.lr_scheduler",
    "train.lr_warmup_steps", "train.lr_scheduler_num_cycles", "train.lr_scheduler_power",
    "train.loss_type", "train.huber_c", "train.huber_schedule", "train.min_snr_gamma",
    "train.debiased_estimation", "train.noise_offset", "train.adaptive_noise_scale",
    "train.multires_noise_iterations", "train.multires_noise_discount", "train.buckets",
    "train.min_bucket_reso", "train.max_bucket_reso", "train.bucket_reso_steps",
    "train.bucket_no_upscale", "train.max_token_length", "captions", "train.shuffle_caption",
    "train.keep_tokens", "train.caption_separator", "train.caption_dropout_rate",
    "train.caption_tag_dropout_rate", "train.flip_aug", "train.masked_loss", "demos",
)  # fmt: skip


def _rank(key: str) -> int:
    key = key if "." in key or key in ORDER else f"train.{key}"
    return ORDER.index(key) if key in ORDER else len(ORDER)


def _epochs(count: int) -> str:
    return f"{count} epoch" if count == 1 else f"{count} epochs"


def _pop(extra: dict[str, str], key: str, default: Any) -> tuple[Any, str]:
    """A network argument and where it came from ("": the network's default)."""
    if key in extra:
        return extra.pop(key), f"network_args {key}"
    return default, ""


def _off(option: str, value: Any) -> bool:
    """Whether a value asks for nothing: sd-scripts' default, or off (false, 0, empty)."""
    if option in KOHYA_DEFAULTS and KOHYA_DEFAULTS[option] is not None:
        if _same(value, KOHYA_DEFAULTS[option]):
            return True
        if isinstance(KOHYA_DEFAULTS[option], str):
            return value == ""
    return (
        value is None
        or value is False
        or value == ""
        or value == []
        or value == {}
        or (isinstance(value, int | float) and not isinstance(value, bool) and value == 0)
    )


# What a sample prompt's other options are (train_util.line_to_prompt_dict) and why not.
_PROMPT_OPTIONS = {
    "negative_prompt": "tunesmith's demos have no negative prompt",
    "width": "tunesmith draws the demos at train.size",
    "height": "tunesmith draws the demos at train.size",
    "sample_sampler": NOT_HONOURED["sample_sampler"],
    "guidance_scale": "an option of other models than SDXL",
    "controlnet_image": "no ControlNet in tunesmith",
    "cfg_trunc_ratio": "an option of other models than SDXL",
    "renorm_cfg": "an option of other models than SDXL",
    "flow_shift": "an option of other models than SDXL",
}
# A prompt line's options, as line_to_prompt_dict reads them (each after " --", case-insensitive).
_PROMPT_PATTERNS = (
    ("width", r"w (\d+)", int),
    ("height", r"h (\d+)", int),
    ("seed", r"d (\d+)", int),
    ("sample_steps", r"s (\d+)", int),
    ("scale", r"l ([\d.]+)", float),
    ("guidance_scale", r"g ([\d.]+)", float),
    ("negative_prompt", r"n (.+)", str),
    ("sample_sampler", r"ss (.+)", str),
    ("controlnet_image", r"cn (.+)", str),
    ("cfg_trunc_ratio", r"ctr (.+)", float),
    ("renorm_cfg", r"rcfg (.+)", float),
    ("flow_shift", r"fs (.+)", str),
)


def _prompt(line: str) -> dict[str, Any]:
    """One line of a sample prompts file as sd-scripts reads it: the prompt, then options
    each after " --" (`--n` negative prompt, `--s` steps, `--l` guidance scale, `--d` seed,
    `--w`/`--h` size, `--ss` sampler)."""
    parts = line.split(" --")
    found: dict[str, Any] = {"prompt": parts[0]}
    for part in parts[1:]:
        for key, pattern, kind in _PROMPT_PATTERNS:
            match = re.match(pattern, part, re.IGNORECASE)
            if match:
                try:
                    found[key] = kind(match.group(1))
                except ValueError:
                    found[f"--{part}"] = part
                break
        else:
            found[f"--{part.split(' ')[0]}"] = part
    return found


def parse_prompt_lines(text: str) -> list[str]:
    """The prompts of a `.txt` sample prompts file: each line that is not empty or a comment
    (train_util.load_prompts)."""
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def prompt_tables(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The prompts of a `.toml` sample prompts file: `[prompt]`'s settings under each
    `[[prompt.subset]]` (train_util.load_prompts)."""
    table = document.get("prompt")
    if not isinstance(table, Mapping) or not isinstance(table.get("subset"), list):
        raise ValueError("a sample prompts TOML needs [prompt] with [[prompt.subset]] tables")
    common = {k: v for k, v in table.items() if k != "subset"}
    return [{**common, **subset} for subset in table["subset"] if isinstance(subset, Mapping)]


# -- values -------------------------------------------------------------------------------------

_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return a == b


def _same_value(a: Any, b: Any) -> bool:
    """Equal as an optimizer takes them: numbers by value, a list as a tuple."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


def _str_bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


def _sides(value: Any) -> tuple[int, int] | None:
    """kohya's resolution: a side, "width,height", or [width, height]."""
    if _is(value, int):
        parts = [value]
    elif isinstance(value, str):
        try:
            parts = [int(p) for p in value.split(",")]
        except ValueError:
            return None
    elif isinstance(value, list) and all(_is(p, int) for p in value):
        parts = list(value)
    else:
        return None
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 1:
        return None
    return parts[0], parts[1]


def _basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1]


def _parent(path: str) -> str:
    parts = re.split(r"[\\/]", path.rstrip("\\/"))
    return "/".join(parts[:-1])


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _shown(name: str, value: Any) -> str:
    return '"(hidden)"' if name.split(".")[-1] in SECRETS else toml_value(value)


# -- TOML out ------------------------------------------------------------------------------------
# A small writer, since no TOML writer is a dependency (tomllib only reads): tunesmith.toml is
# tables of scalars and lists of scalars, and arrays of such tables.

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_value(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return {True: "inf", False: "-inf"}[value > 0] if value == value else "nan"
        return repr(value)
    if isinstance(value, str):
        out = []
        for char in value:
            if char in _ESCAPES:
                out.append(_ESCAPES[char])
            elif ord(char) < 0x20 or ord(char) == 0x7F:
                out.append(f"\\u{ord(char):04x}")
            else:
                out.append(char)
        return '"' + "".join(out) + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    if value is None:
        return '""'
    return toml_value(str(value))


def _key(key: str) -> str:
    return key if _BARE.match(key) else toml_value(key)


def toml_text(document: Mapping[str, Any], path: tuple[str, ...] = ()) -> str:
    """A document of tables, arrays of tables and scalars as TOML text: each table's scalars,
    then its tables, then its arrays of tables."""
    lines: list[str] = []
    scalars = {k: v for k, v in document.items() if not _is_table(v) and not _is_tables(v)}
    for key, value in scalars.items():
        lines.append(f"{_key(key)} = {toml_value(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in document.items():
        here = (*path, _key(key))
        if _is_table(value):
            text += f"\n[{'.'.join(here)}]\n" + toml_text(value, here)
        elif _is_tables(value):
            for table in value:
                text += f"\n[[{'.'.join(here)}]]\n" + toml_text(table, here)
    return text.lstrip("\n") if not path else text


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)

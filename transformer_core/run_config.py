"""The configuration of one training run: model + training + data, as frozen dataclasses.

Flat keys (``--set key=value`` and sweep specs) are the field names of the
three dataclasses, which never collide.  ``content_hash`` identifies what a
run computes: it ignores run-only fields (where and how fast it runs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from . import knobs
from .config import MODEL_KEYS, ModelConfig, check_choice, check_int, model_config, refuse
from .errors import ConfigError, did_you_mean

MAX_SEED = 2**32 - 1  # what every RNG a seed reaches takes: numpy's RandomState 32 bits, torch.manual_seed 64
# Bounds of sizes that are typos, not plans: 40x the paper's 25K-token step per micro-batch, and a vocabulary the
# size of the largest in use (a sentencepiece BPE of a corpus stops far below it, whatever was asked)
MAX_TOKENS_PER_BATCH = 1 << 20
MAX_ACCUMULATE = 1 << 10
MAX_VOCAB = 1 << 18
MIN_VOCAB = 16  # the smallest shared BPE vocabulary a run takes

SCHEDULES = ("rsqrt", "linear", "wsd")  # learning-rate schedules (optim.learning_rate)
BEAM_STOPS = ("exact", "length")  # when a beam search ends early: see decoding.beam_search
EVAL_BLEU = ("all", "final")  # when dev BLEU is computed: at every evaluation, or only at the last step
TASKS = ("translation", "lm")  # encoder-decoder translation, or a decoder-only language model on one side
LOSS_KERNELS = ("plain", "chunked", "lse")  # the output projection and loss: see transformer_core/fused_loss.py
COMPILE = ("off", "on", "graphs", "auto")  # torch.compile of the model and loss: see transformer_core/compiling.py
PACKING = ("off", "on", "fill", "blocks", "auto")  # packed fixed-shape batches: see transformer_core/packed_step.py
LOSS_SYNC = ("auto", "step", "window")  # when a one-device step's losses are read: see transformer_core/trainer.py
PACKED_ATTENTION = ("auto", "varlen", "flex", "flex64")  # a packed batch's attention on CUDA: see segments.py
RESIDUAL_DTYPE = ("fp32", "bf16")  # the residual stream's dtype under bf16 autocast: see layers.set_residual_dtype
PACKED_LAYOUT = ("auto", "end", "tiles")  # where a packed batch's sentences lie: see transformer_core/data/packing.py


@dataclass(frozen=True)
class TrainConfig:
    """The paper's recipe (section 5) and evaluation (section 6) settings."""

    steps: int = 100_000
    tokens_per_batch: int = 4096  # per side, per micro-batch (paper: ~25,000 per step)
    accumulate: int = 1  # micro-batches per optimiser step
    warmup: int = 4000
    lr_scale: float = 1.0  # multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    # rsqrt: the paper's; linear: warmup then linear decay to 0 at the last step; wsd: warmup, constant,
    # then linear decay to 0 over the last `cooldown` fraction of the steps (all peak at the rsqrt peak)
    schedule: str = "rsqrt"
    cooldown: float = 0.2  # wsd only: fraction of the steps in (0, 1] spent decaying
    eps_ls: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    clip_norm: float = 0.0  # 0: no clipping (the paper's recipe)
    max_train_len: int = 256  # training pairs longer than this (in pieces) are skipped
    seed: int = 1
    eval_every: int = 1000
    eval_sentences: int = 0  # dev sentences decoded at intermediate evaluations (0: all)
    eval_bleu: str = "all"  # all: beam-search BLEU at every evaluation; final: dev perplexity only until the last step
    average_last: int = 5  # checkpoints averaged for the test set
    beam: int = 4
    alpha: float = 0.6
    max_extra: int = 50  # decode at most source length + this many tokens
    beam_stop: str = "exact"  # exact: tensor2tensor's bound (the paper's); length: the bound at the current length
    # run-only: where and how fast, not what
    device: str = "auto"
    precision: str = "auto"
    threads: int = 0
    log_every: int = 50
    compile: str = "off"  # off: eager; on: torch.compile of model and loss (eager without a C++ compiler); auto
    fused_adam: bool = True  # torch's fused Adam kernel (equal to the per-parameter loop to rounding)
    fast_dropout: bool = False  # true: CPU dropout masks from int32 draws (dropout.py); false: torch's bernoulli_
    loss_kernel: str = "plain"  # plain: logits then log_softmax; chunked: by row chunks; lse: from the log-sum-exp
    packing: str = "off"  # off: padded buckets; on/fill/blocks: packed buffers of one shape (packed_step.py); auto
    packed_attention: str = "auto"  # auto/varlen: varlen FlashAttention; flex/flex64: FlexAttention (compiled, CUDA)
    loss_sync: str = "auto"  # auto/step: the step's losses read every step; window: at each logging window's end
    packed_layout: str = "auto"  # auto: tiles under FlexAttention, else end; end: end to end; tiles: in its blocks
    residual_dtype: str = "fp32"  # fp32: autocast's (the norms' fp32 outputs); bf16: the stream kept in bf16

    def __post_init__(self) -> None:
        check_int("tokens_per_batch", self.tokens_per_batch, maximum=MAX_TOKENS_PER_BATCH)
        check_int("accumulate", self.accumulate, maximum=MAX_ACCUMULATE)
        for name in (
            "steps",
            "warmup",
            "max_train_len",
            "eval_every",
            "average_last",
            "beam",
            "log_every",
        ):
            check_int(name, getattr(self, name))
        for name in ("eval_sentences", "threads", "max_extra"):
            check_int(name, getattr(self, name), minimum=0)
        check_int("seed", self.seed, minimum=0, maximum=MAX_SEED)
        for name, lo, hi in (
            ("lr_scale", 0.0, float("inf")),
            ("eps_ls", 0.0, 1.0),
            ("adam_beta1", 0.0, 1.0),
            ("adam_beta2", 0.0, 1.0),
            ("adam_eps", 0.0, 1.0),
            ("clip_norm", 0.0, float("inf")),
            ("alpha", 0.0, 10.0),
        ):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not (lo <= v < hi)
                or (name == "lr_scale" and v == 0)
            ):
                refuse(name, v, f"a number in [{lo}, {hi})" + (" above 0" if name == "lr_scale" else ""))
        check_choice("schedule", self.schedule, SCHEDULES)
        c = self.cooldown
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (0.0 < c <= 1.0):
            refuse("cooldown", c, "a number in (0, 1]")
        check_choice("eval_bleu", self.eval_bleu, EVAL_BLEU)
        check_choice("beam_stop", self.beam_stop, BEAM_STOPS)
        check_choice("compile", self.compile, COMPILE)
        check_choice("loss_kernel", self.loss_kernel, LOSS_KERNELS)
        check_choice("packing", self.packing, PACKING)
        check_choice("packed_attention", self.packed_attention, PACKED_ATTENTION)
        check_choice("loss_sync", self.loss_sync, LOSS_SYNC)
        check_choice("packed_layout", self.packed_layout, PACKED_LAYOUT)
        check_choice("residual_dtype", self.residual_dtype, RESIDUAL_DTYPE)
        for name in ("fused_adam", "fast_dropout"):
            if not isinstance(getattr(self, name), bool):
                refuse(name, getattr(self, name), "true or false")
        if self.precision not in ("auto", "fp32", "bf16"):
            refuse("precision", self.precision, "one of 'auto', 'fp32', 'bf16'")


@dataclass(frozen=True)
class DataConfig:
    task: str = "translation"
    corpus: str = "bible-en-de"
    vocab: int = 8000
    direction: Optional[str] = None
    data_dir: Optional[str] = None  # run-only

    def __post_init__(self) -> None:
        check_int("vocab", self.vocab, minimum=MIN_VOCAB, maximum=MAX_VOCAB)
        check_choice("task", self.task, TASKS)
        if not isinstance(self.corpus, str) or not self.corpus:
            refuse("corpus", self.corpus, "a recipe name (see 'tsweep data list')")


RUN_ONLY = knobs.RUN_ONLY  # the knob table's run-only knobs (where: run)
TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig))
DATA_KEYS = tuple(f.name for f in dataclasses.fields(DataConfig))
ALL_KEYS = MODEL_KEYS + TRAIN_KEYS + DATA_KEYS


def _field_defaults() -> dict:
    """Every config field's dataclass default (not a preset's), by name."""
    return {
        f.name: f.default
        for cls in (ModelConfig, TrainConfig, DataConfig)
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING
    }


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def to_dict(self) -> dict:
        return {
            "model": dataclasses.asdict(self.model),
            "train": dataclasses.asdict(self.train),
            "data": dataclasses.asdict(self.data),
        }

    def flat(self) -> dict:
        d = self.to_dict()
        return {**d["model"], **d["train"], **d["data"]}

    def content_hash(self) -> str:
        content = {k: v for k, v in self.flat().items() if k not in RUN_ONLY}
        defaults = _field_defaults()
        for key in knobs.HASHED_UNLESS_DEFAULT:
            # fields added after trials were first hashed (the knob table's `later`): at their default, ids stay
            if key in content and content[key] == defaults[key]:
                del content[key]
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        return cls(ModelConfig(**d["model"]), TrainConfig(**d["train"]), DataConfig(**d["data"]))


def unknown_key_message(key: str, valid=ALL_KEYS) -> str:
    return f"unknown key {key!r}{did_you_mean(key, valid)}: valid keys are {', '.join(valid)}"


def _coerce(key: str, value: Any, template: Any) -> Any:
    """Strings from the command line become the type of the field's default."""
    if not isinstance(value, str) or isinstance(template, str):
        if isinstance(template, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    text = value.strip()
    if isinstance(template, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{key}={value!r} is invalid: allowed true or false")
    try:
        if isinstance(template, int):
            return int(text)
        if isinstance(template, float):
            return float(text)
    except ValueError:
        kind = "an integer" if isinstance(template, int) else "a number"
        raise ConfigError(f"{key}={value!r} is invalid: allowed {kind}") from None
    if template is None:  # optional fields: ints where they look like ints
        return int(text) if text.lstrip("-").isdigit() else (None if text.lower() == "none" else text)
    return value


def make_run_config(values: dict, preset: str = "base") -> RunConfig:
    """Build a RunConfig from flat keys over a preset; every error names the key and what is allowed."""
    train_keys = tuple(f.name for f in dataclasses.fields(TrainConfig))  # the fields as they are now
    for key in values:
        if key not in ALL_KEYS and key not in train_keys:
            raise ConfigError(unknown_key_message(key))
    defaults = {
        **dataclasses.asdict(model_config(preset)),
        **dataclasses.asdict(TrainConfig()),
        **dataclasses.asdict(DataConfig()),
    }
    vals = {k: _coerce(k, v, defaults[k]) for k, v in values.items()}
    try:
        model = model_config(preset, **{k: v for k, v in vals.items() if k in MODEL_KEYS})
        train = TrainConfig(**{k: v for k, v in vals.items() if k in train_keys})
        data = DataConfig(**{k: v for k, v in vals.items() if k in DATA_KEYS})
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
    return RunConfig(model, train, data)


def parse_assignments(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} is invalid: allowed key=value, e.g. --set d_model=256")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out

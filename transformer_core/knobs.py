"""The knob table: one row per configurable field, the single source every other list is drawn from.

Each knob says where it lives (``model`` / ``recipe`` / ``data`` / ``run``; ``spec`` for
``train_steps``, which exists only in the paper's units), how a scale profile treats it
(``width``, ``depth``, ``steps`` or ``none``: taken as written), whether it is one of the
paper's Table 3 columns, its report label and format, and one line of help.

Spec validation, the profile's scaling and its even-width rule (EVEN_WHEN), ``--set`` help, the run-only
knobs and the later fields the config hash leaves out at their default (RUN_ONLY, HASHED_UNLESS_DEFAULT),
`tsweep plan`'s knob columns (PLAN_COLUMNS), the report's knob columns (every knob that varies across rows)
and docs/knobs.md (``tsweep knobs --markdown``) all read it.
Adding a knob: a dataclass field in config.py / run_config.py plus one line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .formatting import MISSING, is_missing

# A knob's value as a spec, --set, trial.json or a Tune config gives it: a JSON scalar (null: the preset's default)
KnobValue = Union[str, int, float, bool, None]
# A run's values: knob name -> value, the flat keys make_run_config takes (a trial's ``values``, at the profile's
# scale).  A dict, not a dataclass: it is written as it is into trial.json and sweep.json's plan and crosses Ray in
# the trial's payload, and the knob table decides its keys (a knob added there is a key here, with no other edit);
# its typed form is the RunConfig that make_run_config builds from it.
RunValues = dict[str, KnobValue]


@dataclass(frozen=True)
class Knob:
    name: str
    where: str  # model | recipe | data | run | spec
    scaling: str  # width | depth | steps | none
    label: str
    fmt: str  # format spec for report cells ("" = str())
    help: str
    paper: bool = False  # a column of the paper's Table 3
    # added after trials were first hashed: left out of the config hash (RunConfig.content_hash) while at its
    # default, so that the ids of earlier trials stay as they were
    later: bool = False
    # (knob, value): a profile rounds this (width) knob up to an even number where that knob has that value
    even_when: tuple = ()
    width: int = 0  # its column's width in `tsweep plan` (Table 3 columns; 0: its name's or its values' width + 1)

    def format(self, value) -> str:
        if is_missing(value):
            return MISSING
        if self.fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return format(value, self.fmt)
            except (ValueError, OverflowError):  # a value of another kind than the knob's (a float where an int goes)
                return str(value)
        return str(value)


_K = Knob
KNOBS: tuple[Knob, ...] = (
    # the paper's Table 3 columns (model architecture, in the paper's notation)
    _K("N", "model", "depth", "N", "d", "layers of each stack (task lm: decoder layers)", True, width=3),
    _K(
        "d_model",
        "model",
        "width",
        "d_model",
        "d",
        "model (embedding) width",
        True,
        even_when=("positional", "sinusoidal"),
        width=8,
    ),
    _K("d_ff", "model", "width", "d_ff", "d", "inner width of the position-wise feed-forward layer", True, width=6),
    _K("h", "model", "none", "h", "d", "attention heads", True, width=4),
    _K(
        "d_k",
        "model",
        "width",
        "d_k",
        "d",
        "query/key size per head (independent of d_model / h)",
        True,
        even_when=("positional", "rope"),
        width=5,
    ),
    _K("d_v", "model", "width", "d_v", "d", "value size per head (independent of d_k)", True, width=5),
    _K("P_drop", "model", "none", "P_drop", ".2f", "residual and embedding dropout", True, width=7),
    _K(
        "eps_ls", "recipe", "none", "ε_ls", ".2f", "label smoothing (a recipe field that Table 3 varies)", True, width=7
    ),
    _K("positional", "model", "none", "pos", "", "positions: sinusoidal, learned, rope, alibi or none", True),
    _K("train_steps", "spec", "steps", "train steps", "d", "training steps in the paper's units (scaled)", True),
    # model knobs beyond the paper's table
    _K("max_len", "model", "none", "max len", "d", "longest sequence the positions cover"),
    _K("tie", "model", "none", "tie", "", "weight tying: none, decoder (target emb = softmax) or all (three-way)"),
    _K("N_enc", "model", "depth", "N_enc", "d", "encoder layers (overrides N)"),
    _K("N_dec", "model", "depth", "N_dec", "d", "decoder layers (overrides N)"),
    _K("attention_dropout", "model", "none", "attn drop", ".2f", "dropout on attention weights"),
    _K("relu_dropout", "model", "none", "relu drop", ".2f", "dropout inside the feed-forward layer"),
    _K("norm", "model", "none", "norm", "", "layer norm placement: post (the paper's) or pre"),
    _K("scale_attention", "model", "none", "scaled", "", "divide attention logits by sqrt(d_k)"),
    _K("norm_type", "model", "none", "norm type", "", "layernorm (the paper's) or rmsnorm", later=True),
    _K(
        "activation",
        "model",
        "none",
        "act",
        "",
        "FFN: relu (paper), gelu or swiglu (3 matrices of round(2/3 d_ff))",
        later=True,
    ),
    # the training recipe (run units, taken as written)
    _K("steps", "recipe", "none", "steps", "d", "optimiser steps actually run (set by train_steps x the profile)"),
    _K("tokens_per_batch", "recipe", "none", "tok/batch", "d", "target (and source) tokens per micro-batch"),
    _K("accumulate", "recipe", "none", "accum", "d", "micro-batches per optimiser step"),
    _K("warmup", "recipe", "none", "warmup", "d", "warmup steps of the learning-rate schedule"),
    _K("lr_scale", "recipe", "none", "lr x", ".3g", "multiplies the schedule's learning rate"),
    _K("schedule", "recipe", "none", "schedule", "", "learning-rate schedule: rsqrt (paper), linear or wsd"),
    _K("cooldown", "recipe", "none", "cooldown", ".2f", "wsd: fraction of the steps spent decaying to zero"),
    _K("adam_beta1", "recipe", "none", "β1", ".3g", "Adam beta1"),
    _K("adam_beta2", "recipe", "none", "β2", ".3g", "Adam beta2"),
    _K("adam_eps", "recipe", "none", "Adam ε", ".0e", "Adam epsilon"),
    _K("clip_norm", "recipe", "none", "clip", ".3g", "gradient norm clipping (0: off, the paper's)"),
    _K("max_train_len", "recipe", "none", "max train len", "d", "training pairs longer than this are skipped"),
    _K("seed", "recipe", "none", "seed", "d", "seed of initialisation, dropout and data order"),
    _K("eval_every", "recipe", "none", "eval every", "d", "steps between dev evaluations"),
    _K("eval_sentences", "recipe", "none", "eval sents", "d", "dev sentences decoded at intermediate evals (0: all)"),
    _K("eval_bleu", "recipe", "none", "eval BLEU", "", "all: beam BLEU at every eval; final: only at the end"),
    _K("average_last", "recipe", "none", "avg ckpts", "d", "checkpoints averaged for the test set"),
    _K("beam", "recipe", "none", "beam", "d", "beam size"),
    _K("alpha", "recipe", "none", "α", ".2f", "length penalty"),
    _K("max_extra", "recipe", "none", "max extra", "d", "decode at most source length + this many tokens"),
    _K(
        "beam_stop",
        "recipe",
        "none",
        "beam stop",
        "",
        "exact: search as if to the length limit; length: stop sooner",
        later=True,
    ),
    # data
    _K(
        "task",
        "data",
        "none",
        "task",
        "",
        "translation (encoder-decoder) or lm (decoder-only language model)",
        later=True,
    ),
    _K("corpus", "data", "none", "corpus", "", "corpus recipe (tsweep data list) or files:SRC,TGT"),
    _K("vocab", "data", "none", "vocab", "d", "shared sentencepiece BPE vocabulary size"),
    _K("direction", "data", "none", "direction", "", "translation direction, e.g. de-en (lm: the language)"),
    # run-only: where and how fast, never part of a result's identity
    _K("device", "run", "none", "device", "", "auto, cpu, cuda, cuda:N or mps"),
    _K("precision", "run", "none", "precision", "", "auto, fp32 or bf16"),
    _K("threads", "run", "none", "threads", "d", "torch threads (0: torch's default)"),
    _K("log_every", "run", "none", "log every", "d", "steps between training log lines"),
    _K(
        "compile",
        "run",
        "none",
        "compile",
        "",
        "torch.compile of model and loss: off, on, graphs (packed, CUDA: as a CUDA graph) or auto (= off)",
    ),
    _K("fused_adam", "run", "none", "fused Adam", "", "fused Adam (default) or false: the loop; equal to rounding"),
    _K(
        "loss_kernel",
        "run",
        "none",
        "loss kernel",
        "",
        "plain (default); chunked: projection + loss by row chunks (padded eager step); lse: the loss from the "
        "log-sum-exp, no log-probabilities tensor (equal to rounding)",
    ),
    _K(
        "fast_dropout",
        "run",
        "none",
        "int32 dropout",
        "",
        "true: CPU dropout masks from int32 draws; false (default): bernoulli_",
    ),
    _K(
        "packing",
        "run",
        "none",
        "packing",
        "",
        "off (default): padded batches; on: the same batches packed into buffers of one shape; fill: buffers "
        "filled to the budget in real tokens; blocks: sentences placed in 128-token blocks (one key tile per "
        "query tile in FlexAttention); auto (= off)",
    ),
    _K(
        "packed_attention",
        "run",
        "none",
        "packed attention",
        "",
        "a packed step's attention on CUDA: auto (= varlen): varlen FlashAttention; flex: FlexAttention with a "
        "block mask of 128-token tiles (compile on or graphs); flex64: of 64-token tiles",
    ),
    _K(
        "loss_sync",
        "run",
        "none",
        "loss sync",
        "",
        "auto (= step): a one-device step's losses read every step; window: at each logging window's end and "
        "evaluation, so the host queues the next step while the GPU runs this one",
    ),
    _K(
        "packed_layout",
        "run",
        "none",
        "packed layout",
        "",
        "where a packed batch's sentences lie: auto (= tiles under FlexAttention, end otherwise); end: end to end; "
        "tiles: as many as the buffer's room allows in 128-token blocks (64 under flex64), one key tile per query "
        "tile (FlexAttention or a CPU's mask; varlen keeps end)",
    ),
    _K(
        "residual_dtype",
        "run",
        "none",
        "residual dtype",
        "",
        "fp32 (default): the residual stream as autocast leaves it (the norms' fp32 outputs); bf16: kept in bf16 "
        "between sublayers (2 bytes an element instead of 4 for the memory-bound work around each norm; precision "
        "bf16 only)",
    ),
    _K("data_dir", "run", "none", "data dir", "", "data cache directory"),
)

_BY_NAME: list = [None, {}]  # (the table it was built from, {name: knob})


def knob(name: str) -> Knob:
    """The knob of that name in the table as it is now (a row added after import is found too)."""
    if _BY_NAME[0] is not KNOBS:
        _BY_NAME[:] = [KNOBS, {k.name: k for k in KNOBS}]
    return _BY_NAME[1][name]


def names(where: str | None = None, scaling: str | None = None, paper: bool | None = None) -> tuple[str, ...]:
    """Knob names filtered by category, scaling rule and Table 3 membership, in table order."""
    return tuple(
        k.name
        for k in KNOBS
        if (where is None or k.where == where)
        and (scaling is None or k.scaling == scaling)
        and (paper is None or k.paper == paper)
    )


PAPER_COLUMNS = names(paper=True)  # the paper's Table 3 columns
WIDTH_KNOBS = names(scaling="width")
DEPTH_KNOBS = names(scaling="depth")


def row_knobs() -> tuple[str, ...]:
    """The knobs a spec row may set: model knobs and train_steps in the paper's units (scaled by the profile),
    recipe knobs taken as written; never data or run-only fields.  Read from the table as it is now."""
    return names(where="model") + names(where="spec") + tuple(n for n in names(where="recipe") if n != "steps")


def scaled_by_profile() -> tuple[str, ...]:
    """The knobs a spec gives in the paper's units and a profile scales (the table as it is now)."""
    return names(where="model") + ("eps_ls", "train_steps")


def plan_columns() -> tuple[Knob, ...]:
    """`tsweep plan`'s knob columns: the paper's Table 3 columns in run units (train_steps is the plan's steps
    column), from the table as it is now."""
    return tuple(k for k in KNOBS if k.paper and k.where != "spec")


ROW_KNOBS = row_knobs()  # the lists above as the table is at import, for readers that need no later row
SCALED_BY_PROFILE = scaled_by_profile()
# never part of a result's identity: outside the config hash (RunConfig.content_hash)
RUN_ONLY = frozenset(names(where="run"))
# left out of the config hash while at their default (they came after the first trials were hashed)
HASHED_UNLESS_DEFAULT = tuple(k.name for k in KNOBS if k.later)
# width knobs a profile rounds up to even where another knob has a value: {knob: (other knob, value)}
EVEN_WHEN = {k.name: k.even_when for k in KNOBS if k.even_when}
PLAN_COLUMNS = plan_columns()


def markdown_table() -> str:
    """The knob table as markdown: docs/knobs.md."""
    lines = ["| key | where | profile scaling | Table 3 | help |", "|---|---|---|---|---|"]
    for k in KNOBS:
        lines.append(f"| `{k.name}` | {k.where} | {k.scaling} | {'yes' if k.paper else ''} | {k.help} |")
    return "\n".join(lines)


def help_text() -> str:
    """One line per settable key, for --set help."""
    return "\n".join(f"  {k.name:<18} {k.where:<7} {k.help}" for k in KNOBS if k.where != "spec")

"""Frozen, validated configuration in the paper's notation.

ModelConfig holds the architecture knobs of Table 3 (N, d_model, d_ff, h, d_k,
d_v, P_drop, positional encoding) plus a few knobs beyond the paper.  Every
Table 3 row is ``dataclasses.replace(PRESETS["base"], **overrides)``.

Modern variants (defaults are the paper's, and a field at its default leaves a run's content hash as it
would be without the field):

- ``positional``: sinusoidal, learned (the paper's), rope (rotary, on each head's d_k: d_k must be even),
  alibi (linear distance biases on the self-attention logits) or none.  rope and alibi act in self-attention
  only; cross-attention has no positional term.
- ``norm_type``: layernorm (the paper's) or rmsnorm, wherever ``norm`` places a norm.
- ``activation`` of the feed-forward layer: relu (the paper's), gelu or swiglu.  ``d_ff`` keeps meaning
  "the width a relu FFN would have": swiglu has three d_model x d_ff' matrices with
  d_ff' = round(2/3 * d_ff) (Shazeer 2020; LLaMA), so its weights match relu's two d_model x d_ff matrices
  (base: d_ff' = 1365, 2,096,640 weights against 2,097,152).  ``ffn_inner`` is that rule.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from .errors import ConfigError


def refuse(field_name: str, value: Any, allowed: str) -> None:
    """A ConfigError in one line: the field, its value and what is allowed."""
    raise ConfigError(f"{field_name}={value!r} is invalid: allowed {allowed}")


INT64_MAX = 2**63 - 1  # the largest integer torch and numpy take: a larger one dies in them, not here


def check_int(name: str, value: Any, minimum: int = 1, maximum: int = INT64_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        refuse(name, value, f"an integer >= {minimum}")
    if value > maximum:
        refuse(name, value, f"an integer in [{minimum}, {maximum}]")


def check_prob(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value < 1.0):
        refuse(name, value, "a number in [0, 1)")


def check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        refuse(name, value, "one of " + ", ".join(repr(c) for c in choices))


POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "none")
TIE = ("none", "decoder", "all")
NORM = ("post", "pre")
NORM_TYPE = ("layernorm", "rmsnorm")
ACTIVATION = ("relu", "gelu", "swiglu")


def ffn_inner(d_ff: int, activation: str) -> int:
    """The feed-forward layer's inner width: d_ff, or round(2/3 * d_ff) for swiglu (three matrices instead of
    two, so the same number of weights)."""
    return (2 * d_ff + 1) // 3 if activation == "swiglu" else d_ff  # == round(2 d_ff / 3): 2 d_ff / 3 never ends in .5


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of the encoder-decoder Transformer, in the paper's notation.

    ``N`` sets both stacks unless ``N_enc``/``N_dec`` are given.  ``d_k`` and
    ``d_v`` are per-head sizes and independent of ``d_model / h``.
    """

    N: int = 6
    d_model: int = 512
    d_ff: int = 2048
    h: int = 8
    d_k: int = 64
    d_v: int = 64
    P_drop: float = 0.1
    positional: str = "sinusoidal"
    max_len: int = 1024
    tie: str = "all"
    N_enc: Optional[int] = None
    N_dec: Optional[int] = None
    attention_dropout: float = 0.0
    relu_dropout: float = 0.0
    norm: str = "post"
    scale_attention: bool = True
    norm_type: str = "layernorm"
    activation: str = "relu"

    def __post_init__(self) -> None:
        for name in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "max_len"):
            check_int(name, getattr(self, name))
        for name in ("N_enc", "N_dec"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        for name in ("P_drop", "attention_dropout", "relu_dropout"):
            check_prob(name, getattr(self, name))
        check_choice("positional", self.positional, POSITIONAL)
        check_choice("tie", self.tie, TIE)
        check_choice("norm", self.norm, NORM)
        check_choice("norm_type", self.norm_type, NORM_TYPE)
        check_choice("activation", self.activation, ACTIVATION)
        if not isinstance(self.scale_attention, bool):
            refuse("scale_attention", self.scale_attention, "true or false")
        if self.positional == "sinusoidal" and self.d_model % 2:
            refuse("d_model", self.d_model, "an even integer with sinusoidal positions")
        if self.positional == "rope" and self.d_k % 2:
            refuse("d_k", self.d_k, "an even integer with positional='rope' (it rotates pairs of each head's d_k)")

    @property
    def encoder_layers(self) -> int:
        return self.N_enc if self.N_enc is not None else self.N

    @property
    def decoder_layers(self) -> int:
        return self.N_dec if self.N_dec is not None else self.N


PRESETS: dict[str, ModelConfig] = {
    "base": ModelConfig(),
    "big": ModelConfig(d_model=1024, d_ff=4096, h=16, d_k=64, d_v=64, P_drop=0.3),
}

MODEL_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig))

# The paper's recipe for each preset, in its units (section 5): steps trained and label smoothing.
PAPER_RECIPE: dict[str, dict] = {
    "base": {"eps_ls": 0.1, "train_steps": 100_000},
    "big": {"eps_ls": 0.1, "train_steps": 300_000},
}


def paper_values(preset: str = "base", overrides: Optional[dict] = None) -> dict:
    """A preset in the paper's units (every model knob, eps_ls, train_steps) with overrides: the one place
    the paper's facts about base and big are read (spec expansion, tsweep train --profile)."""
    return {**dataclasses.asdict(model_config(preset)), **PAPER_RECIPE[preset], **(overrides or {})}


def model_config(preset: str = "base", **overrides: Any) -> ModelConfig:
    """A preset with overrides; unknown preset or keys are ConfigErrors."""
    if preset not in PRESETS:
        refuse("preset", preset, "one of " + ", ".join(sorted(PRESETS)))
    unknown = sorted(set(overrides) - set(MODEL_KEYS))
    if unknown:
        raise ConfigError(f"unknown model knob(s) {unknown}: allowed {', '.join(MODEL_KEYS)}")
    return dataclasses.replace(PRESETS[preset], **overrides)


def check_lm_config(cfg: ModelConfig) -> None:
    """One line naming the knob when a model knob makes no sense for a decoder-only model."""
    if cfg.N_enc is not None:
        raise ConfigError(
            f"N_enc={cfg.N_enc} is invalid with task=lm: a decoder-only model has no encoder; "
            "allowed: N (or N_dec), the number of decoder layers"
        )

"""Parameter counts from the formulas, without building a model or importing torch (`tsweep plan`,
`tsweep params`, the memory estimate).  tests/core checks each against the built model's count."""

from __future__ import annotations

from .config import ModelConfig, ffn_inner


def feed_forward_parameters(cfg: ModelConfig) -> int:
    """One position-wise feed-forward layer: two matrices at d_ff, or swiglu's three at round(2/3 d_ff)."""
    d, inner = cfg.d_model, ffn_inner(cfg.d_ff, cfg.activation)
    matrices_in = 2 if cfg.activation == "swiglu" else 1  # swiglu: gate and linear projections
    return matrices_in * (d * inner + inner) + inner * d + d


def attention_parameters(cfg: ModelConfig) -> int:
    """One multi-head attention layer: the h query, key and value projections with biases, and the output one."""
    d, h = cfg.d_model, cfg.h
    return d * h * (2 * cfg.d_k + cfg.d_v) + h * (2 * cfg.d_k + cfg.d_v) + h * cfg.d_v * d + d


def norm_parameters(cfg: ModelConfig) -> int:
    """One norm: LayerNorm's gain and bias, RMSNorm's gain only."""
    return cfg.d_model if cfg.norm_type == "rmsnorm" else 2 * cfg.d_model


def closed_form_parameters(cfg: ModelConfig, vocab_size: int) -> int:
    """The same count from the formulas, without building a model."""
    d = cfg.d_model
    self_attn = attention_parameters(cfg)
    cross_attn = self_attn  # same shapes, split differently
    ffn = feed_forward_parameters(cfg)
    norm = norm_parameters(cfg)
    enc = cfg.encoder_layers * (self_attn + ffn + 2 * norm)
    dec = cfg.decoder_layers * (self_attn + cross_attn + ffn + 3 * norm)
    matrices = {"all": 1, "decoder": 2, "none": 3}[cfg.tie]
    learned = cfg.max_len * d if cfg.positional == "learned" else 0  # rope's tables, alibi's slopes: buffers
    final_norms = 2 * norm if cfg.norm == "pre" else 0
    return enc + dec + matrices * vocab_size * d + learned + final_norms


def closed_form_lm_parameters(cfg: ModelConfig, vocab_size: int) -> int:
    """DecoderOnlyLM's parameter count from the formulas, without building it."""
    d = cfg.d_model
    norm = norm_parameters(cfg)
    layers = cfg.decoder_layers * (attention_parameters(cfg) + feed_forward_parameters(cfg) + 2 * norm)
    matrices = 1 if cfg.tie != "none" else 2
    learned = cfg.max_len * d if cfg.positional == "learned" else 0
    return layers + matrices * vocab_size * d + learned + (norm if cfg.norm == "pre" else 0)


def closed_form_parameters_for(cfg: ModelConfig, vocab_size: int, task: str = "translation") -> int:
    """Parameters of the model ``task`` builds from ``cfg``: the decoder-only stack for lm, else the
    encoder-decoder (the one place that choice is made, for tsweep plan and tsweep params)."""
    if task == "lm":
        return closed_form_lm_parameters(cfg, vocab_size)
    return closed_form_parameters(cfg, vocab_size)

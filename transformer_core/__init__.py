"""An encoder-decoder Transformer exposing every knob of the paper's Table 3.

The names below load their module on first use (PEP 562), so that what needs no tensors (``rundir``,
``knobs``, ``config``, ``errors``: a report, a plan, a refused command line) does not import torch."""

from importlib import import_module

_WHERE = {
    "MODEL_KEYS": "config",
    "PRESETS": "config",
    "ConfigError": "config",
    "ModelConfig": "config",
    "model_config": "config",
    "beam_search": "decoding",
    "greedy_decode": "decoding",
    "length_penalty": "decoding",
    "label_smoothed_nll": "loss",
    "Transformer": "model",
    "build_model": "model",
    "closed_form_parameters": "params",
    "count_parameters": "model",
    "average_state_dicts": "optim",
    "make_adam": "optim",
    "paper_lr": "optim",
    "train_and_evaluate": "train",
}

__all__ = list(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'transformer_core' has no attribute {name!r}")
    value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))

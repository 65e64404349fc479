"""An encoder-decoder Transformer exposing every knob of the paper's Table 3.

The names below load their module on first use (PEP 562), so that what needs no tensors (``rundir``,
``knobs``, ``config``, ``errors``: a report, a plan, a refused command line) does not import torch."""

from importlib import import_module
from importlib.util import find_spec

from .native_memory import bound_caches as _bound_caches

_bound_caches()  # before any oneDNN primitive exists in this process: the capacities are read at the first one

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
    """A name above from its module, or a submodule (``transformer_core.model``) imported on first use."""
    if name in _WHERE:
        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    elif not name.startswith("_") and find_spec(f"{__name__}.{name}") is not None:
        value = import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))

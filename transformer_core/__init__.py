"""An encoder-decoder Transformer exposing every knob of the paper's Table 3."""

from .config import MODEL_KEYS, PRESETS, ConfigError, ModelConfig, model_config
from .decoding import beam_search, greedy_decode, length_penalty
from .loss import label_smoothed_nll
from .model import Transformer, build_model, closed_form_parameters, count_parameters
from .optim import average_state_dicts, make_adam, paper_lr

__all__ = [
    "MODEL_KEYS",
    "PRESETS",
    "ConfigError",
    "ModelConfig",
    "model_config",
    "beam_search",
    "greedy_decode",
    "length_penalty",
    "label_smoothed_nll",
    "Transformer",
    "build_model",
    "closed_form_parameters",
    "count_parameters",
    "average_state_dicts",
    "make_adam",
    "paper_lr",
    "train_and_evaluate",
]


def __getattr__(name):  # the trainer pulls in data/eval deps; load it on first use
    if name == "train_and_evaluate":
        from .train import train_and_evaluate

        return train_and_evaluate
    raise AttributeError(name)

"""Real parallel corpora, a shared BPE vocabulary and token-budget batches.

The batching names load on first use (PEP 562): reading a corpus's files or metadata does not import torch."""

from importlib import import_module

from .corpus import Corpus, load_corpus, read_meta
from .prepare import BOS, EOS, PAD, UNK, default_data_dir, prepare_text, train_bpe
from .recipes import RECIPES, get_recipe

__all__ = [
    "Batch",
    "BatchStream",
    "collate",
    "eval_batches",
    "padding_fraction",
    "plan_batches",
    "shard",
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "Corpus",
    "default_data_dir",
    "load_corpus",
    "prepare_text",
    "read_meta",
    "train_bpe",
    "RECIPES",
    "get_recipe",
]

_BATCHING = {"Batch", "BatchStream", "collate", "eval_batches", "padding_fraction", "plan_batches", "shard"}


def __getattr__(name):
    if name not in _BATCHING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".batching", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | _BATCHING)

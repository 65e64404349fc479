"""Real parallel corpora, a shared BPE vocabulary and token-budget batches."""

from .batching import Batch, BatchStream, collate, eval_batches, padding_fraction, plan_batches, shard
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

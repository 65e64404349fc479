"""Load a prepared corpus: its meta.json, the encoded splits as arrays, and the checks that find a damaged copy.

``load_corpus`` prepares what is missing (``prepare.prepare_text`` and ``prepare.train_bpe``, cached) under a lock,
then reads it; the layout on disk is described in ``prepare``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from .prepare import (
    LM_SIDES,
    META_KEYS,
    SIDES,
    SPLITS,
    corpus_key,
    default_data_dir,
    parse_corpus_name,
    prepare_text,
    train_bpe,
)

log = logging.getLogger(__name__)


def read_meta(corpus_dir: Path) -> dict:
    path = corpus_dir / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{path} is unreadable ({exc}): the prepared corpus is damaged; "
            f"remove {corpus_dir} or run 'tsweep data prepare' again, which prepares a damaged corpus afresh"
        ) from None
    missing = [k for k in META_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise DataError(
            f"{path} lacks {', '.join(missing)}: the prepared corpus is damaged; "
            f"remove {corpus_dir} or run 'tsweep data prepare' again, which prepares a damaged corpus afresh"
        )
    return meta


def damage(corpus_dir: Path, vocab_dir: Path, sides: tuple[str, ...] = SIDES) -> tuple[str, Path] | None:
    """What is wrong with a prepared corpus on disk, and the directory to prepare afresh; None when sound.

    Checks meta.json, the text files and the encoded arrays (a missing or truncated .npy): cheaply, as
    the arrays are opened as memory maps, which checks their headers and sizes without reading them.
    """
    try:
        read_meta(corpus_dir)
    except DataError:
        return "meta.json is unreadable", corpus_dir
    for name in (f"{split}.{side}" for split in SPLITS for side in sides):
        if not (corpus_dir / name).is_file():
            return f"{name} is missing", corpus_dir
        try:
            flat = np.load(vocab_dir / f"{name}.npy", mmap_mode="r")
            off = np.load(vocab_dir / f"{name}.off.npy", mmap_mode="r")
        except (OSError, ValueError, EOFError) as exc:  # a truncated array fails its memory map (ValueError)
            return f"{name}.npy or its offsets unreadable: {exc}", vocab_dir
        if flat.ndim != 1 or off.ndim != 1 or len(off) < 2 or off[0] != 0 or off[-1] != len(flat):
            return f"{name}.npy does not match its offsets", vocab_dir
    try:
        int((vocab_dir / "done").read_text())
    except (OSError, ValueError):
        return "bpe done marker unreadable", vocab_dir
    if not (vocab_dir / "spm.model").is_file():
        return "spm.model is missing", vocab_dir
    return None


@dataclass
class EncodedSplit:
    src: list[np.ndarray]  # token ids per sentence, no BOS/EOS
    tgt: list[np.ndarray]
    src_text: list[str]
    tgt_text: list[str]

    def __len__(self) -> int:
        return len(self.src)


@dataclass
class Corpus:
    """A prepared corpus with its vocabulary, ready for batching."""

    directory: Path
    meta: dict
    vocab_dir: Path
    vocab_size: int
    sides: tuple[str, ...] = SIDES

    def processor(self):
        import sentencepiece as spm

        return spm.SentencePieceProcessor(model_file=str(self.vocab_dir / "spm.model"))

    def split(self, name: str) -> EncodedSplit:
        def arrays(side):
            flat = np.load(self.vocab_dir / f"{name}.{side}.npy")
            off = np.load(self.vocab_dir / f"{name}.{side}.off.npy")
            return [flat[off[i] : off[i + 1]] for i in range(len(off) - 1)]

        text = lambda side: (self.directory / f"{name}.{side}").read_text(encoding="utf-8").splitlines()
        if self.sides == LM_SIDES:  # a language model's text as targets of empty sources: batched like pairs
            tokens, lines = arrays("text"), text("text")
            return EncodedSplit([np.zeros(0, np.int32)] * len(tokens), tokens, [""] * len(tokens), lines)
        return EncodedSplit(arrays("src"), arrays("tgt"), text("src"), text("tgt"))

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]


def load_corpus(
    name: str, vocab: int, data_dir: Path | None = None, direction: str | None = None, options: dict | None = None
) -> Corpus:
    """Prepare (or find) a corpus and its vocabulary; ``name`` may be 'files:SRC,TGT'."""
    name, inline = parse_corpus_name(name)
    options = options or inline
    data_dir = Path(data_dir or default_data_dir())
    key = corpus_key(name, direction, options)
    return load_prepared(key, data_dir, lambda: prepare_text(name, data_dir, direction, options), vocab)


def load_prepared(
    key: str, data_dir: Path, prepare, vocab: int, sides: tuple[str, ...] = SIDES, normalization: str = "nmt_nfkc"
) -> Corpus:
    """``prepare()`` (the cleaned text's directory, cached) and its BPE under a lock named by ``key``; a
    damaged copy prepared afresh once.  Shared by parallel corpora and a language model's one side."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # trials of a sweep may prepare the same corpus at once: one prepares, the others wait and reuse it
    with open(data_dir / f".lock-{key}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        directory = prepare()
        vocab_dir = train_bpe(directory, vocab, sides, normalization)
        found = damage(directory, vocab_dir, sides)
        if found:  # e.g. a truncated .npy or a garbage meta.json: prepare that part afresh, once
            log.warning("the prepared corpus in %s is damaged (%s): preparing %s again", directory, *found)
            shutil.rmtree(found[1])
            directory = prepare()
            vocab_dir = train_bpe(directory, vocab, sides, normalization)
            found = damage(directory, vocab_dir, sides)
            if found:
                raise DataError(f"the corpus prepared afresh in {directory} is still damaged: {found[0]}")
    return Corpus(directory, read_meta(directory), vocab_dir, int((vocab_dir / "done").read_text()), sides)

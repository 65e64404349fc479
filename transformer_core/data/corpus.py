"""Load a prepared corpus: its meta.json, the encoded splits as arrays, and the checks that find a damaged copy.

``load_corpus`` prepares what is missing (``prepare.prepare_text`` and ``prepare.train_bpe``, cached) under a lock,
then reads it; the layout on disk is described in ``prepare``.
"""

from __future__ import annotations

import fcntl
import logging
import reprlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..rundir import loads
from .input_error import DataInputError
from .prepare import (
    DATA_DIR_ALLOWED,
    LM_SIDES,
    META_KEYS,
    SIDES,
    SPLITS,
    check_vocab,
    corpus_key,
    default_data_dir,
    make_data_dir,
    parse_corpus_name,
    prepare_text,
    train_bpe,
)
from .recipes import recipe_names

log = logging.getLogger(__name__)


def read_meta(corpus_dir: Path) -> dict:
    path = corpus_dir / "meta.json"
    try:
        meta = loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataInputError(
            f"{path} is unreadable ({exc}): the prepared corpus is damaged; "
            f"remove {corpus_dir} or run 'tsweep data prepare' again, which prepares a damaged corpus afresh"
        ) from None
    missing = [k for k in META_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise DataInputError(
            f"{path} lacks {', '.join(missing)}: the prepared corpus is damaged; "
            f"remove {corpus_dir} or run 'tsweep data prepare' again, which prepares a damaged corpus afresh"
        )
    return meta


def meta_damage(meta: dict, sides: tuple[str, ...] = SIDES) -> str | None:
    """What of meta.json's other fields a reader uses (`tsweep data info`: the average words per split and side,
    the provenance, the time taken) is not what prepare writes; None when sound."""
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
    per_side = lambda w: isinstance(w, list) and len(w) == len(sides) and all(map(number, w))
    fits = number if sides == LM_SIDES else per_side  # a language model's one side: one number per split
    words = meta.get("avg_words")
    if not isinstance(words, dict) or not all(fits(words.get(split)) for split in SPLITS):
        return f"meta.json's avg_words {reprlib.repr(words)} is not a number per split and side"
    provenance = meta.get("provenance")
    if not isinstance(provenance, dict):
        return f"meta.json's provenance {reprlib.repr(provenance)} is not a mapping"
    parts = [provenance] + [v for v in provenance.values() if isinstance(v, dict)]
    counts = all(number(p.get(k, 0)) for p in parts for k in ("fetch_seconds", "cache_bytes"))
    if not counts or not all(isinstance(p.get("cache", ""), str) for p in parts):
        return f"meta.json's provenance {reprlib.repr(provenance)} has a download's seconds, bytes or path unreadable"
    if not number(meta.get("prepare_seconds", 0)):
        return f"meta.json's prepare_seconds {reprlib.repr(meta.get('prepare_seconds'))} is not a number"
    return None


def _npy_reason(exc: Exception) -> str:
    """numpy's reason a file is not an array, without its advice to unpickle what is not one."""
    return "not a NumPy array file" if "pickled" in str(exc) else str(exc)


def damage(corpus_dir: Path, vocab_dir: Path, sides: tuple[str, ...] = SIDES) -> tuple[str, Path] | None:
    """What is wrong with a prepared corpus on disk, and the directory to prepare afresh; None when sound.

    Checks meta.json, the text files and the encoded arrays (a missing or truncated .npy): cheaply, as
    the arrays are opened as memory maps, which checks their headers and sizes without reading them.
    """
    try:
        meta = read_meta(corpus_dir)
    except DataError:
        return "meta.json is unreadable", corpus_dir
    wrong = meta_damage(meta, sides)
    if wrong:
        return wrong, corpus_dir
    for name in (f"{split}.{side}" for split in SPLITS for side in sides):
        if not (corpus_dir / name).is_file():
            return f"{name} is missing", corpus_dir
        try:
            flat = np.load(vocab_dir / f"{name}.npy", mmap_mode="r")
            off = np.load(vocab_dir / f"{name}.off.npy", mmap_mode="r")
        except (OSError, ValueError, EOFError) as exc:  # a truncated array fails its memory map (ValueError)
            return f"{name}.npy or its offsets unreadable: {_npy_reason(exc)}", vocab_dir
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
    recipe_names(name)  # an unknown or empty name is refused before its lock is taken
    options = options or inline
    data_dir = Path(data_dir or default_data_dir())
    key = corpus_key(name, direction, options)
    return load_prepared(key, data_dir, lambda: prepare_text(name, data_dir, direction, options), vocab)


def load_prepared(
    key: str, data_dir: Path, prepare, vocab: int, sides: tuple[str, ...] = SIDES, normalization: str = "nmt_nfkc"
) -> Corpus:
    """``prepare()`` (the cleaned text's directory, cached) and its BPE under a lock named by ``key``; a
    damaged copy prepared afresh once.  Shared by parallel corpora and a language model's one side."""
    check_vocab(vocab)  # before anything is fetched: sentencepiece would refuse it only after the text is ready
    make_data_dir(data_dir)
    # trials of a sweep may prepare the same corpus at once: one prepares, the others wait and reuse it
    try:
        lock = open(data_dir / f".lock-{key}", "w")
    except OSError as exc:
        raise DataInputError(
            f"data directory {str(data_dir)!r} cannot be written ({exc.strerror or exc}): {DATA_DIR_ALLOWED}"
        ) from None
    with lock:
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

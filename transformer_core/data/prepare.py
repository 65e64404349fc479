"""Prepare a corpus: fetch, clean, split, fingerprint, shared BPE vocabulary, encoded arrays.

Layout under the data directory (default ~/.cache/tsweep/data, or $TSWEEP_DATA_DIR):

    <corpus key>/                  one per corpus and direction
        train.src train.tgt dev.src dev.tgt test.src test.tgt   cleaned text
        meta.json                  sizes, lengths, fingerprint, versions
        bpe-<V>/spm.model          shared sentencepiece BPE, trained on train only
        bpe-<V>/<split>.<side>.npy flat token ids (int32) + .off.npy offsets

Every directory is written under a temporary name and renamed when complete,
so an interrupted or failed prepare never leaves a half-written corpus.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from .clean import CleanRules, clean_pairs, remove_leakage
from .recipes import RawCorpus, get_recipe

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")
PAD, BOS, EOS, UNK = 0, 1, 2, 3


def cache_dir(name: str) -> Path:
    """~/.cache/tsweep/NAME (or under $XDG_CACHE_HOME)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tsweep" / name


def default_data_dir() -> Path:
    env = os.environ.get("TSWEEP_DATA_DIR")
    if env:
        return Path(env)
    return cache_dir("data")


def corpus_key(name: str, direction: str | None, options: dict | None = None) -> str:
    key = name + (f".{direction}" if direction else "")
    override = os.environ.get("TSWEEP_BIBLE_DB")
    if override and any(n.startswith("bible") for n in name.split("+")):
        # another bible.db (e.g. the test fixture) never shares a cache entry with the packaged one
        options = {**(options or {}), "_bible_db": str(Path(override).resolve())}
    if options:
        digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:10]
        key += f".{digest}"
    return key


def _combine(names: list[str], data_dir: Path, options: dict) -> RawCorpus:
    parts = [get_recipe(n).load(data_dir, options) for n in names]
    langs = parts[0].langs
    for name, part in zip(names, parts):
        if part.langs != langs:
            raise DataError(
                f"cannot combine {names[0]} ({'-'.join(langs)}) with"
                f" {name} ({'-'.join(part.langs)}): language pairs differ"
            )
    splits = {s: [p for part in parts for p in part.splits.get(s, [])] for s in SPLITS}
    verbatim = frozenset.intersection(*(part.verbatim for part in parts))  # kept as given only if kept by all
    return RawCorpus(langs, splits, {n: part.provenance for n, part in zip(names, parts)}, verbatim)


def _orient(raw: RawCorpus, direction: str | None) -> tuple[RawCorpus, str]:
    a, b = raw.langs
    if direction in (None, f"{a}-{b}"):
        return raw, f"{a}-{b}"
    if direction == f"{b}-{a}":
        swapped = {s: [(y, x) for x, y in p] for s, p in raw.splits.items()}
        return RawCorpus((b, a), swapped, raw.provenance, raw.verbatim), direction
    raise DataError(f"direction {direction!r} does not fit this corpus: allowed {a}-{b} or {b}-{a}")


def _write_lines(path: Path, lines) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def fingerprint(directory: Path) -> str:
    h = hashlib.sha256()
    for split in SPLITS:
        for side in ("src", "tgt"):
            h.update((directory / f"{split}.{side}").read_bytes())
    return h.hexdigest()[:16]


def prepare_text(
    name: str,
    data_dir: Path | None = None,
    direction: str | None = None,
    options: dict | None = None,
    rules: CleanRules = CleanRules(),
) -> Path:
    """Fetch and clean a corpus (or '+'-joined recipes); returns its directory.  Cached."""
    data_dir = Path(data_dir or default_data_dir())
    names = name.split("+")
    for n in names:
        get_recipe(n)  # unknown names fail before anything is fetched
    out = data_dir / corpus_key(name, direction, options)
    if (out / "meta.json").exists():
        return out
    start = time.time()
    log.info("preparing %s: fetching and reading %s", name, ", ".join(names))
    raw, direction = _orient(_combine(names, data_dir, options or {}), direction)
    log.info("cleaning %d pairs", sum(len(p) for p in raw.splits.values()))
    splits, dropped = {}, {}
    for split in SPLITS:
        if split in raw.verbatim:  # a standard test set: its references stay the published ones
            splits[split], dropped[split] = list(raw.splits.get(split, [])), {}
        else:
            splits[split], dropped[split] = clean_pairs(raw.splits.get(split, []), rules)
    splits["train"], leaked = remove_leakage(splits["train"], [splits["dev"], splits["test"]])
    for split in SPLITS:
        if not splits[split]:
            raise DataError(
                f"corpus {name!r} has no {split} sentences left after cleaning "
                f"(dropped: {dropped[split]}); check the input files"
            )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for split, pairs in splits.items():
        _write_lines(tmp / f"{split}.src", (s for s, _ in pairs))
        _write_lines(tmp / f"{split}.tgt", (t for _, t in pairs))
    meta = {
        "name": name,
        "direction": direction,
        "langs": list(raw.langs),
        "sizes": {s: len(p) for s, p in splits.items()},
        "avg_words": {
            s: [
                round(sum(len(x.split()) for x, _ in p) / len(p), 2),
                round(sum(len(y.split()) for _, y in p) / len(p), 2),
            ]
            for s, p in splits.items()
        },
        "dropped": dropped,
        "train_pairs_removed_for_leakage": leaked,
        "provenance": raw.provenance,
        "fingerprint": fingerprint(tmp),
        "prepare_seconds": round(time.time() - start, 2),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def read_meta(corpus_dir: Path) -> dict:
    return json.loads((corpus_dir / "meta.json").read_text())


def train_bpe(corpus_dir: Path, vocab: int) -> Path:
    """Shared sentencepiece BPE on the training split (both sides); returns bpe-<vocab>/ (cached)."""
    import sentencepiece as spm

    out = corpus_dir / f"bpe-{vocab}"
    if (out / "done").exists():
        return out
    tmp = corpus_dir / f"bpe-{vocab}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    log.info("training a shared %d-piece BPE vocabulary on %s", vocab, corpus_dir.name)
    text = tmp / "train.both"
    text.write_bytes((corpus_dir / "train.src").read_bytes() + (corpus_dir / "train.tgt").read_bytes())
    try:
        spm.SentencePieceTrainer.train(
            input=str(text),
            model_prefix=str(tmp / "spm"),
            vocab_size=vocab,
            model_type="bpe",
            character_coverage=1.0,
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            unk_id=UNK,
            hard_vocab_limit=False,
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except (RuntimeError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"sentencepiece could not build a {vocab}-piece vocabulary: {exc}") from exc
    text.unlink()
    sp = spm.SentencePieceProcessor(model_file=str(tmp / "spm.model"))
    log.info("encoding the splits")
    for split in SPLITS:
        for side in ("src", "tgt"):
            lines = (corpus_dir / f"{split}.{side}").read_text(encoding="utf-8").splitlines()
            ids = sp.encode(lines)
            lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            flat = np.fromiter((t for x in ids for t in x), dtype=np.int32, count=int(offsets[-1]))
            np.save(tmp / f"{split}.{side}.npy", flat)
            np.save(tmp / f"{split}.{side}.off.npy", offsets)
    (tmp / "done").write_text(str(sp.get_piece_size()))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


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

    def processor(self):
        import sentencepiece as spm

        return spm.SentencePieceProcessor(model_file=str(self.vocab_dir / "spm.model"))

    def split(self, name: str) -> EncodedSplit:
        def arrays(side):
            flat = np.load(self.vocab_dir / f"{name}.{side}.npy")
            off = np.load(self.vocab_dir / f"{name}.{side}.off.npy")
            return [flat[off[i] : off[i + 1]] for i in range(len(off) - 1)]

        text = lambda side: (self.directory / f"{name}.{side}").read_text(encoding="utf-8").splitlines()
        return EncodedSplit(arrays("src"), arrays("tgt"), text("src"), text("tgt"))

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]


def parse_corpus_name(name: str) -> tuple[str, dict | None]:
    """'files:SRC,TGT' or 'files:PAIRS.tsv' name the user's own text inline; other names are recipes."""
    if not name.startswith("files:"):
        return name, None
    paths = [str(Path(p).expanduser().resolve()) for p in name[len("files:") :].split(",") if p]
    if len(paths) == 1:
        return "files", {"tsv": paths[0]}
    if len(paths) == 2:
        return "files", {"src": paths[0], "tgt": paths[1]}
    raise DataError(f"corpus {name!r} is invalid: allowed files:SOURCE,TARGET or files:PAIRS.tsv")


def load_corpus(
    name: str, vocab: int, data_dir: Path | None = None, direction: str | None = None, options: dict | None = None
) -> Corpus:
    """Prepare (or find) a corpus and its vocabulary; ``name`` may be 'files:SRC,TGT'."""
    name, inline = parse_corpus_name(name)
    options = options or inline
    data_dir = Path(data_dir or default_data_dir())
    data_dir.mkdir(parents=True, exist_ok=True)
    # trials of a sweep may prepare the same corpus at once: one prepares, the others wait and reuse it
    with open(data_dir / f".lock-{corpus_key(name, direction, options)}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        directory = prepare_text(name, data_dir, direction, options)
        vocab_dir = train_bpe(directory, vocab)
    return Corpus(directory, read_meta(directory), vocab_dir, int((vocab_dir / "done").read_text()))

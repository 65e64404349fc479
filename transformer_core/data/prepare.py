"""Prepare a corpus: fetch, clean, split, fingerprint, shared BPE vocabulary, encoded arrays (loading it: corpus.py).

Layout under the data directory (default ~/.cache/tsweep/data, or $TSWEEP_DATA_DIR):

    <corpus key>/                  one per corpus and direction
        train.src train.tgt dev.src dev.tgt test.src test.tgt   cleaned text
        meta.json                  sizes, lengths, fingerprint, versions
        bpe-<V>/spm.model          shared sentencepiece BPE, trained on train only
        bpe-<V>/<split>.<side>.npy flat token ids (int32) + .off.npy offsets

A language model's corpus (task=lm, data/monolingual.py) has one side, ``text``, in the same layout
(``<corpus key>.lm-<lang>/train.text`` ...), its BPE trained on that side alone.

Every directory is written under a temporary name and renamed when complete,
so an interrupted or failed prepare never leaves a half-written corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..run_config import MAX_VOCAB, MIN_VOCAB
from .clean import CleanRules, clean_pairs, remove_leakage
from .input_error import DataInputError
from .recipes import RECIPES, RawCorpus, get_recipe

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")
PAD, BOS, EOS, UNK = 0, 1, 2, 3
META_KEYS = ("name", "direction", "langs", "sizes", "fingerprint")  # what every reader of meta.json relies on
SIDES = ("src", "tgt")  # a parallel corpus's sides
LM_SIDES = ("text",)  # a language model's corpus: one side (data/monolingual.py)
DATA_DIR_ALLOWED = "allowed a directory this user can write, made if missing (--data-dir or $TSWEEP_DATA_DIR)"


def cache_dir(name: str) -> Path:
    """~/.cache/tsweep/NAME (or under $XDG_CACHE_HOME)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tsweep" / name


def default_data_dir() -> Path:
    env = os.environ.get("TSWEEP_DATA_DIR")
    if env:
        return Path(env)
    return cache_dir("data")


def check_data_dir(data_dir: Path) -> None:
    """``data_dir`` must be a directory or not exist yet: a file there is refused in one line."""
    if data_dir.exists() and not data_dir.is_dir():
        raise DataInputError(f"data directory {str(data_dir)!r} is not a directory: {DATA_DIR_ALLOWED}")


def make_data_dir(data_dir: Path) -> None:
    """``data_dir`` made if missing; one that is a file or cannot be made is refused in one line."""
    check_data_dir(data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataInputError(
            f"data directory {str(data_dir)!r} cannot be made ({exc.strerror or exc}): {DATA_DIR_ALLOWED}"
        ) from None


def check_vocab(vocab, what: str = "vocab") -> None:
    """A shared BPE vocabulary size must be an integer in [MIN_VOCAB, MAX_VOCAB] (the run config's bounds),
    refused in one line before anything is fetched; ``what`` names it as the user gave it (e.g. '--vocab')."""
    if isinstance(vocab, bool) or not isinstance(vocab, int) or not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise DataInputError(f"{what} {vocab} is invalid: allowed an integer in [{MIN_VOCAB}, {MAX_VOCAB}]")


def corpus_langs(name: str, options: dict | None = None) -> tuple[str, str]:
    """The (first, second) languages of a recipe, or of the first of '+'-joined recipes."""
    return get_recipe(parse_corpus_name(name)[0].split("+")[0]).languages(options)


def check_direction(name: str, direction: str | None, options: dict | None = None) -> None:
    """``direction`` must be None or 'A-B' / 'B-A' of the corpus's two languages (it becomes part of a path)."""
    if direction is None:
        return
    a, b = corpus_langs(name, options)
    if direction not in (f"{a}-{b}", f"{b}-{a}"):
        raise DataInputError(f"direction {direction!r} does not fit corpus {name!r}: allowed {a}-{b} or {b}-{a}")


def corpus_key(name: str, direction: str | None, options: dict | None = None) -> str:
    check_direction(name, direction, options)
    key = name + (f".{direction}" if direction else "")
    for part in name.split("+"):  # what else a recipe says identifies its prepared copy
        if part in RECIPES:
            options = RECIPES[part].cache_key_options(options or {})
    if options:
        digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:10]
        key += f".{digest}"
    return key


def combine_recipes(names: list[str], data_dir: Path, options: dict) -> RawCorpus:
    parts = [get_recipe(n).load(data_dir, options) for n in names]
    langs = parts[0].langs
    for name, part in zip(names, parts):
        if part.langs != langs:
            raise DataInputError(
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
    raise DataInputError(f"direction {direction!r} does not fit this corpus: allowed {a}-{b} or {b}-{a}")


def _empty_split(name: str, split: str, raw: RawCorpus, dropped: dict[str, int], leaked: int) -> str:
    """Why ``split`` of a corpus ended up empty, in one line: the input gave none, or what cleaning dropped."""
    given = {s: len(raw.splits.get(s, [])) for s in SPLITS}
    head = f"corpus {name!r} has no {split} sentences left after cleaning: "
    hint = "check the input files"
    if name.split("+")[0] == "files":
        hint = (
            "give more lines (dev and test each hold out at least 1 line of the training file), or dev and test files"
        )
    if not given[split]:
        counts = ", ".join(f"{n} {s}" for s, n in given.items())
        return head + f"the input gave none ({counts} pairs before cleaning); {hint}"
    reasons = {
        **{k: v for k, v in dropped.items() if v},
        **({"also in dev or test": leaked} if split == "train" else {}),
    }
    why = ", ".join(f"{n} {reason}" for reason, n in reasons.items() if n)
    return head + f"all {given[split]} input pairs were dropped ({why}); {hint}"


def write_corpus_lines(path: Path, lines) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def fingerprint(directory: Path, sides: tuple[str, ...] = SIDES) -> str:
    h = hashlib.sha256()
    for split in SPLITS:
        for side in sides:
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
    raw, direction = _orient(combine_recipes(names, data_dir, options or {}), direction)
    log.info("cleaning %d pairs", sum(len(p) for p in raw.splits.values()))
    splits, dropped = {}, {}
    for split in SPLITS:
        if split in raw.verbatim:  # a standard test set: its references stay the published ones
            splits[split], dropped[split] = list(raw.splits.get(split, [])), {}
        else:
            splits[split], dropped[split] = clean_pairs(raw.splits.get(split, []), rules)
    splits["train"], leaked = remove_leakage(splits["train"], [splits["dev"], splits["test"]])
    for split in SPLITS:
        if not splits[split]:  # the user's own files gave too little: their input; a recipe's text: not theirs
            error = DataInputError if "files" in names else DataError
            raise error(_empty_split(name, split, raw, dropped[split], leaked))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for split, pairs in splits.items():
        write_corpus_lines(tmp / f"{split}.src", (s for s, _ in pairs))
        write_corpus_lines(tmp / f"{split}.tgt", (t for _, t in pairs))
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


def train_bpe(corpus_dir: Path, vocab: int, sides: tuple[str, ...] = SIDES, normalization: str = "nmt_nfkc") -> Path:
    """Sentencepiece BPE on the training split (every side: shared); returns bpe-<vocab>/ (cached).

    ``normalization`` is sentencepiece's rule: its default for translation; a language model uses "identity",
    so that its pieces spell the text exactly (bits per byte are counted on that text)."""
    import sentencepiece as spm

    out = corpus_dir / f"bpe-{vocab}"
    if (out / "done").exists():
        return out
    tmp = corpus_dir / f"bpe-{vocab}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    log.info("training a %d-piece BPE vocabulary on %s (%s)", vocab, corpus_dir.name, ", ".join(sides))
    text = tmp / "train.both"
    text.write_bytes(b"".join((corpus_dir / f"train.{side}").read_bytes() for side in sides))
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
            # identity (a language model): also keep repeated and edge spaces, so pieces spell every byte
            **({} if normalization == "nmt_nfkc" else {"normalization_rule_name": normalization}),
            **({"remove_extra_whitespaces": False} if normalization == "identity" else {}),
        )
    except (RuntimeError, OSError, ValueError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        needed = re.search(r"Vocabulary size is smaller than required_chars\. \d+ vs (\d+)", str(exc))
        if needed:  # the size asked for is below the characters of this text (and the special pieces)
            raise DataInputError(
                f"vocabulary size {vocab} is too small for {corpus_dir.name}: its training text has"
                f" {needed[1]} distinct characters and special pieces; allowed a size of at least {needed[1]}"
            ) from None
        raise DataError(f"sentencepiece could not build a {vocab}-piece vocabulary: {exc}") from exc
    text.unlink()
    sp = spm.SentencePieceProcessor(model_file=str(tmp / "spm.model"))
    log.info("encoding the splits")
    for split in SPLITS:
        for side in sides:
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


def parse_corpus_name(name: str) -> tuple[str, dict | None]:
    """'files:SRC,TGT' or 'files:PAIRS.tsv' name the user's own text inline; other names are recipes."""
    if not name.startswith("files:"):
        return name, None
    paths = [str(Path(p).expanduser().resolve()) for p in name[len("files:") :].split(",") if p]
    if len(paths) == 1:
        return "files", {"tsv": paths[0]}
    if len(paths) == 2:
        return "files", {"src": paths[0], "tgt": paths[1]}
    raise DataInputError(f"corpus {name!r} is invalid: allowed files:SOURCE,TARGET or files:PAIRS.tsv")

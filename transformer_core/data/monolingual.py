"""One side of a corpus as a language model's text (task=lm).

Which side: ``direction`` names the one language modelled, a language of the recipe (``en`` or ``de``
for bible-en-de); unset, the recipe's first language (English for every built-in recipe).  A pair such
as ``de-en`` is refused: it names a translation.  ``files:TEXT`` is one plain UTF-8 text file, one
document or sentence per line, whose dev and test lines are held out of it as the files recipe holds
them out of a training file (a twentieth of the lines each, at most 1,000, by a fixed seed);
``files:SRC,TGT`` models SRC (``direction=src``, the default) or TGT (``direction=tgt``).

Cleaning is the side's own: every line normalised like training text (clean.normalize), empty or
overlong lines dropped (standard test sets kept as given), and training lines that are also dev or test
lines removed.  Dev and test are the recipe's dev and test splits of that side.  The prepared copy lives
beside the parallel ones as ``<corpus key>.lm-<lang>/{train,dev,test}.text``, with a sentencepiece BPE
trained on that side's training text only, under identity normalisation: its pieces spell the text
exactly, so bits per byte (lm.py) are counted on the very bytes the model predicts.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ..errors import ConfigError, DataError
from .clean import CleanRules, normalize
from .corpus import Corpus, load_prepared
from .input_error import DataInputError
from .prepare import (
    LM_SIDES,
    SPLITS,
    combine_recipes,
    corpus_key,
    corpus_langs,
    default_data_dir,
    fingerprint,
    parse_corpus_name,
    write_corpus_lines,
)
from .recipes import get_recipe

TEXT = "text"  # the language of a files:TEXT corpus: one file, one side


def parse_lm_corpus(name: str) -> tuple[str, dict | None]:
    """Like prepare.parse_corpus_name, except that ``files:TEXT`` (one path) is a plain text file."""
    if name.startswith("files:"):
        paths = [p for p in name[len("files:") :].split(",") if p]
        if len(paths) == 1:
            return "files", {TEXT: str(Path(paths[0]).expanduser().resolve())}
    return parse_corpus_name(name)


def lm_language(name: str, direction: str | None) -> str:
    """The language a task=lm run models (see the module doc); a ConfigError names what is allowed."""
    recipe, options = parse_lm_corpus(name)
    for part in recipe.split("+"):
        get_recipe(part)
    if options and TEXT in options:
        if direction not in (None, TEXT):
            raise ConfigError(
                f"direction={direction!r} is invalid with task=lm and corpus {name!r}: one text file is one side; "
                "allowed: no direction"
            )
        return TEXT
    langs = corpus_langs(recipe, options)
    if direction is None:
        return langs[0]
    if direction not in langs:
        raise ConfigError(
            f"direction={direction!r} is invalid with task=lm: allowed one language of {name}, "
            f"{langs[0]} or {langs[1]} (the side modelled; default {langs[0]})"
        )
    return direction


def lm_key(recipe: str, lang: str, options: dict | None) -> str:
    return corpus_key(recipe, None, options) + f".lm-{lang}"


def _side(recipe: str, lang: str, data_dir: Path, options: dict | None):
    """The raw corpus and the index of the modelled side in its pairs."""
    if options and TEXT in options:  # one file: the files recipe's hold-out, with the file as both sides
        path = options[TEXT]
        if not Path(path).is_file():
            raise DataInputError(f"text file {path!r} does not exist or is not a file")
        return get_recipe("files").load(data_dir, {"src": path, "tgt": path}), 0
    raw = combine_recipes(recipe.split("+"), data_dir, options or {})
    return raw, raw.langs.index(lang)


def _clean(lines, rules: CleanRules) -> tuple[list[str], dict[str, int]]:
    kept, dropped = [], {"empty": 0, "length": 0}
    for line in lines:
        line = normalize(line)
        if len(line) < rules.min_chars:
            dropped["empty"] += 1
        elif len(line) > rules.max_chars:
            dropped["length"] += 1
        else:
            kept.append(line)
    return kept, dropped


def prepare_lm_text(
    recipe: str, lang: str, data_dir: Path, options: dict | None = None, rules: CleanRules = CleanRules()
) -> Path:
    """Fetch a corpus and keep the side ``lang`` as cleaned text; returns its directory.  Cached."""
    out = data_dir / lm_key(recipe, lang, options)
    if (out / "meta.json").exists():
        return out
    start = time.time()
    raw, i = _side(recipe, lang, data_dir, options)
    splits, dropped = {}, {}
    for split in SPLITS:
        lines = (pair[i] for pair in raw.splits.get(split, []))
        if split in raw.verbatim:  # a standard test set stays as published
            splits[split], dropped[split] = list(lines), {}
        else:
            splits[split], dropped[split] = _clean(lines, rules)
    held = set(splits["dev"]) | set(splits["test"])
    train = [line for line in splits["train"] if line not in held]
    leaked, splits["train"] = len(splits["train"]) - len(train), train
    for split in SPLITS:
        if not splits[split]:
            given = len(raw.splits.get(split, []))
            why = ", ".join(f"{n} {k}" for k, n in {**dropped[split], "also in dev or test": leaked}.items() if n)
            error = DataInputError if recipe == "files" else DataError  # the user's own file gave too little
            raise error(
                f"corpus {recipe!r} ({lang}) has no {split} lines left: {given} given"
                + (f", dropped {why}" if why and given else "")
                + ("; give more lines (dev and test each hold out at least 1 line)" if recipe == "files" else "")
            )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for split, lines in splits.items():
        write_corpus_lines(tmp / f"{split}.{LM_SIDES[0]}", lines)
    meta = {
        "name": recipe,
        "task": "lm",
        "direction": lang,
        "langs": [lang],
        "sizes": {s: len(lines) for s, lines in splits.items()},
        "avg_words": {s: round(sum(len(x.split()) for x in lines) / len(lines), 2) for s, lines in splits.items()},
        "dropped": dropped,
        "train_lines_removed_for_leakage": leaked,
        "provenance": raw.provenance,
        "fingerprint": fingerprint(tmp, LM_SIDES),
        "prepare_seconds": round(time.time() - start, 2),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def load_lm_corpus(name: str, vocab: int, data_dir: Path | None = None, direction: str | None = None) -> Corpus:
    """The modelled side of ``name`` (a recipe, '+'-joined recipes, files:TEXT or files:SRC,TGT) and its own
    BPE vocabulary, prepared or found; its splits are EncodedSplits with empty sources (Corpus.split)."""
    lang = lm_language(name, direction)
    recipe, options = parse_lm_corpus(name)
    data_dir = Path(data_dir or default_data_dir())
    prepare = lambda: prepare_lm_text(recipe, lang, data_dir, options)  # noqa: E731
    return load_prepared(lm_key(recipe, lang, options), data_dir, prepare, vocab, LM_SIDES, "identity")

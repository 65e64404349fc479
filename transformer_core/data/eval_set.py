"""Evaluation sets (``tsweep evaluate --corpus``): ``files:SRC,TGT``, ``files:PAIRS.tsv`` or a corpus recipe's split
(``RECIPE[:SPLIT]``), read from disk.  Their lines are normalised like training text but never dropped, and a set's
fingerprint (of the normalised text) says whether a run was already scored on it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import UserError
from ..rundir import KEY_ALLOWED, KEY_NAME
from .clean import normalize
from .corpus import read_meta
from .prepare import SPLITS, prepare_text
from .recipes import get_recipe

RESERVED_NAMES = ("dev", "test")  # the training corpus's own splits, as the report names them


class EvalSetError(UserError):
    """An evaluation set that cannot be used: one line naming the file, exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class EvalSet:
    """A named test set: normalised source and reference lines (one pair per line, none dropped)."""

    name: str
    origin: str  # as given: files:SRC,TGT or RECIPE:SPLIT
    source: list[str]
    reference: list[str]
    fingerprint: str  # of the normalised text: the same set under another path is the same set
    langs: Optional[tuple[str, str]] = None  # known for recipes

    def __len__(self) -> int:
        return len(self.source)


def read_text_lines(path: str, what: str) -> list[str]:
    """The lines of a UTF-8 text file (as ``wc -l`` counts them), refused in one line if it is missing,
    empty or not UTF-8."""
    p = Path(path)
    if not p.is_file():
        raise EvalSetError(f"{what} file {path!r} does not exist or is not a file")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalSetError(f"{what} file {path!r} is not UTF-8 text (byte {exc.start}): convert it to UTF-8") from None
    lines = [line.rstrip("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    if not any(line.strip() for line in lines):
        raise EvalSetError(f"{what} file {path!r} is empty (no line with text)")
    return lines


def _set_fingerprint(source: list[str], reference: list[str]) -> str:
    h = hashlib.sha256()
    for line in (*source, "\0", *reference):
        h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()[:16]


def _files_set(spec: str) -> tuple[list[str], list[str], str]:
    paths = [p for p in spec[len("files:") :].split(",") if p]
    if len(paths) == 1:
        rows = read_text_lines(paths[0], "evaluation TSV")
        bad = next((n for n, line in enumerate(rows, 1) if line.count("\t") != 1), None)
        if bad:
            raise EvalSetError(f"evaluation TSV {paths[0]!r} line {bad} does not hold exactly 2 tab-separated columns")
        src, tgt = zip(*(line.split("\t") for line in rows))
        return list(src), list(tgt), Path(paths[0]).name.split(".")[0]
    if len(paths) != 2:
        raise EvalSetError(f"--corpus {spec!r} is invalid: allowed files:SOURCE,TARGET or files:PAIRS.tsv")
    src, tgt = read_text_lines(paths[0], "evaluation source"), read_text_lines(paths[1], "evaluation target")
    if len(src) != len(tgt):
        raise EvalSetError(
            f"evaluation files differ in line count: {paths[0]!r} has {len(src)} lines, {paths[1]!r} has {len(tgt)}; "
            "line i of one must translate line i of the other"
        )
    return src, tgt, Path(paths[0]).name.split(".")[0]


def _recipe_set(spec: str, direction: Optional[str], data_dir) -> tuple[list[str], list[str], str, tuple]:
    recipe, _, split = spec.partition(":")
    split = split or "test"
    if split not in SPLITS:
        raise EvalSetError(f"--corpus {spec!r}: split {split!r} is invalid; allowed {', '.join(SPLITS)}")
    for name in recipe.split("+"):
        try:
            get_recipe(name)
        except UserError as exc:
            raise EvalSetError(str(exc)) from None
    directory = prepare_text(recipe, data_dir, direction)
    meta = read_meta(directory)
    src = read_text_lines(str(directory / f"{split}.src"), f"{recipe} {split} source")
    tgt = read_text_lines(str(directory / f"{split}.tgt"), f"{recipe} {split} target")
    return src, tgt, f"{recipe}-{split}", tuple(meta["langs"])


def read_eval_set(spec: str, name: Optional[str] = None, direction: Optional[str] = None, data_dir=None) -> EvalSet:
    """``files:SRC,TGT``, ``files:PAIRS.tsv`` or ``RECIPE[:SPLIT]`` (split default test, oriented by
    ``direction``) as an EvalSet.  Lines are normalised like the training text; no pair is dropped."""
    langs = None
    if spec.startswith("files:"):
        src, tgt, default = _files_set(spec)
    else:
        src, tgt, default, langs = _recipe_set(spec, direction, data_dir)
    name = name or default
    if not KEY_NAME.match(name) or name in RESERVED_NAMES:
        raise EvalSetError(
            f"evaluation set name {name!r} is invalid: allowed {KEY_ALLOWED}, other than "
            f"{', '.join(RESERVED_NAMES)}: give --name"
        )
    src, tgt = [normalize(s) for s in src], [normalize(t) for t in tgt]
    return EvalSet(name, spec, src, tgt, _set_fingerprint(src, tgt), langs)

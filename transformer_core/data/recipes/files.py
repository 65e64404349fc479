"""The user's own parallel text: line-aligned source/target files or one TSV, with optional dev/test files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Optional

from ..input_error import DataInputError
from ..raw import Pairs, RawCorpus, Recipe

# every option of this recipe, in one place: `tsweep data prepare --src ...` flags and `files:` names map onto them
OPTIONS = ("src", "tgt", "tsv", "dev_src", "dev_tgt", "dev_tsv", "test_src", "test_tgt", "test_tsv")


def read_lines(path: str, what: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise DataInputError(f"{what} file {path!r} does not exist or is not a file")
    try:
        return p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataInputError(f"{what} file {path!r} is not UTF-8 text (byte {exc.start}): convert it to UTF-8") from exc


def read_parallel(src: Optional[str], tgt: Optional[str], tsv: Optional[str], what: str) -> Pairs:
    if tsv:
        pairs = []
        for n, line in enumerate(read_lines(tsv, what + " TSV"), 1):
            cols = line.split("\t")
            if len(cols) != 2:
                raise DataInputError(
                    f"{what} TSV {tsv!r} line {n} has {len(cols)}"
                    f" tab-separated columns: need exactly 2 (source, target)"
                )
            pairs.append((cols[0], cols[1]))
        return pairs
    if not (src and tgt):
        raise DataInputError(f"{what}: give both a source and a target file, or one TSV file")
    a, b = read_lines(src, what + " source"), read_lines(tgt, what + " target")
    if len(a) != len(b):
        raise DataInputError(
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


def langs(options: dict) -> tuple[str, str]:
    """Languages named in the options, if at all."""
    return options.get("src_lang", "src"), options.get("tgt_lang", "tgt")


RECIPES = (
    Recipe(
        "files",
        ("src", "tgt"),
        "your own parallel text: --src/--tgt line-aligned files or one --tsv",
        load_files,
        options=OPTIONS,
        langs_for=langs,
    ),
)

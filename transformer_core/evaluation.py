"""Per-wordpiece perplexity, sacrebleu BLEU and chrF on detokenised beam-search output; evaluation sets.

An evaluation set (``tsweep evaluate --corpus``) is ``files:SRC,TGT``, ``files:PAIRS.tsv`` or a corpus
recipe's split (``RECIPE[:SPLIT]``).  Its lines are normalised like training text but never dropped,
and its fingerprint (of the normalised text) says whether a run was already scored on it.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .data.batching import collate, eval_batches
from .data.clean import normalize
from .data.prepare import BOS, EOS, PAD, SPLITS, EncodedSplit, prepare_text, read_meta
from .data.recipes import get_recipe
from .decoding import beam_search
from .device import autocast
from .errors import UserError
from .loss import label_smoothed_nll


@torch.no_grad()
def perplexity(model, split: EncodedSplit, device, precision: str, budget: int = 4096) -> float:
    """exp(mean cross entropy per target wordpiece, EOS included); no label smoothing."""
    model.eval()
    total, count = 0.0, 0
    for index in eval_batches(split, budget):
        b = collate(split, index)
        limit = model.cfg.max_len
        with autocast(device, precision):
            logits = model(b.src[:, :limit].to(device), b.tgt_in[:, :limit].to(device))
        _, nll, n = label_smoothed_nll(logits, b.tgt_out[:, :limit].to(device), 0.0, PAD)
        total += float(nll)
        count += int(n)
    return math.exp(min(total / max(count, 1), 50.0))


@torch.no_grad()
def translate(
    model,
    split: EncodedSplit,
    processor,
    device,
    precision: str,
    beam: int = 4,
    alpha: float = 0.6,
    max_extra: int = 50,
    limit: int = 0,
    budget: int = 2048,
    stop: str = "exact",
) -> list[str]:
    """Detokenised beam-search translations of the first ``limit`` sources (all if 0), in order."""
    model.eval()
    n = len(split) if not limit else min(limit, len(split))
    indices = np.arange(n)
    hyps: list[str] = [""] * n
    for index in eval_batches(split, budget, indices):
        b = collate(split, index)
        with autocast(device, precision):
            results = beam_search(
                model,
                b.src[:, : model.cfg.max_len].to(device),
                BOS,
                EOS,
                beam=beam,
                alpha=alpha,
                max_extra=max_extra,
                stop=stop,
            )
        for i, (tokens, _) in zip(index, results):
            hyps[int(i)] = processor.decode(tokens)
    return hyps


def bleu(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """Corpus BLEU (sacrebleu defaults: 13a tokenisation, exp smoothing) and its signature."""
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())


def chrf(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """Corpus chrF (sacrebleu defaults: character 6-grams, beta 2) and its signature."""
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())


# ---------------------------------------------------------------------------------------------- evaluation sets
RESERVED_NAMES = ("dev", "test")  # the training corpus's own splits, as the report names them
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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
    if not _NAME.match(name) or name in RESERVED_NAMES:
        raise EvalSetError(
            f"evaluation set name {name!r} is invalid: allowed up to 64 letters, digits, '_', '.', '-' "
            f"(not starting with '.', '_' or '-'), other than {', '.join(RESERVED_NAMES)}: give --name"
        )
    src, tgt = [normalize(s) for s in src], [normalize(t) for t in tgt]
    return EvalSet(name, spec, src, tgt, _set_fingerprint(src, tgt), langs)

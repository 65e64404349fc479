"""Cleaning shared by every recipe: normalisation, filters, de-duplication, no leakage."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Unicode NFC, one space between words, no control characters."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(ch for ch in text if ch in "\t\n" or unicodedata.category(ch)[0] != "C")
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class CleanRules:
    max_chars: int = 1000
    max_ratio: float = 3.0  # longer side / shorter side, in characters
    min_chars: int = 1


def clean_pairs(pairs, rules: CleanRules = CleanRules()) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Normalise and filter pairs; returns the kept pairs and how many each rule dropped."""
    kept, seen = [], set()
    dropped = {"empty": 0, "identical": 0, "duplicate": 0, "length": 0, "ratio": 0}
    for src, tgt in pairs:
        src, tgt = normalize(src), normalize(tgt)
        if len(src) < rules.min_chars or len(tgt) < rules.min_chars:
            dropped["empty"] += 1
        elif src == tgt:
            dropped["identical"] += 1
        elif (src, tgt) in seen:
            dropped["duplicate"] += 1
        elif max(len(src), len(tgt)) > rules.max_chars:
            dropped["length"] += 1
        elif max(len(src), len(tgt)) / min(len(src), len(tgt)) > rules.max_ratio:
            dropped["ratio"] += 1
        else:
            seen.add((src, tgt))
            kept.append((src, tgt))
    return kept, dropped


def remove_leakage(train, held_out) -> tuple[list[tuple[str, str]], int]:
    """Drop training pairs whose source sentence is a dev or test source sentence."""
    banned = {src for split in held_out for src, _ in split}
    kept = [p for p in train if p[0] not in banned]
    return kept, len(train) - len(kept)

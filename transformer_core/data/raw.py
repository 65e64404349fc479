"""What a corpus recipe is and what it returns (shared by every recipe module and by prepare)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

Pairs = Sequence[tuple[str, str]]  # a list, or a StreamedPairs over files too large to hold in memory


@dataclass
class RawCorpus:
    langs: tuple[str, str]  # (source side of the pairs, target side), e.g. ("en", "de")
    splits: dict[str, Pairs]  # train / dev / test
    provenance: dict = field(default_factory=dict)
    # splits kept exactly as given, never cleaned or filtered: standard test sets, whose references must
    # stay the published ones for BLEU to be comparable
    verbatim: frozenset = frozenset()


@dataclass(frozen=True)
class Recipe:
    name: str
    langs: tuple[str, str]
    summary: str
    load: Callable[[Path, dict], RawCorpus]
    options: tuple[str, ...] = ()  # the recipe's own option keys (e.g. the files recipe's src, tgt, ...)
    langs_for: Optional[Callable[[dict], tuple[str, str]]] = None  # languages that depend on the options
    cache_options: Optional[Callable[[dict], dict]] = None  # what else identifies a prepared copy

    def languages(self, options: Optional[dict] = None) -> tuple[str, str]:
        return self.langs_for(options or {}) if self.langs_for else self.langs

    def cache_key_options(self, options: dict) -> dict:
        return self.cache_options(options) if self.cache_options else options


class StreamedPairs:
    """Pairs read line by line from line-aligned (source file, target file) couples, in order.

    Nothing is held in memory: every iteration reads the files again.  The length is given (counted
    when the files were staged), so callers can report sizes without a pass over the text.
    """

    def __init__(self, files: Iterable[tuple[Path, Path]], length: int):
        self.files, self.length = list(files), length

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for src, tgt in self.files:
            with open(src, encoding="utf-8", newline="\n") as a, open(tgt, encoding="utf-8", newline="\n") as b:
                for x, y in zip(a, b):
                    yield x.rstrip("\n"), y.rstrip("\n")

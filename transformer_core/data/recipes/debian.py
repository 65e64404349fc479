"""Recipes from Debian packages: LibreOffice help pages and the Ding dictionary's example sentences."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from ..raw import RawCorpus, Recipe

# --- LibreOffice help: paragraphs aligned by (page, paragraph id) ----------------
HELP_LANG_DIRS = {
    "en": ("libreoffice-help-en-us", "en-US"),
    "de": ("libreoffice-help-de", "de"),
    "fr": ("libreoffice-help-fr", "fr"),
}
HELP_DEV_MODULES = ("smath",)  # Math formula editor help
HELP_TEST_MODULES = ("schart",)  # Chart help
_PARA_ID = re.compile(r"^(par|hd)_id")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜÀ-Ý\"'(])")


class _Paragraphs(HTMLParser):
    """Text of every element whose id is a help paragraph id (par_id..., hd_id...)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, str] = {}
        self._stack: list[tuple[str, str | None]] = []
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        ident = dict(attrs).get("id") or ""
        owner = ident if _PARA_ID.match(ident) and not self._open else None
        if owner:
            self._open.append(owner)
            self.paragraphs[owner] = ""
        if tag not in ("br", "img", "input", "meta", "link", "hr"):
            self._stack.append((tag, owner))

    def handle_endtag(self, tag):
        while self._stack:
            open_tag, owner = self._stack.pop()
            if owner:
                self._open.pop()
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self._open:
            self.paragraphs[self._open[0]] += data


def help_paragraphs(page: Path) -> dict[str, str]:
    parser = _Paragraphs()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    return parser.paragraphs


def split_aligned(a: str, b: str) -> list[tuple[str, str]]:
    """Split two aligned paragraphs into sentences where both sides split into the same number."""
    sa, sb = _SENT_SPLIT.split(a), _SENT_SPLIT.split(b)
    return list(zip(sa, sb)) if len(sa) == len(sb) else [(a, b)]


def load_help(other: str):
    def load(data_dir: Path, options: dict) -> RawCorpus:
        from ..fetch import debian_packages

        pkgs = [HELP_LANG_DIRS["en"][0], HELP_LANG_DIRS[other][0]]
        tree, versions = debian_packages(pkgs, data_dir / "_downloads")
        root = tree / "usr/share/libreoffice/help"
        en_root, other_root = root / HELP_LANG_DIRS["en"][1], root / HELP_LANG_DIRS[other][1]
        splits = {"train": [], "dev": [], "test": []}
        for en_page in sorted(en_root.rglob("*.html")):
            rel = en_page.relative_to(en_root)
            other_page = other_root / rel
            if not other_page.exists():
                continue
            module = rel.parts[1] if len(rel.parts) > 2 and rel.parts[0] == "text" else ""
            split = "dev" if module in HELP_DEV_MODULES else "test" if module in HELP_TEST_MODULES else "train"
            a, b = help_paragraphs(en_page), help_paragraphs(other_page)
            for pid in sorted(set(a) & set(b)):
                splits[split].extend(split_aligned(a[pid].strip(), b[pid].strip()))
        return RawCorpus(
            ("en", other), splits, {"packages": versions, "dev": "help module smath", "test": "help module schart"}
        )

    return load


# --- Ding (trans-de-en): example sentences --------------------------------------
_ANNOTATION = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\])")
_SENTENCE_END = re.compile(r"[.!?]$")


def ding_pairs(lines) -> list[tuple[str, str]]:
    """Example sentences from `DE :: EN` lines: sub-entries split by ' | ', alternatives by '; '."""
    pairs = []
    for line in lines:
        if line.startswith("#") or " :: " not in line:
            continue
        de, en = line.split(" :: ", 1)
        de_parts, en_parts = de.split(" | "), en.split(" | ")
        if len(de_parts) != len(en_parts):
            continue
        for d, e in zip(de_parts, en_parts):
            d = _ANNOTATION.sub("", d.split("; ")[0]).strip()
            e = _ANNOTATION.sub("", e.split("; ")[0]).strip()
            if len(e.split()) >= 3 and _SENTENCE_END.search(e) and _SENTENCE_END.search(d):
                pairs.append((e, d))
    return pairs


def load_ding(data_dir: Path, options: dict) -> RawCorpus:
    from ..fetch import debian_packages

    tree, versions = debian_packages(["trans-de-en"], data_dir / "_downloads")
    text = (tree / "usr/share/trans/de-en").read_text(encoding="utf-8", errors="replace")
    pairs = ding_pairs(text.splitlines())
    # held-out: every 50th pair for dev, the next for test (the dictionary is alphabetical)
    splits = {"train": [], "dev": [], "test": []}
    for i, pair in enumerate(pairs):
        splits["dev" if i % 50 == 0 else "test" if i % 50 == 1 else "train"].append(pair)
    return RawCorpus(
        ("en", "de"), splits, {"packages": versions, "dev": "every 50th pair", "test": "every 50th pair, offset 1"}
    )


RECIPES = (
    Recipe(
        "libreoffice-help-en-de",
        ("en", "de"),
        "LibreOffice help pages EN/DE aligned by paragraph id (Debian libreoffice-help-*); dev smath, test schart",
        load_help("de"),
    ),
    Recipe(
        "libreoffice-help-en-fr",
        ("en", "fr"),
        "LibreOffice help pages EN/FR aligned by paragraph id (Debian libreoffice-help-*); dev smath, test schart",
        load_help("fr"),
    ),
    Recipe("ding-en-de", ("en", "de"), "example sentences of the Ding dictionary (Debian trans-de-en)", load_ding),
)

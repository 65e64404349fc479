"""A report as a list of blocks (a heading, a paragraph, bullets, a table, a legend, a figure), drawn once as
Markdown and once as HTML: what a report says is laid out once, and its two files cannot disagree.  Both reports
are drawn through it: Table 3's (analysis.report.blocks) and the search report's (search_report.py).

A paragraph or bullet may mark words **bold** and `code`; the HTML escapes every text and draws the marks as <b>
and <code>.  A table's cells are strings or ``Cell``s: Markdown shows a cell's text, the page draws its marks too (a
verdict's badge, links to rows, a highlight).  A figure is a PNG the report writes beside report.md and inlines
into the page (base64), so that the page works offline and alone.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import pandas as pd

from analysis.data.text import markdown_text

from .markdown import markdown_table

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f3f3f3}
td.diff{background:#fff4c2;font-weight:600}
tr:target{outline:2px solid #1f6feb}
.v{font-weight:700;white-space:nowrap;padding:1px 6px;border-radius:3px}
.v-held{color:#fff;background:#1a7f37}.v-contradicted{color:#fff;background:#cf222e}
.v-mixed{color:#000;background:#f0b000}.v-within-noise{color:#000;background:#d0d7de}
.v-inconclusive,.v-not-measured{color:#000;background:#eaeef2}
.unstable{color:#9a6700;font-weight:700}
.caveat{color:#9a6700;font-size:11px}
.legend span{margin-right:1em}
img{max-width:100%}
code{font-size:11px}
@media print{@page{size:A4 landscape;margin:10mm}body{margin:0;font-size:10px}table{font-size:8px}
 img{max-width:100%;page-break-inside:avoid}h2{page-break-after:avoid}}
"""

ROW_ANCHOR = "row-"  # a table row's anchor on the page: row-NAME, what a Cell's links point at
UNSTABLE_TITLE = "changed in the last half of the budget"


@dataclass(frozen=True)
class Heading:
    level: int  # 1: the title, 2: a section, 3: a figure's
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str  # one line; **bold** and `code` marks


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]  # each one line; **bold** and `code` marks


@dataclass(frozen=True)
class Cell:
    """A table cell: ``text`` is what Markdown shows (with ``flag`` after it); the page draws the marks too."""

    text: str
    badge: str = ""  # a CSS class: the page draws the text as a badge of it (a verdict, an outcome)
    flag: str = ""  # a warning after the text ("⚠ unstable"): the page draws it in its own colour
    links: tuple[str, ...] = ()  # the rows the cell names: the page links each to its row in the main table
    note: str = ""  # a second line on the page under the text (a claim's wording); Markdown leaves it out
    strong: bool = False
    highlight: bool = False  # the page highlights the cell (a knob that differs from the base row)

    def __str__(self) -> str:
        return self.text + (f" {self.flag}" if self.flag else "")


@dataclass(frozen=True, eq=False)
class Table:
    frame: pd.DataFrame  # the cells as they are shown: strings formatted by the report, or Cells
    anchor: str = ""  # a column whose value names each row: the page gives the row the anchor row-VALUE


@dataclass(frozen=True)
class Legend:
    items: tuple[tuple[str, str, str], ...]  # (name, symbol, what it means); a name's badge is badge_class(name)


@dataclass(frozen=True)
class Figure:
    title: str
    name: str  # the PNG's file name beside report.md


Block = Union[Heading, Paragraph, Bullets, Table, Legend, Figure]


def badge_class(verdict: str) -> str:
    """The CSS class of a verdict's badge: v-held, v-within-noise, v-inconclusive, ..."""
    return "v-" + verdict.split(":")[0].replace(" ", "-")


def markdown_lines(blocks: list[Block]) -> list[str]:
    """report.md's lines: each block, then an empty line."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Paragraph):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {x}" for x in b.items))
        elif isinstance(b, Table):
            out.append(markdown_table(b.frame))
        elif isinstance(b, Legend):
            out.append("Legend: " + "; ".join(f"{s} {name}: {what}" for name, s, what in b.items) + ".")
        else:
            out.append(f"![{b.title}]({b.name})")
        out.append("")
    return out


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def bold(text: str) -> str:
    """``text`` escaped for HTML, each pair of ** marks as <b>...</b> and each pair of ` as <code>...</code>; a mark
    without its pair is left as it is (a spec's text cannot leave the rest of the page bold)."""
    return _BOLD.sub(r"<b>\1</b>", _CODE.sub(r"<code>\1</code>", html.escape(text)))


def _flag(flag: str) -> str:
    return f' <span class="unstable" title="{UNSTABLE_TITLE}">{html.escape(flag)}</span>' if flag else ""


def html_cell(value) -> str:
    """One <td>: a string escaped; a Cell with its marks."""
    if not isinstance(value, Cell):
        return f"<td>{html.escape(str(value).strip())}</td>"
    if value.links:
        inner = " ".join(f'<a href="#{ROW_ANCHOR}{html.escape(r)}">{html.escape(r)}</a>' for r in value.links)
    else:
        inner = html.escape(value.text.strip())
    if value.strong:
        inner = f"<b>{inner}</b>"
    if value.badge:
        inner = f'<span class="v {value.badge}">{inner}</span>'
    inner += _flag(value.flag) + (f"<br>{html.escape(value.note)}" if value.note else "")
    return f"<td{' class=diff' if value.highlight else ''}>{inner}</td>"


def html_table(d: pd.DataFrame, anchor: str = "") -> str:
    """The table's cells as the Markdown table shows them (each stripped), escaped, with each Cell's marks."""
    head = "".join(f"<th>{html.escape(str(c).strip())}</th>" for c in d.columns)
    at = list(d.columns).index(anchor) if anchor else None
    rows = []
    for row in d.itertuples(index=False):
        rid = f' id="{ROW_ANCHOR}{html.escape(str(row[at]))}"' if at is not None else ""
        rows.append(f"<tr{rid}>" + "".join(html_cell(v) for v in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _legend(items: tuple[tuple[str, str, str], ...]) -> str:
    out = []
    for name, symbol, what in items:
        badge = f'<span class="v {badge_class(name)}">{html.escape(symbol)} {html.escape(name)}</span>'
        mark = _flag(f"{symbol} {name}").strip() if name == "unstable" else badge
        out.append(f"<span>{mark} {html.escape(what)}</span><br>")
    return f'<div class="legend" id="legend"><b>Legend</b><br>{"".join(out)}</div>'


def html_blocks(blocks: list[Block], figures: dict[str, bytes]) -> list[str]:
    """The page's body, a string per block; a figure missing from ``figures`` is left out."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text.strip())}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{bold(b.text.strip())}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{bold(x.strip())}</li>" for x in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append(html_table(b.frame, b.anchor))
        elif isinstance(b, Legend):
            out.append(_legend(b.items))
        elif b.name in figures:
            png = base64.b64encode(figures[b.name]).decode()
            out.append(f'<img alt="{html.escape(b.title)}" src="data:image/png;base64,{png}">')
    return out


def html_page(title: str, blocks: list[Block], figures: dict[str, bytes], head: str = "",
              after: Sequence[str] = ()) -> str:  # fmt: skip
    """A report's page: one file, the style and the figures inline (works offline), prints on A4; ``head``: more for
    its <head> (a script), ``after``: more of its body after the blocks."""
    body = "".join([*html_blocks(blocks, figures), *after])
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>{head}</head><body>{body}</body></html>")  # fmt: skip


def write_markdown_file(out: Path, blocks: list[Block], figures: dict[str, bytes]) -> None:
    """report.md in ``out`` with its figures beside it; text from a spec gets no control character or HTML tag."""
    for name, png in figures.items():
        (out / name).write_bytes(png)
    (out / "report.md").write_text(markdown_text("\n".join(markdown_lines(blocks))))

"""A report as a list of blocks (a heading, a paragraph, a table, a figure), drawn once as Markdown and once as HTML:
what the report says is laid out once, and its two files cannot disagree.  The search report's (search_report.py).

A paragraph may mark words **bold**; the HTML escapes every text and draws the marks as <b>.  A figure is a PNG the
report writes beside report.md and inlines into the page (base64), so that the page works offline and alone.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Union

import pandas as pd

from .markdown import markdown_table


@dataclass(frozen=True)
class Heading:
    level: int  # 1: the title, 2: a section, 3: a figure's
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str  # one line; **bold** marks


@dataclass(frozen=True, eq=False)
class Table:
    frame: pd.DataFrame  # the cells as they are shown (strings, formatted by the report)


@dataclass(frozen=True)
class Figure:
    title: str
    name: str  # the PNG's file name beside report.md


Block = Union[Heading, Paragraph, Table, Figure]


def markdown_lines(blocks: list[Block]) -> list[str]:
    """report.md's lines: each block, then an empty line."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Paragraph):
            out.append(b.text)
        elif isinstance(b, Table):
            out.append(markdown_table(b.frame))
        else:
            out.append(f"![{b.title}]({b.name})")
        out.append("")
    return out


def bold(text: str) -> str:
    """``text`` escaped for HTML, each pair of ** marks as <b>...</b>."""
    text = html.escape(text)
    while "**" in text:
        text = text.replace("**", "<b>", 1).replace("**", "</b>", 1)
    return text


def html_table(d: pd.DataFrame) -> str:
    """The table's cells as the Markdown table shows them (each stripped), escaped."""
    head = "".join(f"<th>{html.escape(str(c).strip())}</th>" for c in d.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v).strip())}</td>" for v in row) + "</tr>"
        for row in d.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def html_blocks(blocks: list[Block], figures: dict[str, bytes]) -> list[str]:
    """The page's body, a string per block; a figure missing from ``figures`` is left out."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text.strip())}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{bold(b.text.strip())}</p>")
        elif isinstance(b, Table):
            out.append(html_table(b.frame))
        elif b.name in figures:
            png = base64.b64encode(figures[b.name]).decode()
            out.append(f'<img alt="{html.escape(b.title)}" src="data:image/png;base64,{png}">')
    return out

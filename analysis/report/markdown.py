"""A table as Markdown: the one writer of the reports' tables (report.md, the search report)."""

from __future__ import annotations

import pandas as pd

from analysis.data.text import markdown_text, printable


def _cell(value) -> str:
    """One cell: on one line (control characters, newlines included, written as \\xNN), '|' escaped, an HTML tag's
    '<' written as '&lt;' (analysis.data.text.markdown_text)."""
    return markdown_text(printable(value)).replace("|", "\\|")


def markdown_table(d: pd.DataFrame) -> str:
    """A header row, a rule and one line per row; each cell on one line, its '|' escaped and no HTML tag in it."""
    lines = ["| " + " | ".join(map(_cell, d.columns)) + " |", "|" + "---|" * len(d.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in d.itertuples(index=False)]
    return "\n".join(lines)

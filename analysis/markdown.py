"""A table as Markdown: the one writer of the reports' tables (report.md, the search report)."""

from __future__ import annotations

import pandas as pd


def markdown_table(d: pd.DataFrame) -> str:
    """A header row, a rule and one line per row; a '|' inside a cell is escaped."""
    lines = ["| " + " | ".join(map(str, d.columns)) + " |", "|" + "---|" * len(d.columns)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in d.itertuples(index=False)]
    return "\n".join(lines)

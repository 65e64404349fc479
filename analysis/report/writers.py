"""report.md, a self-contained report.html (plots embedded, no network), table.csv and table.tex, written whole.

``write_report`` builds the report's model once (analysis.report.model: collect, judge, model) and hands it to
one writer per format; each writer only draws the model.  Reads a local sweep directory only; the CLI pulls a URI
sweep to a local view first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analysis.data.files import check_replaceable, read_once, whole_folder
from analysis.data.text import to_csv, without_controls

from .blocks import report_blocks
from .document import write_markdown_file
from .html_report import page
from .model import ReportModel, build


def _latex(d: pd.DataFrame) -> str:
    subs = {"\\": "\\textbackslash{}", "_": "\\_", "%": "\\%", "&": "\\&", "±": "$\\pm$", "Δ": "$\\Delta$"}

    def esc(s):
        s = str(s)
        for a, b in subs.items():
            s = s.replace(a, b)
        return s

    lines = ["\\begin{tabular}{" + "l" * len(d.columns) + "}", "\\hline", " & ".join(map(esc, d.columns)) + " \\\\"]
    lines += ["\\hline"] + [" & ".join(esc(v) for v in row) + " \\\\" for row in d.itertuples(index=False)]
    return "\n".join(lines + ["\\hline", "\\end{tabular}", ""])


def write_report(sweep_dir: str | Path, out_dir: str | Path | None = None, samples: int = 1000,
                 family: str = "report", method: str = "bh", evidence: str | None = None,
                 also: Callable[[Path], object] | None = None) -> Path:  # fmt: skip
    """Write the report of a local sweep directory into out_dir (default SWEEP_DIR/report) whole: into a
    temporary folder beside it, swapped in once every file (and what ``also`` writes into the folder it is given)
    is written, so an interrupted report leaves the previous one (analysis.data.files.whole_folder).  ``family``,
    ``method`` and ``evidence`` choose how verdicts are decided (analysis.stats.rule.Rule)."""
    out = Path(out_dir) if out_dir else Path(sweep_dir) / "report"
    check_replaceable(out)  # a folder of other files: refused before the report is computed
    with read_once():  # each run's files read once, one state of a running sweep
        model = build(sweep_dir, samples, family, method, evidence)
    with whole_folder(out) as tmp:
        write_csv(model, tmp)
        write_latex(model, tmp)
        blocks, figures = report_blocks(model)  # laid out once: report.md and report.html draw the same
        write_markdown_file(tmp, blocks, figures)
        (tmp / "report.html").write_text(without_controls(page(model, blocks, figures)))
        if also is not None:
            also(tmp)
    return out


def write_csv(model: ReportModel, out: Path) -> None:
    """table.csv, claims.csv, seeds.csv; versus-base.csv when rows no claim covers were judged; evalsets.csv and
    claims-SET.csv for a translation sweep."""
    if model.evalsets is not None:
        to_csv(model.evalsets.numbers, out / "evalsets.csv")
        for name, table in model.evalsets.claims.items():
            to_csv(table, out / f"claims-{name}.csv")
    to_csv(model.csv_table, out / "table.csv")
    to_csv(model.claims, out / "claims.csv")
    if len(model.versus):
        to_csv(model.versus, out / "versus-base.csv")
    to_csv(model.seeds, out / "seeds.csv")


def write_latex(model: ReportModel, out: Path) -> None:
    """table.tex: the Table 3 layout as a LaTeX tabular."""
    (out / "table.tex").write_text(_latex(model.display))


def write_markdown(model: ReportModel, out: Path) -> None:
    """report.md, with its figures beside it (forest.png, ...): the report's blocks (analysis.report.blocks)."""
    write_markdown_file(out, *report_blocks(model))

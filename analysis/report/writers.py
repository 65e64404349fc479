"""report.md, a self-contained report.html (plots embedded, no network), table.csv and table.tex, written whole.

``write_report`` builds the report's model once (analysis.report.model: collect, judge, model) and hands it to
one writer per format; each writer only draws the model.  Reads a local sweep directory only; the CLI pulls a URI
sweep to a local view first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analysis.data.files import check_replaceable, read_once, whole_folder
from analysis.data.text import markdown_text, to_csv, without_controls

from .html_report import render
from .markdown import markdown_table
from .model import ReportModel, build, cell, facts, legend, measured, versus_summary
from .plots import FOREST


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


def _claims_block(claims: pd.DataFrame) -> list[str]:
    shown, line = measured(claims)
    return ([markdown_table(_claims_markdown(shown)), ""] if len(shown) else []) + ([line, ""] if line else [])


def _claims_markdown(claims: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "claim": claims["claim"],
            "reading": claims["reading"],
            "verdict": [
                f"{s} {v}" + (" ⚠ unstable" if u else "")
                for s, v, u in zip(claims["symbol"], claims["verdict"], claims["unstable"])
            ],
            "trajectory": claims["trajectory"],
            "rows": claims["rows"],
            "detectable": [cell(x, 3) for x in claims.get("detectable", pd.Series([float("nan")] * len(claims)))],
            "evidence": claims["summary"] + ": " + claims["evidence"],
            "caveat": claims["caveat"],
        }
    )


def _versus_block(vb: pd.DataFrame, rule: str) -> list[str]:
    if not len(vb):
        return []
    table = pd.DataFrame({
        "row": vb["row"], "reading": vb["reading"],
        "vs base": [o + (" ⚠ unstable" if u else "") for o, u in zip(vb["outcome"], vb["unstable"])],
        "trajectory": vb["trajectory"], "evidence": vb["evidence"],
    })  # fmt: skip
    return ["## Each row against base", "", rule, "", *versus_summary(vb), "", markdown_table(table), ""]


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
        write_markdown(model, tmp)
        (tmp / "report.html").write_text(without_controls(render(model)))
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
    """report.md, with the forest plot beside it (forest.png)."""
    h, lm = model.header, model.lm
    forest = []
    if model.images.get(FOREST):  # the picture before the tables, also beside report.md
        (out / "forest.png").write_bytes(base64.b64decode(model.images[FOREST]))
        whose = ", its seeds and the paper's" if model.shape.papers else " and its seeds"
        forest = [f"![{FOREST}: each row's difference from base{whose}](forest.png)", ""]
    set_sections = []
    if model.evalsets is not None:
        for name, table in model.evalsets.claims.items():
            if len(table):  # a spec that states no claims has none to judge on the sets either
                set_sections += [f"## {model.shape.claims_heading(name)}", "", *_claims_block(table)]
        if model.evalsets.notes:
            set_sections += ["## Evaluation sets", "", *[f"- {n}" for n in model.evalsets.notes], ""]
    legend_text = "; ".join(f"{s} {name}: {what}" for name, s, what in legend(model.shape.paper_claims))
    problems = model.problems
    shape = model.shape
    claims = [f"## {shape.claims_heading()}", "", f"Legend: {legend_text}.", "", model.rule_text, "",
              *_claims_block(model.claims)] if len(model.claims) else []  # fmt: skip
    md = [f"# {shape.heading(h['sweep'])}", "", *([shape.description, ""] if shape.description else []), facts(h),
          "", *model.budget_lines(), "", *forest, f"Profile rules: `{json.dumps(h['profile_rules'])}`", "",
          f"## {shape.table_heading}", "", markdown_table(model.display), "", model.notes, "",
          *claims, *_versus_block(model.versus, model.versus_rule), *set_sections,
          "## Failed, stopped or missing trials", "",
          markdown_table(problems) if len(problems) else "None: every trial finished.", "",
          "## Plots", "", "See report.html (learning curves per group" + ("" if lm else ", BLEU against parameters")
          + ").", "", *([] if lm or not h["sacrebleu"] else [f"sacrebleu: `{h['sacrebleu']}`", ""])]  # fmt: skip
    (out / "report.md").write_text(markdown_text("\n".join(md)))  # spec text: no control character or HTML tag

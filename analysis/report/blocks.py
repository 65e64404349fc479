"""The Table 3 report as blocks (analysis.report.document): report.md and report.html draw this one list, so the two
files say the same in the same order.  It draws the report's model (analysis.report.model) and computes nothing."""

from __future__ import annotations

import base64
import json
import re

import pandas as pd

from .document import Block, Bullets, Cell, Figure, Heading, Legend, Paragraph, Table, badge_class
from .model import ReportModel, cell, facts, legend, measured, versus_summary
from .plots import FOREST

UNSTABLE = "⚠ unstable"
HIGHLIGHTED = "In report.html, the knobs that differ from the base row are highlighted."
VERSUS_CLASS = {"better than base": "v-held", "worse than base": "v-contradicted"}


def figure_name(title: str) -> str:
    """The PNG a figure is written to beside report.md: forest.png for the forest plot, else its title's words."""
    return "forest.png" if title == FOREST else re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") + ".png"


def report_blocks(model: ReportModel) -> tuple[list[Block], dict[str, bytes]]:
    """The report's blocks in order, and its figures by file name (PNG bytes)."""
    h, shape = model.header, model.shape
    figures = {figure_name(t): base64.b64decode(png) for t, png in model.images.items() if png}
    out: list[Block] = [Heading(1, shape.heading(h["sweep"]))]
    out += [Paragraph(shape.description)] if shape.description else []
    out += [Paragraph(facts(h)), *lines(model.budget_lines())]
    if figure_name(FOREST) in figures:  # the picture before the tables
        whose = ", its seeds and the paper's" if shape.papers else " and its seeds"
        out += [Heading(2, FOREST.capitalize()),
                Figure(f"{FOREST}: each row's difference from base{whose}", figure_name(FOREST))]  # fmt: skip
    out += [Paragraph(f"Profile rules: `{json.dumps(h['profile_rules'])}`"),
            Heading(2, shape.table_heading), main_table(model), Paragraph(f"{model.notes} {HIGHLIGHTED}")]  # fmt: skip
    if len(model.claims):
        out += [Heading(2, shape.claims_heading()), Legend(tuple(legend(shape.paper_claims))),
                Paragraph(model.rule_text), *claims_blocks(model.claims)]  # fmt: skip
    out += versus_blocks(model.versus, model.versus_rule)
    for name, table in model.set_claims.items():
        if len(table):  # a spec that states no claims has none to judge on the sets either
            out += [Heading(2, shape.claims_heading(name)), *claims_blocks(table)]
    if model.evalsets is not None and model.evalsets.notes:
        out += [Heading(2, "Evaluation sets"), Bullets(tuple(model.evalsets.notes))]
    out += [Heading(2, "Failed, stopped or missing trials"),
            Table(model.problems) if len(model.problems) else Paragraph("None: every trial finished.")]  # fmt: skip
    plots = [t for t in model.images if t != FOREST and figure_name(t) in figures]
    out += [Heading(2, "Plots")] if plots else []
    for title in plots:
        out += [Heading(3, title), Figure(title, figure_name(title))]
    if not model.lm and h.get("sacrebleu"):
        out.append(Paragraph(f"sacrebleu: `{h['sacrebleu']}`"))
    return out, figures


def lines(text: list[str]) -> list[Block]:
    """Header lines as blocks: a run of '- ' lines as one list of bullets, each other line a paragraph."""
    out: list[Block] = []
    for line in text:
        if not line.startswith("- "):
            out.append(Paragraph(line))
        elif out and isinstance(out[-1], Bullets):  # the list goes on
            out[-1] = Bullets((*out[-1].items, line[2:]))
        else:
            out.append(Bullets((line[2:],)))
    return out


def main_table(model: ReportModel) -> Table:
    """The Table 3 layout, one row per row of the sweep (anchored, for the claims' links); a knob that differs from
    the base row is highlighted on the page."""
    d = model.display
    knobs = list(d.columns[1 : 1 + len(model.table.attrs.get("knobs", []))])
    base = d[d["row"] == "base"]
    ref = base.iloc[0] if len(base) else None
    shown = d.copy()
    for c in knobs:
        shown[c] = [Cell(str(v), highlight=ref is not None and v != ref[c]) for v in d[c]]
    return Table(shown, anchor="row")


def claims_blocks(claims: pd.DataFrame) -> list[Block]:
    """A claims table (dev's, or an evaluation set's): its measured claims, and a line on those not measured."""
    shown, line = measured(claims)
    table = pd.DataFrame({
        "claim": [Cell(c, strong=True, note=t) for c, t in zip(shown["claim"], shown["text"])],
        "reading": shown["reading"],
        "verdict": [Cell(f"{s} {v}", badge=badge_class(v), flag=UNSTABLE if u else "")
                    for s, v, u in zip(shown["symbol"], shown["verdict"], shown["unstable"])],
        "trajectory": shown["trajectory"],
        "rows": [Cell(r, links=tuple(r.split(","))) for r in shown["rows"]],
        "detectable": [cell(x, 3) for x in shown.get("detectable", pd.Series([float("nan")] * len(shown)))],
        "evidence": shown["summary"] + ": " + shown["evidence"],
        "caveat": shown["caveat"],
    })  # fmt: skip
    out: list[Block] = [Table(table)] if len(shown) else []
    return out + ([Paragraph(line)] if line else [])


def versus_blocks(vb: pd.DataFrame, rule: str) -> list[Block]:
    """Rows that no claim covers, each against base (model.versus_summary, tables.rows_against_base)."""
    if not len(vb):
        return []
    table = pd.DataFrame({
        "row": [Cell(str(r), links=(str(r),)) for r in vb["row"]], "reading": vb["reading"],
        "vs base": [Cell(o, badge=VERSUS_CLASS.get(o, "v-within-noise"), flag=UNSTABLE if u else "")
                    for o, u in zip(vb["outcome"], vb["unstable"])],
        "trajectory": vb["trajectory"], "evidence": vb["evidence"],
    })  # fmt: skip
    return [Heading(2, "Each row against base"), Paragraph(rule), Bullets(tuple(versus_summary(vb))), Table(table)]

"""The HTML page of the report: one file, styles and images inline (works offline), prints on A4.  It draws the
report's model (analysis.report.model) and computes nothing of its own."""

from __future__ import annotations

import html

import pandas as pd

from .model import ReportModel, legend, versus_summary
from .plots import FOREST

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


def _cls(verdict: str) -> str:
    return "v-" + verdict.split(":")[0].replace(" ", "-")


def _verdict_html(symbol: str, verdict: str, unstable: bool) -> str:
    out = f'<span class="v {_cls(verdict)}">{html.escape(symbol)} {html.escape(verdict)}</span>'
    return out + (' <span class="unstable" title="changed in the last half of the budget">⚠ unstable</span>'
                  if unstable else "")  # fmt: skip


def _main_table(d: pd.DataFrame, t: pd.DataFrame) -> str:
    """The Table 3 layout; knob cells that differ from the base row are highlighted; rows have anchors."""
    knob_labels = [c for c in d.columns[1 : 1 + len(t.attrs.get("knobs", []))]]
    base = d[d["row"] == "base"]
    ref = base.iloc[0] if len(base) else None
    head = "".join(f"<th>{html.escape(c)}</th>" for c in d.columns)
    body = []
    for _, r in d.iterrows():
        cells = []
        for c in d.columns:
            diff = ref is not None and c in knob_labels and r[c] != ref[c]
            cells.append(f"<td{' class=diff' if diff else ''}>{html.escape(str(r[c]))}</td>")
        body.append(f'<tr id="row-{html.escape(str(r["row"]))}">' + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _claims_table(claims: pd.DataFrame) -> str:
    head = "<tr><th>claim</th><th>reading</th><th>verdict</th><th>trajectory over the budget</th><th>rows</th>" \
           "<th>evidence</th></tr>"  # fmt: skip
    body = []
    for _, c in claims.iterrows():
        rows = " ".join(f'<a href="#row-{html.escape(r)}">{html.escape(r)}</a>' for r in c["rows"].split(","))
        caveat = f'<div class="caveat">{html.escape(c["caveat"])}</div>' if c["caveat"] else ""
        body.append(
            f"<tr><td><b>{html.escape(c['claim'])}</b><br>{html.escape(c['text'])}</td>"
            f"<td>{html.escape(c['reading'])}</td><td>{_verdict_html(c['symbol'], c['verdict'], c['unstable'])}"
            f"{caveat}</td><td>{html.escape(c['trajectory'])}</td><td>{rows}</td>"
            f"<td>{html.escape(c['summary'])}: {html.escape(c['evidence'])}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


VERSUS_CLASS = {"better than base": "v-held", "worse than base": "v-contradicted"}


def _versus_section(rule: str, summary: list[str], vb: pd.DataFrame) -> list[str]:
    """Rows that no claim covers, each against base (report.versus_summary / tables.rows_against_base)."""
    body = []
    for _, r in vb.iterrows():
        badge = f'<span class="v {VERSUS_CLASS.get(r["outcome"], "v-within-noise")}">{html.escape(r["outcome"])}</span>'
        badge += ' <span class="unstable">⚠ unstable</span>' if r["unstable"] else ""
        row = html.escape(str(r["row"]))
        body.append(f'<tr><td><a href="#row-{row}">{row}</a></td>'
                    f"<td>{html.escape(str(r['reading']))}</td><td>{badge}</td><td>{html.escape(str(r['trajectory']))}</td>"
                    f"<td>{html.escape(str(r['evidence']))}</td></tr>")  # fmt: skip
    head = "<tr><th>row</th><th>reading</th><th>vs base</th><th>trajectory over the budget</th><th>evidence</th></tr>"
    items = "".join(f"<li>{html.escape(x[2:])}</li>" for x in summary)
    return ["<h2>Each row against base</h2>", f"<p>{html.escape(rule)}</p>", f"<ul>{items}</ul>",
            f"<table>{head}{''.join(body)}</table>"]  # fmt: skip


def _legend(legend) -> str:
    items = "".join(
        f"<span>{_verdict_html(sym, name, False) if name != 'unstable' else '<span class=unstable>⚠ unstable</span>'}"
        f" {html.escape(what)}</span><br>"
        for name, sym, what in legend
    )
    return f'<div class="legend" id="legend"><b>Legend</b><br>{items}</div>'


def render(model: ReportModel) -> str:
    """report.html of the model."""
    h, d, images, problems = model.header, model.display, model.images, model.problems

    def md(s: str) -> str:  # the header lines use **bold** and "- " bullets
        s = html.escape(s)
        while "**" in s:
            s = s.replace("**", "<b>", 1).replace("**", "</b>", 1)
        return f"<li>{s[2:]}</li>" if s.startswith("- ") else f"<p>{s}</p>"

    facts = (f"Sweep <b>{html.escape(str(h['sweep']))}</b> ({html.escape(str(h['spec']))}), profile "
             f"<b>{html.escape(str(h['profile']))}</b>: {h['finished']}/{h['trials']} trials finished; corpus "
             f"{html.escape(str(h['corpus']))}; {html.escape(h['hardware'])}, torch {html.escape(str(h['torch']))}; "
             f"{h['device_hours']:.2f} device-hours"
             + (f", {html.escape(h['largest_memory'])}" if h.get("largest_memory") else "") + ".")  # fmt: skip
    forest = images.get(FOREST)
    body = [
        f"<h1>{html.escape(model.shape.heading(h['sweep']))}</h1>",
        *([f"<p>{html.escape(model.shape.description)}</p>"] if model.shape.description else []),
        f"<p>{facts}</p>",
        *(md(x) for x in model.budget_lines()),
        *(
            [f'<h2>{FOREST.capitalize()}</h2><img alt="{FOREST}" src="data:image/png;base64,{forest}">']
            if forest
            else []
        ),
        *(
            [
                f"<h2>{html.escape(model.shape.claims_heading())}</h2>",
                _legend(legend(model.shape.paper_claims)),
                f"<p>{html.escape(model.rule_text)}</p>",
                _claims_table(model.shown_claims),
            ]
            if len(model.claims)
            else []
        ),  # fmt: skip
        *(_versus_section(model.versus_rule, versus_summary(model.versus), model.versus) if len(model.versus) else []),
        f"<h2>{html.escape(model.shape.table_heading)}</h2>",
        _main_table(d, model.table),
        f"<p>{html.escape(model.notes)} Highlighted: knobs that differ from the base row.</p>",
        "<h2>Failed, stopped or missing trials</h2>",
        problems.to_html(index=False) if len(problems) else "<p>None: every trial finished.</p>",
        "<h2>Plots</h2>",
    ]
    body += [f'<h3>{html.escape(k)}</h3><img alt="{html.escape(k)}" src="data:image/png;base64,{v}">'
             for k, v in images.items() if k != FOREST]  # fmt: skip
    if h.get("sacrebleu"):  # none in a language-model sweep
        body.append(f"<p><code>sacrebleu {html.escape(str(h['sacrebleu']))}</code></p>")
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(str(h['sweep']))}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )

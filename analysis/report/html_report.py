"""The HTML page of the report: one file, styles and images inline (works offline), prints on A4.  It draws the
report's blocks (analysis.report.blocks, the same report.md draws) and computes nothing of its own."""

from __future__ import annotations

import html

from .blocks import report_blocks
from .document import html_blocks
from .model import ReportModel

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


def render(model: ReportModel) -> str:
    """report.html of the model: the report's blocks (analysis.report.blocks), figures inline."""
    blocks, figures = report_blocks(model)
    sweep = html.escape(str(model.header["sweep"]))
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{sweep}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(html_blocks(blocks, figures))}</body></html>"
    )

"""A report's blocks drawn as Markdown and as HTML (analysis.report.document): the same text in both, escaped in
HTML."""

import pandas as pd

from analysis.report.document import Figure, Heading, Paragraph, Table, html_blocks, markdown_lines

BLOCKS = [
    Heading(1, "Search report: s"),
    Paragraph("Best **a < b** & more"),
    Table(pd.DataFrame({"k": ["x|y", " z "], "v": ["1.5", "-"]})),
    Heading(3, "Slices"),
    Figure("Slices", "slices.png"),
    Figure("Missing", "missing.png"),
]


def test_markdown_is_each_block_then_an_empty_line():
    assert markdown_lines(BLOCKS) == [
        "# Search report: s", "", "Best **a < b** & more", "",
        "| k | v |\n|---|---|\n| x\\|y | 1.5 |\n|  z  | - |", "",
        "### Slices", "", "![Slices](slices.png)", "", "![Missing](missing.png)", "",
    ]  # fmt: skip


def test_html_escapes_text_draws_bold_and_inlines_only_figures_it_has():
    body = html_blocks(BLOCKS, {"slices.png": b"PNG"})
    assert body[:2] == ["<h1>Search report: s</h1>", "<p>Best <b>a &lt; b</b> &amp; more</p>"]
    assert body[2] == ("<table><thead><tr><th>k</th><th>v</th></tr></thead><tbody><tr><td>x|y</td><td>1.5</td></tr>"
                       "<tr><td>z</td><td>-</td></tr></tbody></table>")  # fmt: skip
    assert body[3:] == ["<h3>Slices</h3>", '<img alt="Slices" src="data:image/png;base64,UE5H">']

"""A report's blocks drawn as Markdown and as HTML (analysis.report.document): the same text in both, escaped in
HTML."""

import pandas as pd

from analysis.report.document import (
    Bullets,
    Cell,
    Figure,
    Heading,
    Legend,
    Paragraph,
    Table,
    badge_class,
    html_blocks,
    markdown_lines,
)

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


def test_a_marked_cell_reads_as_its_text_in_markdown_and_with_its_marks_on_the_page():
    """A verdict's badge, its unstable flag, links to rows, a second line and a highlight: Markdown shows the text
    (and the flag), the page draws each mark, escaped; a table with an anchor column gives each row its anchor."""
    frame = pd.DataFrame({
        "row": ["A<1", "base"],
        "verdict": [Cell("✓ held", badge=badge_class("held"), flag="⚠ unstable"), Cell("≈ within noise",
                    badge=badge_class("within noise"))],
        "rows": [Cell("A<1,base", links=("A<1", "base")), "-"],
        "knob": [Cell("8", highlight=True, strong=True, note="a & b"), "4"],
    })  # fmt: skip
    md = markdown_lines([Table(frame, anchor="row"), Bullets(("one `x`", "**two**")), Legend((("held", "✓", "ok"),))])
    assert md[0].splitlines()[2] == "| A<1 | ✓ held ⚠ unstable | A<1,base | 8 |"
    assert md[2:] == ["- one `x`\n- **two**", "", "Legend: ✓ held: ok.", ""]
    table, bullets, legend = html_blocks([Table(frame, anchor="row"), Bullets(("one `x`", "**two**")),
                                          Legend((("held", "✓", "ok"),))], {})  # fmt: skip
    assert '<tr id="row-A&lt;1">' in table and '<tr id="row-base">' in table
    assert '<span class="v v-held">✓ held</span> <span class="unstable"' in table
    assert '<span class="v v-within-noise">≈ within noise</span>' in table
    assert '<a href="#row-A&lt;1">A&lt;1</a> <a href="#row-base">base</a>' in table
    assert "<td class=diff><b>8</b><br>a &amp; b</td>" in table
    assert bullets == "<ul><li>one <code>x</code></li><li><b>two</b></li></ul>"
    assert legend.startswith('<div class="legend" id="legend">') and '<span class="v v-held">✓ held</span> ok' in legend


def test_a_mark_without_its_pair_is_left_as_it_is():
    """A spec's text with one ** (or one `) does not leave the rest of the page bold (or in code)."""
    body = html_blocks([Paragraph("x**2 and `y"), Paragraph("**b** `c`")], {})
    assert body == ["<p>x**2 and `y</p>", "<p><b>b</b> <code>c</code></p>"]

"""`tsweep knobs`: the knob table (transformer_core/knobs.py), as text or as Markdown (docs/knobs.md)."""

from __future__ import annotations

MARKDOWN_HEAD = """# Knobs

Every key a spec row, a profile or `--set` can configure, one row of the knob table in
`transformer_core/knobs.py` each.  *where*: the part of the run configuration it belongs to (model, recipe,
data, run; spec: only in a spec, in the paper's units).  *profile scaling*: how a scale profile maps the paper's
value onto its budget (width, depth, steps; none: taken as written).  *Table 3*: one of the paper's columns.

This page is generated: `tsweep knobs --markdown > docs/knobs.md` (a test fails when it is out of date).
"""


def knobs_markdown() -> str:
    """docs/knobs.md: a short legend and the knob table."""
    from transformer_core.knobs import markdown_table

    return f"{MARKDOWN_HEAD}\n{markdown_table()}\n"


def cmd_knobs(args) -> int:
    from transformer_core.knobs import KNOBS

    if args.markdown:
        print(knobs_markdown(), end="")
        return 0
    print(f"{'key':<18} {'where':<7} {'scaling':<8} {'Table 3':<8} help")
    for k in KNOBS:
        print(f"{k.name:<18} {k.where:<7} {k.scaling:<8} {'yes' if k.paper else '':<8} {k.help}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("knobs", help="the knob table: every configurable key, its category, scaling and help")
    p.add_argument("--markdown", action="store_true", help="as Markdown: the page docs/knobs.md")
    p.set_defaults(func=cmd_knobs)

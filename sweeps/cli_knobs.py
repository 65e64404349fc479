"""`tsweep knobs`: the knob table (transformer_core/knobs.py), as text or as Markdown (docs/knobs.md)."""

from __future__ import annotations


def cmd_knobs(args) -> int:
    from transformer_core.knobs import KNOBS, markdown_table

    if args.markdown:
        print(markdown_table())
        return 0
    print(f"{'key':<18} {'where':<7} {'scaling':<8} {'Table 3':<8} help")
    for k in KNOBS:
        print(f"{k.name:<18} {k.where:<7} {k.scaling:<8} {'yes' if k.paper else '':<8} {k.help}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("knobs", help="the knob table: every configurable key, its category, scaling and help")
    p.add_argument("--markdown", action="store_true", help="as a Markdown table (the README's key list)")
    p.set_defaults(func=cmd_knobs)

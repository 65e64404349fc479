"""Arguments several subcommands share, declared and read in one place (not a subcommand itself)."""

from __future__ import annotations

import argparse

SET_EXAMPLE = "--set N=2 d_model=128 (or repeated: --set N=2 --set d_model=128)"


def add_set_argument(parser, what: str = "override config fields") -> None:
    """``--set KEY=VALUE ...``: several pairs after one flag, the flag repeated, or both."""
    parser.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE", help=f"{what}: {SET_EXAMPLE}")


def set_values(args) -> dict:
    """The ``--set`` pairs of parsed arguments as {key: value text} (later pairs win)."""
    from transformer_core.run_config import parse_assignments

    return parse_assignments(getattr(args, "set", None) or [])


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a description or epilog keeps its paragraphs (blank lines) and its indented
    lines (lists, e.g. the profiles) as written; other lines are filled to the terminal's width as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out, words = [], []

        def flush():
            if words:
                out.append(super(HelpFormatter, self)._fill_text(" ".join(words), width, indent))
                words.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line[0].isspace():
                flush()
                out.append(indent + line.rstrip())
            else:
                words.append(line.strip())
        flush()
        return "\n".join(out)


def add_profile_argument(parser, default, what: str = "the scale profile") -> None:
    """``--profile NAME``, and the list of profiles with their descriptions (profiles.yaml) below the options."""
    from .profiles import PROFILES_HELP, profiles_described

    shown = f" (default {default})" if default else ""
    parser.add_argument("--profile", default=default, help=f"{what}{shown}: {PROFILES_HELP}")
    listing = "profiles (sweeps/specs/profiles.yaml):\n" + profiles_described()
    parser.epilog = f"{parser.epilog}\n\n{listing}" if parser.epilog else listing
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = HelpFormatter

"""Arguments several subcommands share, declared and read in one place (not a subcommand itself)."""

from __future__ import annotations

SET_EXAMPLE = "--set N=2 d_model=128 (or repeated: --set N=2 --set d_model=128)"


def add_set_argument(parser, what: str = "override config fields") -> None:
    """``--set KEY=VALUE ...``: several pairs after one flag, the flag repeated, or both."""
    parser.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE", help=f"{what}: {SET_EXAMPLE}")


def set_values(args) -> dict:
    """The ``--set`` pairs of parsed arguments as {key: value text} (later pairs win)."""
    from transformer_core.run_config import parse_assignments

    return parse_assignments(getattr(args, "set", None) or [])

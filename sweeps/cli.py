"""`tsweep`: the one console script (params, data, train, plan, run, status, report)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from transformer_core.errors import UserError


def cmd_params(args: argparse.Namespace) -> int:
    import dataclasses

    from analysis.paper import load_table3, row_overrides
    from transformer_core import PRESETS, closed_form_parameters

    print(f"Table 3 parameter counts, shared vocabulary of {args.vocab:,} (three-way tied embeddings)")
    print(f"{'row':<6}{'N':>3}{'d_model':>8}{'d_ff':>6}{'h':>4}{'d_k':>5}{'d_v':>5}  {'ours (M)':>9}  {'paper (M)':>9}")
    for row in load_table3():
        preset = "big" if row["row"] == "big" else "base"
        cfg = dataclasses.replace(PRESETS[preset], **row_overrides(row))
        ours = closed_form_parameters(cfg, args.vocab) / 1e6
        paper = "" if row["params_millions"] is None else f"{row['params_millions']:>9}"
        print(
            f"{row['row']:<6}{cfg.N:>3}{cfg.d_model:>8}{cfg.d_ff:>6}{cfg.h:>4}{cfg.d_k:>5}{cfg.d_v:>5}"
            f"  {ours:>9.1f}  {paper:>9}"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tsweep", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("params", help="Table 3 rows with our parameter count beside the paper's")
    p.add_argument("--vocab", type=int, default=37000, help="shared vocabulary size (paper: about 37000)")
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("knobs", help="the knob table: every configurable key, its category, scaling and help")
    p.add_argument("--markdown", action="store_true", help="as a Markdown table (the README's key list)")
    p.set_defaults(func=cmd_knobs)

    for register in _extensions():
        register(sub)
    return parser


def cmd_knobs(args: argparse.Namespace) -> int:
    from transformer_core.knobs import KNOBS, markdown_table

    if args.markdown:
        print(markdown_table())
        return 0
    print(f"{'key':<18} {'where':<7} {'scaling':<8} {'Table 3':<8} help")
    for k in KNOBS:
        print(f"{k.name:<18} {k.where:<7} {k.scaling:<8} {'yes' if k.paper else '':<8} {k.help}")
    return 0


def _extensions():
    """Subcommands defined beside the code they drive."""
    from . import cli_bench, cli_data, cli_eval, cli_sweep, cli_train  # noqa: F401

    return [
        cli_data.register,
        cli_train.register,
        cli_sweep.register,
        cli_sweep.register_report,
        cli_eval.register,
        cli_bench.register,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.func(args) or 0
    except UserError as exc:
        print(f"tsweep {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"tsweep {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head or a closed pager: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())

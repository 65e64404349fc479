"""`tsweep`: the one console script.

Every subcommand lives in its own module of this package, imported below and listed in COMMANDS, and registers
itself on the parser with ``register(subparsers)``; options several commands share are declared once in
args.py:

  params.py     params        parameter counts of Table 3's rows or a spec's rows
  knobs.py      knobs         the knob table (--markdown: docs/knobs.md)
  data.py       data          prepare, info and list corpora
  train.py      train         train and evaluate one configuration
  sweep.py      plan          a spec's trial table and time estimate, nothing run
                run           run a sweep with Ray Tune
                status        each trial's state (--watch: the live view)
  report.py     report        a sweep's report (Table 3 layout, or a search's)
  dashboard.py  dashboard     MLflow's UI and optuna-dashboard on one sweep, on 127.0.0.1
  evaluate.py   evaluate      score trained models on a test set
  translate.py  translate     translate text with a trained model
  bench.py      bench-device  measure this device's training FLOP/s for plan
  estimate.py   estimate      device-hours of a spec per GPU profile (docs/cluster.md)
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from transformer_core.errors import UserError

from . import (
    bench,
    dashboard,
    data,
    estimate,
    evaluate,
    knobs,
    params,
    report,
    sweep,
    train,
    translate,
)
from .args import check_deprecated

# the modules of the subcommands, in the order `tsweep --help` lists them
COMMANDS = (
    params,
    knobs,
    data,
    train,
    sweep,
    report,
    dashboard,
    evaluate,
    translate,
    bench,
    estimate,
)


def command_modules() -> list:
    return list(COMMANDS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tsweep", description="Ablation and hyperparameter sweeps of the Transformer")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in command_modules():
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_deprecated(parser, args)  # --device h100 --gpu a100: one of them, not the last silently
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:  # sacrebleu logs each paired-bootstrap step at INFO: dozens of lines per report
        logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    try:
        return args.func(args) or 0
    except UserError as exc:
        from analysis.data.text import printable  # spec text and names in the message: no terminal escape runs

        line = printable(re.sub(r"\s*\n\s*", " ", str(exc)))  # one line (a YAML error's position on the next)
        print(f"tsweep {args.command}: error: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"tsweep {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head or a closed pager: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141

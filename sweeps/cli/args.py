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
        out: list[str] = []
        words: list[str] = []

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


def add_profile_argument(parser, default, what: str = "the scale profile", why: str = "") -> None:
    """``--profile NAME``, and the list of profiles with their descriptions (profiles.yaml) below the options.

    The defaults differ by command, each for its reason, which the help states (``why``): plan and run default to
    cpu (a sweep this machine runs), params to paper (the paper's sizes), bench-device to gpu (it measures a GPU),
    train to none (the preset as the paper sets it)."""
    from sweeps.spec.profiles import PROFILES_HELP, profiles_described

    shown = f" (default {default or 'none'}{': ' + why if why else ''})" if default or why else ""
    parser.add_argument("--profile", default=default, help=f"{what}{shown}: {PROFILES_HELP}")
    listing = "profiles (sweeps/specs/profiles.yaml):\n" + profiles_described()
    parser.epilog = f"{parser.epilog}\n\n{listing}" if parser.epilog else listing
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = HelpFormatter


# ------------------------------------------------------------------------------------------ shared options
# Each option several subcommands take is declared here once, with one help text: the values it takes and what
# they mean are the same everywhere; a command adds only its role and its default.
DATA_DIR_HELP = (
    "data directory: prepared corpora, vocabularies and the `tsweep bench-device` measurements"
    " (default $TSWEEP_DATA_DIR or ~/.cache/tsweep/data)"
)
CORPUS_VALUES = (
    "a recipe (see 'tsweep data list'), files:SRC,TGT (line-aligned) or files:PAIRS.tsv (task lm: files:TEXT)"
)
BUDGET_VALUES = "a wall-clock budget, e.g. 60m or 2h"
GPU_VALUES = "a known GPU model ({known}): its peak dense bf16 FLOP/s x --mfu"
SPEC_HELP = "the sweep spec, a YAML file (e.g. sweeps/specs/table3.yaml)"
RELEASE_NOTE = "the old spelling is removed in the next release"


class DeprecatedOption(argparse.Action):
    """An old spelling of a renamed option: stores like the new one and says so on stderr, once per command line.
    Hidden from --help (the new spelling is documented)."""

    def __init__(self, option_strings, dest, new: str = "", type=None, **kwargs):
        super().__init__(option_strings, dest, type=type, help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        now = getattr(namespace, self.dest, None)
        earlier = (getattr(namespace, "deprecated_values", None) or {}).get(self.dest, (None, None))[1]
        if now not in (None, parser.get_default(self.dest), values, earlier):  # the new spelling, another value
            parser.error(f"{option_string} {values} and {self.new} {now} both given; allowed one of them ({self.new})")
        setattr(namespace, self.dest, values)
        given = getattr(namespace, "deprecated_values", None) or {}
        namespace.deprecated_values = {**given, self.dest: (option_string, values, self.new)}
        noted = getattr(namespace, "deprecations_noted", None) or set()
        if option_string not in noted:
            print(
                f"{parser.prog}: note: {option_string} is deprecated: use {self.new} ({RELEASE_NOTE})", file=sys.stderr
            )
            noted.add(option_string)
        namespace.deprecations_noted = noted


def check_deprecated(parser, args) -> None:
    """Refuse (argparse's error, exit 2) an old spelling given with its new one and another value, the new one
    later on the command line (``DeprecatedOption`` refuses the other order)."""
    for dest, (old, value, new) in (getattr(args, "deprecated_values", None) or {}).items():
        if getattr(args, dest) != value:
            parser.error(f"{old} {value} and {new} {getattr(args, dest)} both given; allowed one of them ({new})")


def add_deprecated(parser, old: str, new: str, dest: str, type=None) -> None:
    """``old`` keeps working for one release as a hidden spelling of ``new`` (stored in ``dest``)."""
    parser.add_argument(old, dest=dest, action=DeprecatedOption, new=new, type=type, default=argparse.SUPPRESS)


def positive_int(text: str) -> int:
    """An option's value that counts something (tokens per batch, bootstrap samples): a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; allowed a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; allowed a whole number >= 1")
    return value


def add_data_dir_argument(parser) -> None:
    parser.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)


def add_corpus_argument(parser, what: str, default: str | None = None, required: bool = False) -> None:
    """``--corpus``: what it is for in this command, then the values every command takes, then the default."""
    shown = f" (default {default})" if default else ""
    parser.add_argument("--corpus", default=default, required=required, help=f"{what}: {CORPUS_VALUES}{shown}")


def add_device_argument(parser) -> None:
    """``--device``: the torch device to run on, as the knob ``device`` (--set device=...) means it."""
    from transformer_core.knobs import knob

    parser.add_argument("--device", default="auto", help=f"the torch device: {knob('device').help} (default auto)")


def add_gpu_argument(parser, what: str, default: str | None = None) -> None:
    """``--gpu NAME``: a GPU model whose peak FLOP/s an estimate assumes (was ``--device``, which elsewhere is the
    torch device a command runs on)."""
    from sweeps.plan.estimate import KNOWN_DEVICES

    shown = f" (default {default})" if default else ""
    text = GPU_VALUES.format(known=", ".join(KNOWN_DEVICES))
    parser.add_argument("--gpu", default=default, metavar="NAME", help=f"{what}: {text}{shown}")
    add_deprecated(parser, "--device", "--gpu", "gpu")


def add_budget_argument(parser, what: str) -> None:
    """``--budget``: wall-clock time, whatever the command (data's tokens per batch is --tokens-per-batch)."""
    parser.add_argument("--budget", default=None, help=f"{BUDGET_VALUES}: {what}")


def add_spec_argument(parser, default: str | None = None, what: str = "", shown: str | None = None) -> None:
    """The spec, positional in every command (optional where ``default`` or ``what`` says what happens without
    one); the old ``--spec SPEC`` of params and estimate keeps working for one release."""
    if default is None and not what:
        parser.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
        return
    shown = f" (default {shown or default})" if default else ""
    parser.add_argument("spec", metavar="SPEC", nargs="?", default=None, help=f"{SPEC_HELP}{what}{shown}")
    parser.add_argument("--spec", dest="spec_option", action=DeprecatedOption, new="the positional SPEC", default=None)
    parser.set_defaults(spec_default=default)


def spec_path(args) -> str | None:
    """The spec of parsed arguments: positional, else the deprecated --spec, else the command's default."""
    from transformer_core.errors import UserError

    option = getattr(args, "spec_option", None)
    if args.spec and option and args.spec != option:
        raise UserError(f"two specs given: {args.spec} and --spec {option}; give one (positional)")
    return args.spec or option or getattr(args, "spec_default", None)

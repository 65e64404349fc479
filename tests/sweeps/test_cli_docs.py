"""Text the command line shows that is generated from its sources: docs/knobs.md, the profile help, the docstring."""

import argparse
import re

from sweeps import cli
from sweeps.cli.knobs import knobs_markdown
from sweeps.spec.profiles import load_profiles
from tests.helpers import ROOT


def _subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_docs_knobs_md_is_what_tsweep_knobs_markdown_prints(capsys):
    from transformer_core.knobs import KNOBS

    assert cli.main(["knobs", "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == knobs_markdown()
    docs = (ROOT / "docs" / "knobs.md").read_text(encoding="utf-8")
    assert docs == printed, "docs/knobs.md is out of date: run `tsweep knobs --markdown > docs/knobs.md`"
    rows = [line for line in printed.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `([^`]+)`", row).group(1) for row in rows] == [k.name for k in KNOBS]


def test_the_knob_page_follows_the_knob_table(monkeypatch):
    from transformer_core import knobs

    extra = knobs.Knob("new_knob", "model", "none", "new", "", "a knob added without regenerating the page")
    monkeypatch.setattr(knobs, "KNOBS", (*knobs.KNOBS, extra))
    assert "| `new_knob` | model | none |  | a knob added without regenerating the page |" in knobs_markdown()
    assert knobs_markdown() != (ROOT / "docs" / "knobs.md").read_text(encoding="utf-8")


def test_the_docstring_names_every_subcommand_and_module():
    names = _subparsers(cli.build_parser())
    for name in names:
        assert re.search(rf"\s{re.escape(name)}\s", cli.__doc__), name
    for module in cli.COMMANDS:
        assert module.__name__.rsplit(".", 1)[1] in cli.__doc__, module


def test_every_profile_option_lists_the_profiles_with_their_descriptions():
    profiles = load_profiles()
    with_profile = {}
    for name, sub in _subparsers(cli.build_parser()).items():
        option = next((a for a in sub._actions if "--profile" in a.option_strings), None)
        if option is not None:
            with_profile[name] = sub.format_help()
            assert all(p in option.help for p in profiles), (name, option.help)  # the names in the option's help
    assert {"params", "train", "plan", "run", "bench-device"} <= set(with_profile)
    for name, text in with_profile.items():
        for profile in profiles.values():
            # one line per profile under the options, its description as profiles.yaml has it
            assert re.search(rf"^  {re.escape(profile.name)}\s+{re.escape(profile.description)}", text, re.M), (
                name,
                profile.name,
            )


def test_profile_help_follows_profiles_yaml(monkeypatch):
    from sweeps.spec import profiles

    real = profiles.load_profiles()
    added = profiles.Profile(name="tiny-gpu", description="a profile added to the file", width=0.1,
                             depth_divisor=1, steps_factor=0.1)  # fmt: skip
    monkeypatch.setattr(profiles, "load_profiles", lambda: {**real, "tiny-gpu": added})
    assert profiles.profiles_help().endswith("or tiny-gpu (sweeps/specs/profiles.yaml)")
    assert "  tiny-gpu" in profiles.profiles_described() and "a profile added to the file" in (
        profiles.profiles_described()
    )
    help_text = _subparsers(cli.build_parser())["plan"].format_help()
    assert re.search(r"^  tiny-gpu\s+a profile added to the file", help_text, re.M)


def test_the_readme_table_names_every_subcommand():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = [line for line in readme.splitlines() if line.startswith("| `tsweep ")]
    for name in _subparsers(cli.build_parser()):
        assert any(line.startswith(f"| `tsweep {name}") for line in table), f"README's subcommand table lacks {name}"

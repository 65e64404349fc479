"""One meaning per flag across tsweep's subcommands (issue 46 item 4): shared options declared once with one help
text, the renamed spellings (plan/estimate --device -> --gpu, data --budget -> --tokens-per-batch, params/estimate
--spec -> positional) still working for one release with a one-line note on stderr, and the errors naming the flag
the user typed."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from sweeps import cli
from sweeps.cli.args import BUDGET_VALUES, CORPUS_VALUES, DATA_DIR_HELP
from tests.helpers import ROOT
from tests.sweeps.snapshot import untimed

TABLE3 = "sweeps/specs/table3.yaml"
QUICK = "sweeps/specs/table3-quick.yaml"


def _subparsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[f"{prefix}{name}"] = sub
                out.update(_subparsers(sub, f"{prefix}{name} "))
    return out


def _option(sub: argparse.ArgumentParser, flag: str):
    return next((a for a in sub._actions if flag in a.option_strings and a.help != argparse.SUPPRESS), None)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if "is deprecated" in line]


# ----------------------------------------------------------------------------------- shared options, one text
def test_shared_options_have_one_help_text_everywhere():
    subs = _subparsers(cli.build_parser())
    seen = {flag: {} for flag in ("--data-dir", "--corpus", "--budget", "--device", "--gpu", "--profile")}
    for name, sub in subs.items():
        for flag in seen:
            option = _option(sub, flag)
            if option is not None:
                seen[flag][name] = option.help
    assert set(seen["--data-dir"]) == {"data prepare", "data info", "train", "plan", "evaluate", "translate",
                                       "bench-device"}  # fmt: skip
    assert set(seen["--data-dir"].values()) == {DATA_DIR_HELP}
    assert set(seen["--corpus"]) == {"train", "plan", "run", "evaluate", "bench-device"}
    assert all(CORPUS_VALUES in text for text in seen["--corpus"].values())
    # --budget is wall-clock time wherever it is documented (data's tokens per batch is --tokens-per-batch)
    assert set(seen["--budget"]) == {"plan", "run"}
    assert all(text.startswith(BUDGET_VALUES) for text in seen["--budget"].values())
    # --device is the torch device to run on; the GPU model an estimate assumes is --gpu
    assert set(seen["--device"]) == {"evaluate", "translate"}
    assert len(set(seen["--device"].values())) == 1 and "cuda:N" in seen["--device"]["evaluate"]
    assert set(seen["--gpu"]) == {"plan", "estimate"}
    assert all("h100" in text and "mi300x" in text for text in seen["--gpu"].values())
    # every --profile states its default and why (they differ by command, each for a reason)
    for name, text in seen["--profile"].items():
        assert re.search(r"\(default [\w-]+: [^)]+\)", text), (name, text)


def test_the_spec_is_positional_in_every_command_that_takes_one():
    subs = _subparsers(cli.build_parser())
    for name in ("plan", "run", "params", "estimate"):
        positional = [a for a in subs[name]._actions if not a.option_strings]
        assert [a.metavar for a in positional] == ["SPEC"], name
        assert _option(subs[name], "--spec") is None, name  # the old spelling is hidden from --help


def test_the_cli_imports_its_subcommands_explicitly():
    source = (ROOT / "sweeps" / "cli" / "__init__.py").read_text()
    assert "importlib" not in source and "import_module" not in source
    assert all(isinstance(m, type(cli)) for m in cli.COMMANDS)


def test_translate_has_its_own_module():
    from sweeps.cli import evaluate as cli_eval
    from sweeps.cli import translate as cli_translate

    assert cli_translate in cli.COMMANDS
    assert not hasattr(cli_eval, "cmd_translate") and callable(cli_translate.cmd_translate)


# ------------------------------------------------------------------------------ renamed: old and new spellings
def test_plan_takes_gpu_and_the_old_device_with_a_note_once(capsys, tmp_path):
    base = ["plan", QUICK, "--profile", "gpu", "--data-dir", str(tmp_path)]
    code, new, err = _run(capsys, *base, "--gpu", "a100")
    assert code == 0 and not _notes(err)
    assert "NVIDIA A100 peak dense bf16" in new
    code, old, err = _run(capsys, *base, "--device", "h100", "--device", "a100")  # given twice: one note
    assert code == 0 and untimed(old) == untimed(new)  # "planned in 0.01 s" is wall-clock time
    assert _notes(err) == ["tsweep plan: note: --device is deprecated: use --gpu (the old spelling is removed in "
                           "the next release)"]  # fmt: skip


def test_estimate_takes_a_positional_spec_and_gpu_and_the_old_spellings(capsys):
    code, new, err = _run(capsys, "estimate", QUICK, "--gpu", "l4")
    assert code == 0 and not _notes(err) and new.startswith("table3-quick, one seed of every row; NVIDIA L4")
    code, old, err = _run(capsys, "estimate", "--spec", QUICK, "--device", "l4")
    assert code == 0 and old == new
    notes = _notes(err)
    assert len(notes) == 2 and "--spec is deprecated: use the positional SPEC" in notes[0]
    assert "--device is deprecated: use --gpu" in notes[1]
    code, default, err = _run(capsys, "estimate")  # no spec: Table 3's, as before
    assert code == 0 and default.startswith("table3, one seed") and not err


def test_params_takes_a_positional_spec_and_the_old_option(capsys):
    code, new, err = _run(capsys, "params", QUICK, "--profile", "cpu")
    assert code == 0 and not _notes(err) and new.startswith("table3-quick rows at profile 'cpu'")
    code, old, err = _run(capsys, "params", "--spec", QUICK, "--profile", "cpu")
    assert code == 0 and old == new
    assert len(_notes(err)) == 1 and err.startswith("tsweep params: note: --spec is deprecated")
    code, out, err = _run(capsys, "params", TABLE3, "--spec", QUICK)  # two different specs: refused in one line
    assert code == 2 and err.strip().splitlines()[1:] == [
        f"tsweep params: error: two specs given: {TABLE3} and --spec {QUICK}; give one (positional)"
    ]
    code, same, err = _run(capsys, "params", QUICK, "--spec", QUICK, "--profile", "cpu")  # the same one twice
    assert code == 0 and same == new


@pytest.mark.parametrize("command", ["prepare", "info"])
def test_data_takes_tokens_per_batch_and_the_old_budget(capsys, command):
    parser = cli.build_parser()
    args = parser.parse_args(["data", command, "bible-en-de", "--tokens-per-batch", "1024"])
    assert args.tokens_per_batch == 1024 and not _notes(capsys.readouterr().err)
    assert parser.parse_args(["data", command, "bible-en-de"]).tokens_per_batch == 4096
    args = parser.parse_args(["data", command, "bible-en-de", "--budget", "2048"])
    assert args.tokens_per_batch == 2048 and not hasattr(args, "budget")
    assert _notes(capsys.readouterr().err) == [
        f"tsweep data {command}: note: --budget is deprecated: use --tokens-per-batch (the old spelling is removed "
        "in the next release)"
    ]


def test_data_info_reads_the_old_budget_as_tokens_per_batch(capsys, tmp_path):
    # an unprepared corpus: refused as before, the note on stderr first
    code, out, err = _run(capsys, "data", "info", "bible-en-de", "--budget", "512", "--data-dir", str(tmp_path))
    assert code != 0 and len(_notes(err)) == 1 and "is not prepared" in err


# ---------------------------------------------------------------------------------------- the flag in errors
def test_translate_names_row_and_evaluate_names_rows(capsys, tmp_path):
    from tests.analysis.test_analysis import make_sweep

    sweep = make_sweep(tmp_path / "sweep")
    state = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({"name": "t", "plan": {}, **state}))  # a state tsweep reads
    code, out, err = _run(capsys, "translate", str(sweep), "--row", "Z9")
    assert code == 2 and f"--row Z9: not in sweep {str(sweep)!r}" in err and "--rows" not in err
    from sweeps.run.evaluate import finished_trials

    with pytest.raises(Exception, match=r"^--rows Z9: not in sweep"):
        finished_trials(sweep, ["Z9"])

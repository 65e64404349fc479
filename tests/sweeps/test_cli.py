"""The tsweep command line: one registration pattern, one --set parser, recipe flags from the recipes."""

import argparse
import importlib
from pathlib import Path

import pytest

from sweeps import cli
from sweeps.cli.args import set_values
from tests.helpers import ROOT, refused
from transformer_core.config import model_config
from transformer_core.params import closed_form_parameters

# the arguments a subcommand needs before --set can be parsed
REQUIRED = {"train": ["--workdir", "w"]}


def _subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


def test_every_subcommand_comes_from_a_listed_module_with_register():
    parser = cli.build_parser()
    names = set(_subparsers(parser))
    from_modules = set()
    for module in cli.command_modules():
        assert callable(module.register), module.__name__
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub)
        added = set(sub.choices)
        assert added, f"{module.__name__} registers no subcommand"
        assert not added & from_modules, f"{module.__name__} registers a name another module has"
        from_modules |= added
    assert names == from_modules
    assert {"params", "knobs", "estimate", "train", "plan", "run", "status", "report"} <= names
    # every sweeps/cli/*.py with a register function is listed (a module left off the list is a silent gap)
    for path in sorted((ROOT / "sweeps" / "cli").glob("*.py")):
        if path.stem in ("__init__", "__main__"):
            continue
        module = importlib.import_module(f"sweeps.cli.{path.stem}")
        assert hasattr(module, "register") == (module in cli.COMMANDS), path.name


def test_estimate_is_a_subcommand(capsys):
    assert cli.main(["estimate", "--mfu", "0.5", "--gpus", "4"]) == 0
    via_tsweep = capsys.readouterr().out
    assert "MFU 0.5" in via_tsweep and "| wall on 4 GPUs |" in via_tsweep
    rows = [line for line in via_tsweep.splitlines() if line.startswith("| gpu")]
    assert len(rows) == 3


def test_set_is_parsed_alike_by_every_subcommand_that_takes_it():
    parser = cli.build_parser()
    taking = sorted(name for name, sub in _subparsers(parser).items() if "--set" in _options(sub))
    assert {"params", "train", "bench-device"} <= set(taking)
    expected = {"N": "2", "d_model": "128"}
    for name in taking:
        base = [name, *REQUIRED.get(name, [])]
        several = parser.parse_args([*base, "--set", "N=2", "d_model=128"])
        repeated = parser.parse_args([*base, "--set", "N=2", "--set", "d_model=128"])
        mixed = parser.parse_args([*base, "--set", "N=2", "d_model=1", "--set", "d_model=128"])  # the last wins
        assert set_values(several) == set_values(repeated) == set_values(mixed) == expected, name
        assert set_values(parser.parse_args(base)) == {}, name


def test_params_takes_several_pairs_after_one_set(capsys):
    assert cli.main(["params", "--set", "N=2", "d_model=128", "--set", "activation=swiglu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Table 3 with N=2 d_model=128 activation=swiglu:")
    base = next(line for line in out.splitlines() if line.startswith("base "))
    assert base.split()[1:3] == ["2", "128"] and "activation=swiglu" in base
    assert cli.main(["params", "--set", "N=2", "steps=10"]) == 2  # a model knob only, as before
    assert "params takes model knobs only" in capsys.readouterr().err


def test_train_and_bench_device_receive_every_pair(monkeypatch, tmp_path, capsys):
    import transformer_core
    from sweeps.plan import device_bench, estimate

    seen = {}

    def fake_train(config, workdir, tracker=None, progress=None):
        seen["train"] = (config.model.N, config.model.d_model, config.train.steps)
        return {"status": "diverged", "reason": "stopped by the test"}

    monkeypatch.setattr(transformer_core, "train_and_evaluate", fake_train)
    argv = ["train", "--workdir", str(tmp_path / "w"), "--quiet", "--set", "N=2", "d_model=128", "--set", "steps=7"]
    assert cli.main(argv) == 3
    assert seen["train"] == (2, 128, 7)

    def fake_measure(profile, corpus, steps, warmup, data_dir, overrides, windows=1, preset="base"):
        seen["bench"] = overrides
        return dict(device="cpu", precision="fp32", params=1, seconds_per_step=1.0, tokens_per_step=1.0,
                    tokens_per_second=1.0, flops_per_second=6.0, steps=steps, windows=[1.0] * windows,
                    warmup_seconds=0.0, compile_seconds=None)  # fmt: skip

    monkeypatch.setattr(device_bench, "measure", fake_measure)
    monkeypatch.setattr(estimate, "store_measurement", lambda data_dir, profile, record: tmp_path / "bench.json")
    stored = lambda data_dir, profile, label, record: seen.setdefault("model", label)  # noqa: E731
    monkeypatch.setattr(estimate, "store_model_measurement", stored)
    assert cli.main(["bench-device", "--profile", "smoke", "--set", "N=2", "d_model=128", "--set", "h=2"]) == 0
    assert seen["bench"] == {"N": "2", "d_model": "128", "h": "2"} and seen["model"] == "base+N=2+d_model=128+h=2"
    capsys.readouterr()


def test_a_pair_without_equals_is_one_line(capsys):
    assert cli.main(["params", "--set", "N=2", "d_model"]) == 2
    err = capsys.readouterr().err
    assert "--set 'd_model' is invalid: allowed key=value" in err and len(err.strip().splitlines()) == 1


def test_data_flags_are_every_recipe_option(monkeypatch, tmp_path):
    from sweeps.cli import data as cli_data
    from transformer_core.data import recipes
    from transformer_core.data.raw import Recipe

    declared = {key for recipe in recipes.RECIPES.values() for key in recipe.options}
    assert declared  # the files recipe's src, tgt, tsv, ...
    for name in ("prepare", "info"):
        sub = _subparsers(_subparsers(cli.build_parser())["data"])[name]
        assert {"--" + key.replace("_", "-") for key in declared} <= _options(sub)
    args = cli.build_parser().parse_args(["data", "prepare", "files", "--src", "a.txt", "--dev-tgt", "b.txt"])
    assert cli_data._options(args) == {"src": str(Path("a.txt").resolve()), "dev_tgt": str(Path("b.txt").resolve())}
    # a recipe with an option of its own gets its flag without the CLI naming it
    fake = Recipe("lexicon", ("en", "xx"), "a test recipe", lambda d, o: None, options=("glossary",))
    monkeypatch.setitem(recipes.RECIPES, "lexicon", fake)
    parser = cli.build_parser()
    sub = _subparsers(_subparsers(parser)["data"])["prepare"]
    glossary = next(a for a in sub._actions if "--glossary" in a.option_strings)
    assert "'lexicon' recipe" in glossary.help
    args = parser.parse_args(["data", "prepare", "lexicon", "--glossary", str(tmp_path / "g.tsv")])
    assert cli_data._options(args) == {"glossary": str(tmp_path / "g.tsv")}


@pytest.mark.parametrize("name", ["params", "knobs", "estimate"])
def test_moved_subcommands_keep_their_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    assert f"usage: tsweep {name}" in capsys.readouterr().out


def test_a_misspelt_profile_corpus_or_model_knob_names_the_nearest(capsys):
    assert cli.main(["plan", "tests/specs/smoke.yaml", "--profile", "smok"]) == 2
    assert "unknown profile 'smok' (did you mean 'smoke'?): allowed paper" in capsys.readouterr().err
    assert cli.main(["plan", "tests/specs/smoke.yaml", "--profile", "smoke", "--corpus", "bible-en-dee"]) == 2
    assert "unknown corpus recipe 'bible-en-dee' (did you mean 'bible-en-de'?)" in capsys.readouterr().err
    assert cli.main(["params", "--set", "dmodel=256"]) == 2
    assert "--set dmodel: not a model knob (did you mean 'd_model'?); allowed N, d_model" in capsys.readouterr().err


def test_params_command_counts_variants(capsys):
    main = cli.main
    assert main(["params", "--set", "activation=swiglu", "--set", "norm_type=rmsnorm"]) == 0
    out = capsys.readouterr().out
    cfg = model_config("base", activation="swiglu", norm_type="rmsnorm")
    base_line = next(line for line in out.splitlines() if line.startswith("base "))
    assert f"{closed_form_parameters(cfg, 37000):,}" in base_line and "activation=swiglu" in base_line
    assert main(["params", "--set", "positional=rope", "--set", "d_k=7"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "d_k=7" in err and "rope" in err


def test_train_rejects_unknown_keys_and_bad_values_in_one_line(tmp_path, capsys):
    train = ["train", "--workdir", tmp_path / "w"]
    refused([*train, "--set", "warmpu=10"], capsys, "did you mean 'warmup'", "valid keys are")
    refused([*train, "--set", "P_drop=2"], capsys, "P_drop=2.0 is invalid")
    refused([*train, "--set", "steps=ten"], capsys, "an integer")
    refused([*train, "--profile", "laptop"], capsys, "unknown profile 'laptop'")
    assert not (tmp_path / "w").exists()

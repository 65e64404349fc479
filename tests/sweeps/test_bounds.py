"""Specs and --set values that would exhaust the machine are refused in one line before any work: the YAML
document (bytes, nesting, aliases), the plan (trials), a trial's memory and seeds outside the RNG's range."""

import pytest

from sweeps.cli import main
from tests.helpers import refused, write_spec
from transformer_core.errors import ConfigError
from transformer_core.memory import MEMORY_ENV, check_memory, parse_size, training_bytes
from transformer_core.run_config import make_run_config


def _plan(spec, capsys, *needles):
    return refused(["plan", str(spec), "--profile", "smoke"], capsys, *needles)


def test_nested_aliases_are_refused_before_they_expand(tmp_path, capsys):
    """Seven levels of ten aliases under description stand for 10^7 strings (the billion laughs, smaller)."""
    levels = ["  - &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 7)]
    spec = tmp_path / "laughs.yaml"
    spec.write_text("name: laughs\ndescription:\n" + "\n".join(levels) + "\n")
    _plan(spec, capsys, "expands to more than 1,000,000 values through its anchors and aliases")
    out = tmp_path / "out"
    refused(["run", str(spec), "--profile", "smoke", "--out", str(out)], capsys, "anchors and aliases")
    assert not out.exists()


def test_a_few_aliases_are_fine(tmp_path, capsys):
    spec = tmp_path / "alias.yaml"
    spec.write_text("name: alias\nseeds: [1]\nrows:\n  D:\n    - &row {P_drop: 0.0}\n    - {<<: *row, label: D2}\n")
    capsys.readouterr()
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0
    assert "3 trials" in capsys.readouterr().out


def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, capsys):
    spec = tmp_path / "deep.yaml"
    spec.write_text("name: deep\nseeds: " + "[" * 5000 + "]" * 5000 + "\n")
    _plan(spec, capsys, "is nested more than 32 levels deep (at line 2")


def test_a_spec_file_over_the_byte_limit_is_refused_and_the_limit_can_be_raised(tmp_path, capsys, monkeypatch):
    spec = write_spec(tmp_path / "big.yaml", description="x" * 300_000)
    _plan(spec, capsys, "is larger than 262,144 bytes", "TSWEEP_MAX_SPEC_BYTES=N")
    monkeypatch.setenv("TSWEEP_MAX_SPEC_BYTES", "1000000")
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0


def test_the_number_of_trials_is_capped_and_the_cap_can_be_raised(tmp_path, capsys, monkeypatch):
    rows = {"D": [{"P_drop": 0.0}, {"P_drop": 0.2}]}
    spec = write_spec(tmp_path / "grid.yaml", seeds=list(range(1, 701)), rows=rows)
    _plan(spec, capsys, "asks for 2,100 trials (3 rows x 700 seeds), more than the limit of 2,000", "TSWEEP_MAX_TRIALS")
    monkeypatch.setenv("TSWEEP_MAX_TRIALS", "3")
    _plan(write_spec(tmp_path / "two.yaml", seeds=[1, 2], rows=rows), capsys, "6 trials", "limit of 3")
    adaptive = write_spec(tmp_path / "adaptive.yaml", seeds={"min": 2, "max": 10**6})
    _plan(adaptive, capsys, "1,000,000 trials (1 rows x 1,000,000 seeds.max)")
    space = {"lr_scale": {"type": "loguniform", "low": 0.5, "high": 2}}
    search = write_spec(tmp_path / "search.yaml", search={"samples": 10**6, "space": space})
    _plan(search, capsys, "(1,000,000 search.samples x 1 seeds)")
    monkeypatch.setenv("TSWEEP_MAX_TRIALS", "6")
    assert main(["plan", str(tmp_path / "two.yaml"), "--profile", "smoke"]) == 0
    monkeypatch.setenv("TSWEEP_MAX_TRIALS", "many")
    _plan(spec, capsys, "TSWEEP_MAX_TRIALS='many' is invalid: allowed a positive integer")


SEED_LINE = "99999999999999999999999 is invalid; allowed an integer in [0, 4294967295]"


def test_seeds_beyond_the_rng_are_refused_at_validation(tmp_path, capsys, monkeypatch):
    _plan(write_spec(tmp_path / "s.yaml", seeds=[1, 99999999999999999999999]), capsys, f"seeds[1]: {SEED_LINE}")
    monkeypatch.setenv("TSWEEP_MAX_TRIALS", str(2**50))  # past the trial cap, the seeds' own range
    _plan(
        write_spec(tmp_path / "a.yaml", seeds={"min": 2, "max": 2**40}), capsys, "seeds.max: 1099511627776 is invalid"
    )
    space = {"lr_scale": {"type": "loguniform", "low": 0.5, "high": 2}}
    search = {"samples": 2, "space": space, "seed": 99999999999999999999999}
    _plan(write_spec(tmp_path / "o.yaml", search=search), capsys, f"search.seed: {SEED_LINE}")
    work = tmp_path / "run"
    refused(
        ["train", "--workdir", str(work), "--set", "seed=99999999999999999999999"],
        capsys,
        "seed=99999999999999999999999 is invalid: allowed an integer in [0, 4294967295]",
    )
    refused(["train", "--workdir", str(work), "--set", "steps=1" + "0" * 30], capsys, "steps=1000")
    assert not work.exists()
    with pytest.raises(ConfigError, match="seed=4294967296 is invalid"):
        make_run_config({"seed": 2**32})
    assert make_run_config({"seed": 2**32 - 1}).train.seed == 2**32 - 1


def test_a_model_too_large_for_memory_is_refused_before_allocation(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    work = tmp_path / "run"
    refused(
        ["train", "--workdir", str(work), "--set", "d_model=1000000000"],
        capsys,
        "training needs at least",
        "parameters x 16 bytes",
        "of memory",
        f"set {MEMORY_ENV}=SIZE",
    )
    assert not work.exists()
    spec = write_spec(tmp_path / "huge.yaml", base={"preset": "base", "d_model": 10**9})
    _plan(spec, capsys, "rows.base.base: at profile 'smoke': training needs at least")
    out = tmp_path / "out"
    refused(["run", str(spec), "--profile", "smoke", "--out", str(out)], capsys, "training needs at least")
    assert not out.exists()


def test_the_memory_limit_follows_the_environment(monkeypatch):
    base = make_run_config({"d_model": 512})
    need, params = training_bytes(base)
    assert need >= 16 * params and params > 10**7
    monkeypatch.setenv(MEMORY_ENV, f"{need // 2**20 - 1}M")
    with pytest.raises(ConfigError, match=rf"more than {MEMORY_ENV}=\d+M"):
        check_memory(base)
    monkeypatch.setenv(MEMORY_ENV, f"{need // 2**20 + 1}M")
    check_memory(base)
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ConfigError, match="allowed a size such as 80G"):
        check_memory(base)
    assert parse_size("1.5G") == 3 * 2**29 and parse_size("2048") == 2048 and parse_size("1TiB") == 2**40

import pytest

from sweeps.spec.sweep_spec import load_spec, plan
from tests.helpers import ROOT, SMOKE, refused, tsweep, write_spec


def test_table3_spec_has_every_row_in_paper_units():
    spec = load_spec(ROOT / "sweeps" / "specs" / "table3.yaml")
    labels = [r.label for r in spec.rows]
    assert labels == [
        "base",
        "A1",
        "A2",
        "A3",
        "A4",
        "B1",
        "B2",
        "C1",
        "C2",
        "C3",
        "C4",
        "C5",
        "C6",
        "C7",
        "D1",
        "D2",
        "D3",
        "D4",
        "E1",
        "big",
    ]
    paper = {t.row: t for t in plan(spec, "paper")}
    assert paper["A1"].values["h"] == 1 and paper["A1"].values["d_k"] == 512
    assert paper["big"].values["steps"] == 300_000 and paper["base"].values["steps"] == 100_000
    assert paper["D3"].values["eps_ls"] == 0.0 and paper["E1"].values["positional"] == "learned"
    cpu = {t.row: t for t in plan(spec, "cpu")}
    assert cpu["base"].values["d_model"] == 128 and cpu["C1"].values["N"] == 1 and cpu["C3"].values["N"] == 4
    assert cpu["base"].profile["profile"] == "cpu" and cpu["base"].profile["width"] == 0.25
    assert "big" not in cpu and len(cpu) == 19  # big is out of the cpu budget
    assert len({t.trial_id for t in plan(spec, "cpu")}) == 38  # two seeds of each row first (adaptive min)
    assert spec.adaptive == {"min": 2, "max": 3} and spec.budget == 3600
    assert len({t.trial_id for t in plan(spec, "gpu")}) == 40


def test_plan_command_prints_the_trial_table():
    r = tsweep("plan", str(ROOT / "sweeps" / "specs" / "table3.yaml"), "--profile", "cpu")
    assert r.returncode == 0, r.stderr
    assert "38 trials" in r.stdout and "row big left out" in r.stdout and "nothing was run" in r.stdout
    assert sum(line.startswith(("base ", "A ", "B ", "C ", "D ", "E ", "big ")) for line in r.stdout.splitlines()) == 38


MALFORMED = [
    ({"nmae": "x"}, "spec: unknown key 'nmae' (did you mean 'name'?)"),
    ({"rows": {"A": [{"label": "A1", "hh": 2}]}}, "rows.A[0]: unknown key 'hh' (did you mean 'h'?)"),
    ({"rows": {"A": [{"h": 0}]}}, "rows.A.A1: at profile 'smoke': h=0 is invalid"),
    (
        {"rows": {"A": [{"positional": "rotary"}]}},
        "positional='rotary' is invalid: allowed one of 'sinusoidal', 'learned'",
    ),
    ({"seeds": []}, "seeds: [] is invalid"),
    ({"seeds": [1, 1]}, "seeds: [1, 1] repeats a seed"),
    ({"corpus": {"name": "wmt14"}}, "corpus.name: unknown corpus recipe 'wmt14'"),
    ({"metric": "bleu"}, "metric: 'bleu' is invalid; allowed dev_bleu"),
    ({"mode": "maximize"}, "mode: 'maximize' is invalid; allowed max, min"),
    ({"scheduler": {"type": "hyperband"}}, "scheduler.type: 'hyperband' is invalid; allowed none, asha"),
    ({"resources": {"gpus": -1}}, "resources.gpus: -1 is invalid"),
    ({"max_concurrent": 0}, "max_concurrent: 0 is invalid"),
    (
        {"search": {"space": {"lr_scale": {"type": "loguniform", "low": 2, "high": 1}}}},
        "search.space.lr_scale: low (2) must be below high (1)",
    ),
    ({"rows": {"A": [{"label": "base", "h": 4}]}}, "rows.A[0].label: 'base' is used twice"),
    ({"rows": {"A": []}}, "rows.A: expected a non-empty list"),
    ({"base": {"preset": "huge"}}, "base.preset: 'huge' is invalid; allowed base, big"),
    ({"output": 5}, "output: 5 is invalid; allowed a directory path or a URI"),
]


@pytest.mark.parametrize("doc,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_specs_give_one_line_and_exit_2(tmp_path, doc, message, capsys):
    """In process (the CLI's main, as the console script calls it): validation fails before Ray or MLflow."""
    from sweeps.cli import main

    spec = write_spec(tmp_path / "bad.yaml", **doc)
    capsys.readouterr()
    rc, err = main(["plan", str(spec), "--profile", "smoke"]), capsys.readouterr().err
    assert rc == 2, err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    out = tmp_path / "out"
    assert main(["run", str(spec), "--profile", "smoke", "--out", str(out)]) == 2 and not out.exists()


def test_bad_yaml_file_and_profile_and_address(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    refused(["plan", bad], capsys, "not valid YAML at line")
    refused(["plan", tmp_path / "missing.yaml"], capsys, "does not exist")
    refused(["plan", SMOKE, "--profile", "laptop"], capsys, "unknown profile 'laptop': allowed paper, gpu, cpu, smoke")
    refused(["run", SMOKE, "--profile", "smoke", "--address", "http://10.0.0.1", "--out", tmp_path / "o"], capsys,
            "--address 'http://10.0.0.1' is invalid")  # fmt: skip
    assert not (tmp_path / "o").exists()
    refused(["run", SMOKE, "--profile", "smoke", "--out", "nosuchfs://bucket/x"], capsys,
            "'nosuchfs://bucket/x' cannot be opened", "allowed")  # fmt: skip
    uri = (tmp_path / "u").as_uri()  # a URI on a cluster with the default (driver-local) SQLite tracking
    refused(["run", SMOKE, "--profile", "smoke", "--out", uri, "--address", "127.0.0.1:1"], capsys,
            "needs an MLflow server")  # fmt: skip
    assert not (tmp_path / "u").exists()

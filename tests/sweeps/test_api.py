"""load_sweep: a sweep's trials, per-seed results, curves and verdicts as DataFrames, ablation and search alike."""

import json
import math
import re

import pytest

from analysis.data.samples import sample_label
from sweeps import Sweep, load_sweep
from sweeps.api import UNCONFIRMED
from tests.helpers import ROOT
from transformer_core.errors import UserError

# row -> group and per-seed (dev_bleu, dev_ppl): D1 (no dropout) far below base, X1 (no claim covers it) above
ROWS = {"base": ("base", [(20.0, 5.0), (20.4, 5.1), (19.8, 4.9)]),
        "D1": ("D", [(10.0, 9.0), (10.3, 9.2), (9.9, 8.9)]),
        "X1": ("mods", [(25.0, 4.0), (25.3, 4.1), (24.9, 3.9)])}  # fmt: skip


def _write(sweep, tid, trial, result, evals=()):
    wd = sweep / "trials" / tid
    wd.mkdir(parents=True)
    (wd / "trial.json").write_text(json.dumps({"id": tid, "config_hash": tid, **trial}))
    (wd / "result.json").write_text(json.dumps(result))
    (wd / "metrics.jsonl").write_text("".join(json.dumps({"kind": "eval", **e}) + "\n" for e in evals))


def make_ablation(root):
    trials = []
    for row, (group, seeds) in ROWS.items():
        for seed, (bleu, ppl) in enumerate(seeds, 1):
            tid = f"{row}-s{seed}-0000abcd"
            trials.append(tid)
            evals = [{"step": 10, "dev_ppl": ppl * 2, "dev_ce": math.log(ppl * 2), "dev_bleu": bleu / 2},
                     {"step": 20, "dev_ppl": ppl, "dev_ce": math.log(ppl), "dev_bleu": bleu}]  # fmt: skip
            result = {"status": "finished", "dev_bleu": bleu, "dev_ppl": ppl, "test_bleu": bleu, "steps": 20,
                      "wall_seconds": 60.0}  # fmt: skip
            _write(root, tid, {"group": group, "row": row, "seed": seed, "values": {"steps": 20}}, result, evals)
    (root / "sweep.json").write_text(json.dumps({"name": "ablation", "profile": "cpu", "trials": trials}))
    return root


def test_an_ablation_sweep_as_dataframes(tmp_path):
    s = load_sweep(make_ablation(tmp_path / "sweep"))
    assert isinstance(s, Sweep) and s.kind == "ablation" and s.name == "ablation"
    assert len(s.trials) == 9 and set(s.trials["row"]) == set(ROWS)
    assert len(s.results) == 9 and s.results["dev_ce"].tolist() == pytest.approx(
        [math.log(p) for p in s.results["dev_ppl"]])  # fmt: skip
    assert s.results.groupby("row")["dev_bleu"].mean()["D1"] == pytest.approx(10.0666, abs=1e-3)
    assert len(s.curves) == 18 and s.curves.pivot_table("dev_ce", "step", "row").shape == (2, 3)
    claims = s.verdicts.set_index(["claim", "reading"])
    assert claims.loc[("D-dropout-helps", "dev BLEU"), "verdict"] == "held"
    versus = s.versus_base.set_index(["row", "reading"])
    assert versus.loc[("X1", "dev BLEU"), "outcome"] == "better than base"
    with pytest.raises(AttributeError, match="ablation sweep"):
        s.configurations


def test_a_search_sweep_as_dataframes_one_row_per_sample(tmp_path):
    root = tmp_path / "search"
    for i, (lr, bleus) in enumerate([(0.5, [3.0, 3.4]), (1.0, [6.0, 6.2]), (2.0, [1.0])]):
        for seed, bleu in enumerate(bleus, 1):
            _write(root, f"base-s{seed}-{i:08d}", {"group": "base", "row": "base", "seed": seed,
                                                   "values": {"lr_scale": lr}, "search": {"lr_scale": lr}},
                   {"status": "finished", "dev_bleu": bleu, "wall_seconds": 5.0})  # fmt: skip
    (root / "sweep.json").write_text(json.dumps({"name": "s", "profile": "smoke", "metric": "dev_bleu", "mode": "max"}))
    s = load_sweep(root.as_uri())  # a URI is read through its pulled view, like tsweep report
    assert s.kind == "search" and len(s.trials) == 5 and len(s.results) == 5
    assert list(s.verdicts["sample"]) == [sample_label({"lr_scale": x}) for x in (1.0, 0.5, 2.0)]  # best first
    assert s.configurations.set_index("sample").loc[sample_label({"lr_scale": 0.5}), "dev_bleu"] == pytest.approx(3.2)
    assert s.versus_base.empty
    # ranked as documented (issue 53): rank 1 first, not in the order the samples were drawn
    assert list(s.configurations["sample"]) == list(s.verdicts["sample"]) and list(s.configurations["rank"]) == [
        1,
        2,
        3,
    ]
    assert (s.verdicts["verdict"] == UNCONFIRMED).all()  # no confirmation: the search's own ranking says so


def test_the_trial_columns_the_docs_name_are_columns(tmp_path):
    """docs/usage.md's `trials` line names columns load_sweep has (issue 53: it named a `state` that is `status`),
    and README's example names status."""
    line = next(x for x in (ROOT / "docs" / "usage.md").read_text().splitlines() if x.startswith("| `trials` |"))
    named = re.findall(r"`([a-z_]+)`", line.split("|")[2])
    columns = set(load_sweep(make_ablation(tmp_path / "sweep")).trials.columns)
    assert "status" in named and set(named) <= columns, set(named) - columns
    readme = (ROOT / "README.md").read_text()
    assert "knobs, status, metrics" in readme and "knobs, state" not in readme


def test_a_directory_that_is_not_a_sweep_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="not a sweep directory"):
        load_sweep(tmp_path)

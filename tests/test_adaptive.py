"""Adaptive seeds: the decision rule on simulated tables (error rate over repeated looks) and the loop on Ray."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.verdicts import Outcome, judge_table, undecided_rows
from sweeps.spec import SpecError, load_spec, parse_budget

ROWS = [f"R{i}" for i in range(1, 8)]
CLAIMS = [{"id": f"{r}<base", "readings": ("dev_bleu",), "comparisons": [(r, "<", "base")]} for r in ROWS]


def _frame(values: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"row": r, "seed": i + 1, "status": "finished", "dev_bleu": v}
            for r, vs in values.items()
            for i, v in enumerate(vs)
        ]  # fmt: skip
    )


def _adaptive(rng, effects: dict, lo=2, hi=5, sigma=1.0):
    """The adaptive loop of sweeps.adaptive on simulated draws; returns the final frame and the looks."""
    looks = hi - lo + 1
    values = {r: list(20 + effects.get(r, 0) + sigma * rng.standard_normal(lo)) for r in ["base"] + ROWS}
    for _ in range(hi - lo):
        why = undecided_rows(_frame(values), CLAIMS, looks, hi)
        if not why:
            break
        for r in why:
            values[r].append(20 + effects.get(r, 0) + sigma * rng.standard_normal())
    return _frame(values), looks


def test_adaptive_loop_keeps_the_error_rate_under_the_null():
    """Zero true effect, seeds added where undecided over up to 4 looks: decided comparisons stay <= 5%."""
    rng = np.random.default_rng(11)
    decided = total = 0
    for _ in range(300):
        df, looks = _adaptive(rng, {})
        for res in judge_table(df, CLAIMS, looks):
            decided += res.comparisons[0].outcome in (Outcome.AGREES, Outcome.CONTRADICTS)
            total += 1
    assert decided / total <= 0.05 + 0.015, decided / total


def test_adaptive_loop_finds_a_real_effect_and_spends_seeds_on_it():
    rng = np.random.default_rng(12)
    held, extra_r1, extra_others = 0, 0, 0
    for _ in range(100):
        df, looks = _adaptive(rng, {"R1": -3.0})
        res = {r.claim: r for r in judge_table(df, CLAIMS, looks)}
        held += res["R1<base"].comparisons[0].outcome == Outcome.AGREES
        n = df.groupby("row").size()
        extra_r1 += n["R1"] - 2
        extra_others += sum(n[r] - 2 for r in ROWS[1:]) / len(ROWS[1:])
    assert held / 100 >= 0.8, held
    assert extra_r1 > extra_others  # compute goes to the comparison with something to decide


def test_undecided_rows_only_where_more_seeds_could_decide():
    clear = {"base": [20.0, 20.1, 19.9], "R1": [10.0, 10.1, 9.9]}  # decided: nothing to add
    assert undecided_rows(_frame(clear), CLAIMS[:1], 1, 5) == {}
    close = {"base": [20.0, 21.0], "R1": [18.5, 19.5], "R2": [20.0, 21.0]}  # within noise, decidable at 5
    why = undecided_rows(_frame(close), CLAIMS[:2], 1, 5)
    assert set(why) == {"R1", "base"} and "R1<base" in why["R1"]
    hopeless = {"base": [20.0, 21.0], "R1": [20.0, 21.0]}  # diff 0: no number of seeds decides it
    assert undecided_rows(_frame(hopeless), CLAIMS[:1], 1, 5) == {}
    assert undecided_rows(_frame(close), CLAIMS[:1], 1, 2) == {}  # both rows at max


def test_spec_seeds_min_max_and_budget(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "a", "seeds": {"min": 2, "max": 4}, "budget": "1h30m",
                                 "rows": {"D": [{"label": "D1", "P_drop": 0.0}]}}))  # fmt: skip
    spec = load_spec(p)
    assert spec.seeds == [1, 2] and spec.adaptive == {"min": 2, "max": 4} and spec.budget == 5400
    assert parse_budget("45s") == 45 and parse_budget(60) == 3600
    for bad in ({"min": 3, "max": 2}, {"min": 0}, {"lo": 1}):
        p.write_text(yaml.safe_dump({"name": "a", "seeds": bad}))
        with pytest.raises(SpecError, match="seeds"):
            load_spec(p)
    with pytest.raises(SpecError, match="budget"):
        parse_budget("soon")


def test_adaptive_rounds_on_ray_stop_at_budget_and_max_and_resume(tmp_path, fixture_corpus, monkeypatch):
    """The loop on a real local Ray (smoke profile): the decision is fixed to 'D1 undecided' so the test
    knows which rows must get seeds; a budget spent during the minimum stops it there, a larger one lets the
    minimum finish and stops before a round that would not fit, a resume adds D1's third seed and stops at
    max, a further resume trains nothing."""
    import ray

    import sweeps.adaptive as adaptive

    try:
        _adaptive_rounds_on_ray(tmp_path, monkeypatch, adaptive)
    finally:
        ray.shutdown()  # the sweep ran in this process: later tests start their own Ray


def _adaptive_rounds_on_ray(tmp_path, monkeypatch, adaptive):

    spec_path = tmp_path / "a.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "adapt", "corpus": {"name": "bible-en-de"}, "seeds": {"min": 2, "max": 3},
        "rows": {"D": [{"label": "D1", "P_drop": 0.0}]}, "max_concurrent": 2,
    }))  # fmt: skip
    spec = load_spec(spec_path)
    monkeypatch.setattr(adaptive, "undecided_rows", lambda df, claims, looks, hi: {"D1": "D-dropout-helps: test"})
    out = tmp_path / "sweep"
    lines = []
    # a budget spent during the minimum seeds: Tune stops the running trials, the sweep ends with the reason
    adaptive.run_adaptive(spec, "smoke", out, budget=0.001, num_cpus=2, echo=lines.append)
    state = json.loads((out / "sweep.json").read_text())
    assert "budget" in state["adaptive"]["stopped"] and "minimum seeds" in state["adaptive"]["stopped"]
    finished = [t for t in state["trials"] if (out / "trials" / t / "result.json").exists()]
    assert len(state["trials"]) == 4 and len(finished) < 4 and state["adaptive"]["rounds"] == []

    # more budget: the minimum completes; the next round's estimate (made huge here) does not fit
    monkeypatch.setattr(adaptive, "_round_seconds", lambda ctx, n: 1e9)
    adaptive.run_adaptive(spec, "smoke", out, resume=True, budget=3600, num_cpus=2, echo=lines.append)
    state = json.loads((out / "sweep.json").read_text())
    assert all((out / "trials" / t / "result.json").exists() for t in state["trials"])
    assert "exceeded by the next round" in state["adaptive"]["stopped"] and state["adaptive"]["rounds"] == []
    assert state["adaptive"]["looks"] == 2
    first = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}

    adaptive.run_adaptive(spec, "smoke", out, resume=True, num_cpus=2, echo=lines.append)
    state = json.loads((out / "sweep.json").read_text())
    rows = sorted(state["plan"][t]["row"] + str(state["plan"][t]["seed"]) for t in state["trials"])
    assert rows == ["D11", "D12", "D13", "base1", "base2"]  # only D1 got a third seed
    assert state["adaptive"]["rounds"][0]["added"] == {"D1": "D-dropout-helps: test"}
    assert "max seeds" in state["adaptive"]["stopped"]
    attempts = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}
    assert all(attempts[t] == n for t, n in first.items()), (first, attempts)  # round 0 not trained again

    adaptive.run_adaptive(spec, "smoke", out, resume=True, num_cpus=2, echo=lines.append)
    again = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}
    assert again == attempts  # nothing finished is trained again

    from analysis.report import write_report

    md = (write_report(out, samples=50) / "report.md").read_text()
    assert "Adaptive seeds" in md and "round 1: one more seed for D1" in md and "| D1 |" in md

"""The adaptive-seeds loop on a real local Ray (smoke profile): budget, max seeds, resume."""

import json

import yaml

from sweeps.spec.sweep_spec import load_spec


def test_adaptive_rounds_on_ray_stop_at_budget_and_max_and_resume(tmp_path, fixture_corpus, monkeypatch):
    """The loop on a real local Ray (smoke profile), on the e-values its spec chose: the decision is fixed to 'D1
    undecided' so the test knows which rows must get seeds; a budget spent during the minimum stops it there, a
    larger one lets the minimum finish and stops before a round that would not fit, a resume adds D1's third seed
    and stops at max, a further resume trains nothing; the report decides on e-values."""
    import ray

    import sweeps.run.adaptive as adaptive

    try:
        _adaptive_rounds_on_ray(tmp_path, monkeypatch, adaptive)
    finally:
        ray.shutdown()  # the sweep ran in this process: later tests start their own Ray


def _adaptive_rounds_on_ray(tmp_path, monkeypatch, adaptive):

    spec_path = tmp_path / "a.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "adapt", "corpus": {"name": "bible-en-de"}, "seeds": {"min": 2, "max": 3, "evidence": "e"},
        "claims": "table3",
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
    assert state["adaptive"]["stop"] == "budget_spent" and state["adaptive"]["version"] == 2  # the typed reason
    finished = [t for t in state["trials"] if (out / "trials" / t / "result.json").exists()]
    assert len(state["trials"]) == 4 and len(finished) < 4 and state["adaptive"]["rounds"] == []

    # more budget: the minimum completes; the next round's estimate (made huge here) does not fit
    monkeypatch.setattr(adaptive, "_round_seconds", lambda ctx, n: 1e9)
    adaptive.run_adaptive(spec, "smoke", out, resume=True, budget=3600, num_cpus=2, echo=lines.append)
    state = json.loads((out / "sweep.json").read_text())
    assert all((out / "trials" / t / "result.json").exists() for t in state["trials"])
    assert "exceeded by the next round" in state["adaptive"]["stopped"] and state["adaptive"]["rounds"] == []
    assert state["adaptive"]["stop"] == "budget"
    assert state["adaptive"]["looks"] == 2
    first = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}

    adaptive.run_adaptive(spec, "smoke", out, resume=True, num_cpus=2, echo=lines.append)
    state = json.loads((out / "sweep.json").read_text())
    rows = sorted(state["plan"][t]["row"] + str(state["plan"][t]["seed"]) for t in state["trials"])
    assert rows == ["D11", "D12", "D13", "base1", "base2"]  # only D1 got a third seed
    assert state["adaptive"]["rounds"][0]["added"] == {"D1": "D-dropout-helps: test"}
    assert "max seeds" in state["adaptive"]["stopped"] and state["adaptive"]["stop"] == "max"
    attempts = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}
    assert all(attempts[t] == n for t, n in first.items()), (first, attempts)  # round 0 not trained again

    adaptive.run_adaptive(spec, "smoke", out, resume=True, num_cpus=2, echo=lines.append)
    again = {t: (out / "trials" / t / "attempts.jsonl").read_text().count("\n") for t in state["trials"]}
    assert again == attempts  # nothing finished is trained again

    from analysis.report.writers import write_report

    md = (write_report(out, samples=50) / "report.md").read_text()
    assert "Adaptive seeds" in md and "round 1: one more seed for D1" in md and "| D1 |" in md
    # the spec's evidence (seeds.evidence: e) reached sweep.json and decided the report: e-BH, no look charged
    assert state["adaptive"]["evidence"] == "e" and "e-BH" in md and "Looks charged: none" in md

"""A budget on this machine, end to end: `tsweep plan --budget` measures the step time of two trials side by side
and caches it; a budget spent claim by claim on a real local Ray (smoke profile): Tune starts the trials in the order
given, and a spent budget records the claims it did not reach for the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeps.cli import main as tsweep
from sweeps.plan.estimate import Throughput
from sweeps.spec.sweep_spec import load_spec
from tests.helpers import SMOKE

# the paper's order puts C1 (which no claim here can use: C-bigger-better needs C1..C7) first
SPEC = {
    "name": "budget", "corpus": {"name": "bible-en-de"}, "seeds": {"min": 2, "max": 2}, "max_concurrent": 2,
    "claims": "table3",
    "rows": {"C": [{"label": "C1", "N": 2}], "D": [{"label": "D1", "P_drop": 0.0}, {"label": "D3", "eps_ls": 0.0}],
             "E": [{"label": "E1", "positional": "learned"}]},
}  # fmt: skip


CLAIM_ORDER = ["base", "D3", "D1", "E1", "C1"]  # base + D3 decide two claims, then D1, E1; C1 last


def _first_starts(out: Path, after: float) -> list[tuple[float, str]]:
    """(start time, row) of every trial's first attempt after ``after``, in start order."""
    state = json.loads((out / "sweep.json").read_text())
    starts = []
    for tid in state["trials"]:
        path = out / "trials" / tid / "attempts.jsonl"
        times = [json.loads(x)["time"] for x in path.read_text().splitlines()] if path.exists() else []
        times = [t for t in times if t >= after]
        if times:
            starts.append((min(times), state["plan"][tid]["row"]))
    return sorted(starts)


@pytest.mark.e2e
@pytest.mark.slow  # two sessions; the order: tests/sweeps/test_budget_order.py, a spent budget: test_adaptive_e2e
def test_tune_starts_trials_claim_by_claim_and_a_spent_budget_names_what_it_missed(tmp_path, fixture_corpus,
                                                                                    monkeypatch):  # fmt: skip
    import time

    import ray

    import sweeps.run.adaptive as adaptive

    spec_path = tmp_path / "b.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    spec, out, lines = load_spec(spec_path), tmp_path / "sweep", []
    # a throughput this slow makes every trial's estimate exceed any budget: the claim order is used
    monkeypatch.setattr(adaptive, "run_throughput", lambda spec, profile, trials: Throughput(1e3, "a test's"))
    try:
        adaptive.run_adaptive(spec, "smoke", out, budget=0.001, num_cpus=2, echo=lines.append)
        state = json.loads((out / "sweep.json").read_text())
        unreached = state["adaptive"]["unreached"]
        assert set(unreached) == {"D-dropout-helps", "D-ls-hurts-ppl", "D-ls-helps-bleu", "E-learned-positions"}
        assert "D-dropout-helps needs --budget" in state["adaptive"]["stopped"]

        from analysis.report.writers import write_report

        md = (write_report(out, samples=20) / "report.md").read_text()
        assert "**Not measured: budget**" in md and "E-learned-positions: DEMO_BUDGET=" in md

        started = time.time()
        adaptive.run_adaptive(spec, "smoke", out, resume=True, budget=3600, num_cpus=2, echo=lines.append)
    finally:
        ray.shutdown()
    assert any("rows run claim by claim" in line for line in lines), lines
    rows = [row for _, row in _first_starts(out, started)]
    # trials the first session finished are not run again; the rest start in the claim order, two at a time
    assert rows == [r for r in (r for r in CLAIM_ORDER for _ in range(2)) if r in rows], rows
    assert sorted(rows, key=CLAIM_ORDER.index) == rows and len(rows) >= 6
    state = json.loads((out / "sweep.json").read_text())
    assert "unreached" not in state["adaptive"]  # every claim's rows have their seeds now


def test_plan_budget_measures_the_step_time_here_once_and_caches_it(tmp_path, capsys, fixture_data_dir):
    smoke = str(SMOKE)
    args = ["plan", smoke, "--profile", "smoke", "--budget", "10m", "--data-dir", str(tmp_path)]
    assert tsweep(args) == 0
    out = capsys.readouterr().out
    assert "throughput source: measured now on this machine" in out and "2 trial(s) side by side" in out
    machines = json.loads((tmp_path / "device-bench.json").read_text())["machines"]
    (key, record), = machines.items()  # fmt: skip
    for part in ("profile=smoke", "cpu_flags=", "isa=", "torch=", "precision=", "threads=1", "side_by_side=2"):
        assert part in key
    assert record["flops_per_second"] > 0 and record["steps"] >= 2
    assert "every trial is expected to end within it" in out
    assert tsweep(args) == 0  # the second plan reads the cache
    again = capsys.readouterr().out
    assert "throughput source: measured on this machine" in again
    assert json.loads((tmp_path / "device-bench.json").read_text())["machines"] == machines

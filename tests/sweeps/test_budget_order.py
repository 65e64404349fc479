"""A budget spent claim by claim: the order on fake cost tables, the correction by measured trial times, ties,
and what a budget reaches on parallel slots."""

from __future__ import annotations

import math

from analysis.data.claims import claim_rows, table3_claims
from sweeps.plan.budget_order import (
    Step,
    budget_words,
    corrected_seconds,
    order_claims,
    project,
    row_order,
    schedule,
)
from tests.helpers import ROOT

TABLE3_ROWS = ["base", *"A1 A2 A3 A4 B1 B2 C1 C2 C3 C4 C5 C6 C7 D1 D2 D3 D4 E1".split()]


def table3_cost(**changed) -> dict[str, float]:
    """Every Table 3 row at 10 (two seeds of 5), in the paper's order; ``changed`` overrides some."""
    return {r: float(changed.get(r, 10.0)) for r in TABLE3_ROWS}


def test_the_cheapest_claims_per_row_come_first_and_base_is_paid_once():
    steps = order_claims(claim_rows(table3_claims()), table3_cost(B1=8, B2=9))
    assert [s.claims for s in steps] == [
        ("D-ls-hurts-ppl", "D-ls-helps-bleu"),  # base + D3 complete two claims: 10 per claim
        ("D-dropout-helps",),  # D1 alone now that base has run
        ("E-learned-positions",),
        ("B-smaller-dk",),  # 17 for one claim
        ("A-too-many-heads",),  # A2..A4 + A1 = 40 for two claims (20 per claim), the smaller of them first
        ("A-one-head",),
        ("C-bigger-better",),  # 70 for one
    ]
    assert [s.rows for s in steps][:3] == [("base", "D3"), ("D1",), ("E1",)]
    assert steps[4] == Step(("A-too-many-heads",), ("A2", "A3", "A4"), 30.0)
    assert steps[5].rows == ("A1",) and steps[6].seconds == 70.0
    # rows no claim needs (D2, D4) last, in their own order
    assert row_order(steps, TABLE3_ROWS)[-2:] == ["D2", "D4"]
    assert row_order(steps, TABLE3_ROWS)[:4] == ["base", "D3", "D1", "E1"]


def test_complete_rows_cost_nothing_and_a_finished_claim_is_decided_at_once():
    # an hour spent in the paper's order ran base and all of A: the A claims need nothing more
    cost = table3_cost(base=0, A1=0, A2=0, A3=0, A4=0)
    steps = order_claims(claim_rows(table3_claims()), cost)
    assert steps[0] == Step(("A-one-head", "A-too-many-heads"), (), 0)
    assert steps[1].claims == ("D-ls-hurts-ppl", "D-ls-helps-bleu") and steps[1].rows == ("D3",)
    # a row that is cheap but half done (one seed left) moves ahead of whole rows
    steps = order_claims(claim_rows(table3_claims()), table3_cost(base=0, C1=3, C2=0, C3=0, C4=0, C5=0, C6=0, C7=0))
    assert steps[0].claims == ("C-bigger-better",) and steps[0].rows == ("C1",)


def test_ties_keep_the_papers_order_and_prefer_more_claims():
    claims = {"x": ["base", "X"], "y": ["base", "Y"], "z": ["base", "Z"], "z2": ["Z", "base"]}
    cost = {"base": 1.0, "X": 1.0, "Y": 1.0, "Z": 1.0}
    assert [s.claims for s in order_claims(claims, cost)] == [("z", "z2"), ("x",), ("y",)]
    cost = {"base": 1.0, "Y": 1.0, "X": 1.0, "Z": 5.0}  # the rows' own order does not reorder tied claims
    assert [s.claims for s in order_claims(claims, cost)] == [("x",), ("y",), ("z", "z2")]
    assert order_claims(claims, cost)[0].rows == ("base", "X")


def test_a_claim_on_a_row_the_sweep_does_not_plan_is_left_out():
    steps = order_claims(claim_rows(table3_claims()), {"base": 1.0, "D1": 1.0, "E1": 2.0})
    assert [s.claims for s in steps] == [("D-dropout-helps",), ("E-learned-positions",)]


def test_measured_times_correct_the_estimates_by_row_and_overall():
    est = {"b1": 100.0, "b2": 100.0, "a1": 100.0, "a2": 100.0, "c1": 200.0}
    row_of = {"b1": "base", "b2": "base", "a1": "A", "a2": "A", "c1": "C"}
    assert corrected_seconds(est, {}, row_of) == est  # nothing measured: the plan's estimates
    # base measured at 1.5x its estimate; A at 3x (its own ratio); C has none measured: all measured, 2.25x
    got = corrected_seconds(est, {"b1": 150.0, "a1": 300.0}, row_of)
    assert got["b2"] == 150.0 and got["a2"] == 300.0 and got["c1"] == 200.0 * 450 / 200
    # the correction changes the order: A measured slow, so B's claim goes before A's
    claims = {"A": ["base", "A"], "B": ["base", "B"]}
    assert [s.claims for s in order_claims(claims, {"base": 0.0, "A": 10.0, "B": 20.0})][0] == ("A",)
    rows = {"base": 0.0, "A": got["a2"] / 10, "B": 20.0}
    assert [s.claims for s in order_claims(claims, rows)][0] == ("B",)


def test_schedule_starts_trials_in_order_on_the_first_free_slot():
    end = schedule([("a", 10.0), ("b", 4.0), ("c", 3.0), ("d", 5.0)], slots=2)
    assert end == {"a": 10.0, "b": 4.0, "c": 7.0, "d": 12.0}
    assert schedule([("a", 1.0), ("b", 1.0)], slots=1) == {"a": 1.0, "b": 2.0}


def test_projection_says_what_a_budget_decides_and_what_it_would_need():
    cost = table3_cost()
    claims = claim_rows(table3_claims())
    steps = order_claims(claims, cost)
    trials = [(f"{r}-s{k}", r, cost[r] / 2) for r in row_order(steps, TABLE3_ROWS) for k in (1, 2)]
    # 5 per trial, 2 slots: each row takes 5 of wall time; base, D3, D1, E1 by 20
    p = project(steps, claims, trials, slots=2, left=20.0)
    assert p.decided == ["D-ls-hurts-ppl", "D-ls-helps-bleu", "D-dropout-helps", "E-learned-positions"]
    # B (20 for one claim) ties with A's four rows (40 for two): the step that completes more claims first
    assert p.unreached == {"A-too-many-heads": 35.0, "A-one-head": 40.0, "B-smaller-dk": 50.0, "C-bigger-better": 85.0}
    assert p.rows_not_reached[:2] == ["A2", "A3"] and p.rows_not_reached[-2:] == ["D2", "D4"]
    assert project(steps, claims, trials, 2, math.inf).unreached == {}


def test_budget_words_round_up_to_five_minutes():
    assert [budget_words(s) for s in (1, 3000, 3301, 5700, 10800)] == ["5m", "50m", "1h", "1h35m", "3h"]


def test_the_reports_line_names_each_claim_the_budget_did_not_reach_with_the_budget_to_finish_it():
    from analysis.data.claims import budget_unreached

    assert budget_unreached(None) == [] and budget_unreached({"min": 2}) == []
    (line,) = budget_unreached({"unreached": {"A-one-head": "1h35m", "C-bigger-better": "3h"}})
    assert line.startswith("**Not measured: budget**")
    assert "A-one-head: DEMO_BUDGET=1h35m; C-bigger-better: DEMO_BUDGET=3h" in line
    # a claim the table judges (a later session finished its rows) is not listed however old the record is
    (line,) = budget_unreached({"unreached": {"A-one-head": "1h35m", "C-bigger-better": "3h"}}, {"A-one-head"})
    assert "A-one-head" not in line and "C-bigger-better: DEMO_BUDGET=3h" in line
    assert budget_unreached({"unreached": {"A-one-head": "1h35m"}}, {"A-one-head"}) == []


def test_a_sweeps_plan_uses_measured_times_and_resumes_stopped_trials_from_their_checkpoint(tmp_path):
    import pandas as pd

    from sweeps.plan.budget_plan import plan_for, trial_estimates
    from sweeps.spec.sweep_spec import load_spec, plan

    spec = load_spec(ROOT / "sweeps" / "specs" / "table3.yaml")
    trials = plan(spec, "cpu")
    est = trial_estimates(spec, trials, 1.5e10)
    ids = {(t.row, t.seed): t.trial_id for t in trials}
    stopped = tmp_path / ids["D3", 1]
    (stopped / "checkpoints").mkdir(parents=True)
    (stopped / "checkpoints" / "step-1200.pt").write_bytes(b"")  # half of its 2,400 steps
    frame = [{"trial_id": ids["base", k], "status": "finished", "wall_seconds": 2 * est[ids["base", k]],
              "session_seconds": None, "workdir": str(tmp_path / ids["base", k])} for k in (1, 2)]  # fmt: skip
    frame.append({"trial_id": ids["D3", 1], "status": "stopped", "wall_seconds": None, "session_seconds": None,
                  "workdir": str(stopped)})  # fmt: skip
    p = plan_for(spec, trials, pd.DataFrame(frame), 1.5e10, 3600.0)
    assert p.seconds[ids["base", 1]] == 0 and p.seconds[ids["D3", 2]] == 2 * est[ids["D3", 2]]  # measured: 2x
    assert p.seconds[ids["D3", 1]] == est[ids["D3", 1]]  # 2x the estimate, half of it still to run
    # base is complete (its trials are not run again: listed with the unclaimed rows): D3 first, its stopped seed too
    assert [t.row for t in p.ordered[:4]] == ["D3", "D3", "D1", "D1"] and p.timed and not p.fits
    assert [t.row for t in p.ordered[-6:]] == ["base", "base", "D2", "D2", "D4", "D4"]
    # D3's two trials end together (the stopped one is half done): both D-ls claims at once
    assert p.projection.claims[0] == ("D-ls-hurts-ppl", 2 * est[ids["D3", 2]])
    assert plan_for(spec, trials, None, None, 3600.0).timed is False  # no throughput, nothing measured

"""A slot's worker process runs trial after trial (Tune's reuse_actors): what a trial computes must not
depend on what its process ran before.  tests/e2e/test_sweeps_e2e.py checks that a sweep does reuse them."""

import json

import pytest

from sweeps.spec import load_spec, plan
from sweeps.trial import run_trial
from sweeps.tune_adapter import reuse_actors
from tests.helpers import SMOKE
from transformer_core.errors import UserError


def _learning(result: dict, workdir) -> dict:
    losses = [json.loads(x)["loss"] for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    keys = ("dev_bleu", "dev_ppl", "test_bleu", "test_ppl", "target_tokens", "params")
    return {**{k: result[k] for k in keys}, "losses": losses}


def test_a_trial_after_other_trials_in_its_process_computes_what_it_computes_first(fixture_data_dir, tmp_path):
    trials = {(t.row, t.seed): t for t in plan(load_spec(SMOKE), "smoke")}
    d1 = trials[("D1", 2)]

    def run(trial, where):
        result = run_trial(trial.record(tmp_path / where))
        return _learning(result, tmp_path / where / "trials" / trial.trial_id)

    first = run(d1, "first")
    run(trials[("base", 1)], "between")  # another seed, dropout and model in the same process
    again = run(d1, "again")
    assert first["losses"] and first == again


def test_reuse_is_on_unless_switched_off(monkeypatch):
    monkeypatch.delenv("TSWEEP_REUSE_ACTORS", raising=False)
    assert reuse_actors() is True
    monkeypatch.setenv("TSWEEP_REUSE_ACTORS", "0")
    assert reuse_actors() is False
    monkeypatch.setenv("TSWEEP_REUSE_ACTORS", "yes")
    with pytest.raises(UserError, match="TSWEEP_REUSE_ACTORS='yes' is invalid: allowed 1"):
        reuse_actors()

"""A planned trial carries its RunConfig, built once where it is planned (issue 55 item 2): the plan, the estimate,
the budget's order and the worker-memory bound read it instead of building it again from the trial's values."""

import re

from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Trial, load_spec, plan
from tests.helpers import ROOT, SMOKE
from transformer_core.run_config import make_run_config


def test_a_planned_trial_carries_the_config_its_hash_is_of():
    spec = load_spec(SMOKE)
    trials = plan(spec, "smoke")
    assert trials
    for t in trials:
        assert t.config.content_hash() == t.config_hash
        assert t.config == make_run_config(t.values, spec.base.get("preset", "base"))


def test_a_trial_read_back_from_its_record_carries_the_same_config():
    spec = load_spec(SMOKE)
    t = plan(spec, "smoke")[0]
    back = Trial.from_record(t.record(preset=spec.base.get("preset", "base")), get_profile("smoke").rules())
    assert back == t and back.config == t.config and back.config_hash == back.config.content_hash()


# a RunConfig built from a trial's values: only where a trial is read back (sweep_spec.Trial.from_record) and in
# the worker, which runs the trial.json it was given (sweeps/run/trial.py)
_BUILT = re.compile(r"make_run_config\(\w+\.values")
ALLOWED = {"sweeps/spec/sweep_spec.py", "sweeps/run/trial.py"}


def test_no_other_module_builds_a_trials_config_again():
    found = []
    for path in sorted((ROOT / "sweeps").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel not in ALLOWED and _BUILT.search(path.read_text()):
            found.append(rel)
    assert found == []
    assert _BUILT.search("cfg = make_run_config(t.values, preset)")  # the check finds one

"""Profiles answer to their aliases: same rules, same trials and ids, and a sweep resumes under either name."""

import json

import pytest

from analysis.data.sweep_record import parse_record
from sweeps.spec.profiles import canonical_profile_name, get_profile, load_profiles, profile_aliases, same_profile
from sweeps.spec.sweep_spec import load_spec, plan
from sweeps.state.sweep_state import check_state
from tests.helpers import ROOT
from transformer_core.errors import ConfigError, UserError

RENAMED = {"cpu-2048": "cpu-large-batch", "gpu-small": "gpu-half"}
SPECS = sorted(p for p in (ROOT / "sweeps" / "specs").glob("*.yaml") if p.name != "profiles.yaml")


def test_the_aliases_name_the_renamed_profiles():
    assert profile_aliases() == RENAMED
    assert not set(RENAMED) & set(load_profiles())  # an alias is never a profile of its own
    assert canonical_profile_name("cpu-2048") == "cpu-large-batch" and canonical_profile_name("cpu") == "cpu"
    with pytest.raises(ConfigError, match="unknown profile 'cpu-4096'"):
        get_profile("cpu-4096")


@pytest.mark.parametrize("alias", sorted(RENAMED))
def test_an_alias_is_the_profile_under_the_name_it_was_given(alias):
    old, new = get_profile(alias), get_profile(RENAMED[alias])
    assert old.name == alias and new.name == RENAMED[alias]
    assert {**old.rules(), "profile": None} == {**new.rules(), "profile": None}


@pytest.mark.parametrize("alias", sorted(RENAMED))
@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_trials_have_the_same_ids_under_either_name(spec, alias):
    s = load_spec(spec)
    old, new = plan(s, alias), plan(s, RENAMED[alias])
    assert [(t.trial_id, t.config_hash, t.values) for t in old] == [(t.trial_id, t.config_hash, t.values) for t in new]


@pytest.mark.parametrize("alias", sorted(RENAMED))
def test_a_sweep_resumes_under_either_name_and_not_under_another_profile(alias):
    new = RENAMED[alias]
    for ran, resumed in ((alias, new), (new, alias)):
        state = {"name": "s", "profile": ran, "profile_rules": json.loads(json.dumps(get_profile(ran).rules()))}
        assert check_state(parse_record(state, "w"), "s", resumed, True, "w", get_profile(resumed).rules()) is state
        assert same_profile(ran, resumed)
    other = "cpu" if alias == "cpu-2048" else "gpu"
    with pytest.raises(UserError, match=f"was run with profile '{alias}', not '{other}'"):
        ran = parse_record({"name": "s", "profile": alias}, "w")
        check_state(ran, "s", other, True, "w", get_profile(other).rules())

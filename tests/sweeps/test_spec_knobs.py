"""The knob table through the sweep layer: spec rows and search samples scale alike at a profile (the table
itself: tests/core/test_knobs.py)."""

import pytest
import yaml

from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import SpecError, load_spec, row_keys, search_trial
from tests.helpers import ROOT
from transformer_core import knobs


def _search_spec(tmp_path, space):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "s", "search": {"samples": 2, "space": space}}))
    return load_spec(p)


def test_search_samples_are_expanded_like_rows_at_the_profile(tmp_path):
    """A sampled d_model (paper units) is scaled by the profile; train_steps becomes the profile's steps."""
    spec = _search_spec(tmp_path, {"d_model": {"type": "choice", "values": [256, 512]},
                                   "train_steps": {"type": "int", "low": 50000, "high": 100000}})  # fmt: skip
    smoke = get_profile("smoke")
    t = search_trial(spec, smoke, {"d_model": 512, "d_k": 64, "train_steps": 50000})
    assert t.values["d_model"] == 32 and t.values["d_k"] == 4 and t.values["steps"] == 10
    assert t.paper["d_model"] == 512 and t.paper["train_steps"] == 50000
    other = search_trial(spec, smoke, {"d_model": 256, "train_steps": 100000})
    assert other.values["d_model"] == 16 and other.values["steps"] == 20 and other.trial_id != t.trial_id
    cpu = search_trial(spec, get_profile("cpu"), {"d_model": 512})
    assert cpu.values["d_model"] == 128


def test_search_over_run_units_steps_is_refused(tmp_path):
    with pytest.raises(SpecError, match="search.space: unknown key 'steps'"):
        _search_spec(tmp_path, {"steps": {"type": "int", "low": 1, "high": 5}})


def test_calibration_spec_plans_at_smoke_and_touches_only_the_base_row():
    from sweeps.spec.sweep_spec import plan

    spec = load_spec(ROOT / "sweeps" / "specs" / "calibrate-cpu.yaml")
    assert [r.label for r in spec.rows] == ["base"] and set(spec.search.space) == {
        "schedule",
        "lr_scale",
        "warmup",
        "average_last",
    }
    trials = plan(spec, "smoke")
    assert [t.row for t in trials] == ["base"]
    t = search_trial(spec, get_profile("smoke"), {"schedule": "wsd", "lr_scale": 0.3, "warmup": 100})
    assert t.values["schedule"] == "wsd" and t.values["lr_scale"] == 0.3 and t.values["d_model"] == 32


def test_profile_keeps_d_k_even_for_rope():
    from sweeps.spec.profiles import get_profile

    for name in ("smoke", "cpu"):
        for d_k in (16, 20, 28, 64):
            scaled = get_profile(name).scale_model({"d_k": d_k, "positional": "rope"})
            assert scaled["d_k"] % 2 == 0, (name, d_k, scaled)
    assert get_profile("cpu").scale_model({"d_k": 20})["d_k"] == 5  # other positions: as scaled


def test_a_sampled_batch_size_keeps_the_tokens_of_a_trial():
    """calibrate-cpu-batch.yaml: a sampled tokens_per_batch scales steps, warmup and eval_every by old / new batch
    (same target tokens, same schedule shape); rows of a grid spec and samples without it are unchanged."""

    from sweeps.spec.sweep_spec import plan

    spec = load_spec(ROOT / "sweeps" / "specs" / "calibrate-cpu-batch.yaml")
    assert [t.row for t in plan(spec, "smoke")] == ["base"]
    cpu = get_profile("cpu-2048")  # the profile the search started from (the cpu profile took its 512 batch)
    ref = search_trial(spec, cpu, {"lr_scale": 0.5, "warmup": 200}).values
    assert (ref["steps"], ref["warmup"], ref["eval_every"], ref["tokens_per_batch"]) == (600, 200, 200, 2048)
    t = search_trial(spec, cpu, {"tokens_per_batch": 1024, "lr_scale": 0.5, "warmup": 200}).values
    assert (t["steps"], t["warmup"], t["eval_every"]) == (1200, 400, 400)
    assert t["steps"] * t["tokens_per_batch"] == ref["steps"] * ref["tokens_per_batch"]
    small = search_trial(spec, cpu, {"tokens_per_batch": 512, "warmup": 100}).values
    assert (small["steps"], small["warmup"], small["eval_every"]) == (2400, 400, 800)
    smoke = search_trial(spec, get_profile("smoke"), {"tokens_per_batch": 256}).values
    assert (smoke["steps"], smoke["warmup"], smoke["eval_every"]) == (40, 20, 20)
    now = search_trial(spec, get_profile("cpu"), {"tokens_per_batch": 1024, "warmup": 800}).values
    assert (now["steps"], now["warmup"], now["eval_every"]) == (1200, 400, 400)  # relative to cpu's own 512


def test_a_batch_size_set_by_the_spec_is_not_rescaled(tmp_path):
    """Only a *sampled* tokens_per_batch keeps tokens fixed; one written in the spec's base is taken as written."""
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "s", "base": {"preset": "base", "tokens_per_batch": 1024},
                                 "search": {"samples": 2, "space": {"lr_scale": {"type": "uniform", "low": 0.3,
                                                                                 "high": 1.0}}}}))  # fmt: skip
    t = search_trial(load_spec(p), get_profile("cpu"), {"lr_scale": 0.5}).values
    assert (t["tokens_per_batch"], t["steps"], t["warmup"]) == (1024, 2400, 800)  # the profile's steps, as written
    t = search_trial(load_spec(p), get_profile("cpu"), {"tokens_per_batch": 256}).values
    assert (t["steps"], t["warmup"]) == (9600, 3200)  # relative to the spec's own 1,024


def test_a_spec_row_takes_the_knobs_of_the_table_paper_units_first():
    row_knobs = row_keys()
    assert set(row_knobs) == set(knobs.ROW_KNOBS) and len(row_knobs) == len(knobs.ROW_KNOBS)
    assert row_knobs[: len(knobs.SCALED_BY_PROFILE)] == knobs.SCALED_BY_PROFILE

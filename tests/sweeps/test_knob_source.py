"""The knob table is the one source (issue 46 item 1): the run-only knobs, the config hash's later fields, the
profile's even-width rule, `tsweep plan`'s knob columns, the knobs a spec row may set and the report's knob
columns are drawn from transformer_core/knobs.py (the last three when they are read, so a row added to the table
reaches them)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sweeps.cli import main as tsweep
from sweeps.spec import profiles
from transformer_core import knobs, run_config
from transformer_core.run_config import RunConfig, make_run_config

QUICK = "sweeps/specs/table3-quick.yaml"


def test_run_only_knobs_are_the_tables_run_knobs():
    assert run_config.RUN_ONLY is knobs.RUN_ONLY
    # the list run_config.py held before it was drawn from the table
    assert knobs.RUN_ONLY == {"device", "precision", "threads", "log_every", "data_dir", "compile", "fused_adam",
                              "fast_dropout", "loss_kernel", "packing", "packed_attention", "loss_sync",
                              "packed_layout", "residual_dtype"}  # fmt: skip


def test_the_hash_leaves_out_the_tables_later_fields_at_their_default():
    assert set(knobs.HASHED_UNLESS_DEFAULT) == {"task", "norm_type", "activation", "beam_stop"}
    assert RunConfig().content_hash() == "441bed8605f7"  # the default config's hash, as before
    base = make_run_config({}, "base")
    for key, other in (("norm_type", "rmsnorm"), ("activation", "gelu"), ("beam_stop", "length"), ("task", "lm")):
        changed = make_run_config({key: other, **({"N_enc": None} if key == "task" else {})}, "base")
        assert changed.content_hash() != base.content_hash(), key


def test_the_profiles_even_rule_is_the_tables(monkeypatch):
    assert knobs.EVEN_WHEN == {"d_model": ("positional", "sinusoidal"), "d_k": ("positional", "rope")}
    cpu = profiles.get_profile("cpu")  # quarter width
    assert cpu.scale_model({"d_model": 508})["d_model"] == 128  # 127 -> even for the default sinusoids
    assert cpu.scale_model({"d_model": 508, "positional": "learned"})["d_model"] == 127
    assert cpu.scale_model({"d_k": 60, "positional": "rope"})["d_k"] == 16  # 15 -> even: rope rotates pairs
    assert cpu.scale_model({"d_k": 60})["d_k"] == 15
    # a rule added to the table is applied with no edit of profiles.py
    monkeypatch.setattr(profiles, "EVEN_WHEN", {**knobs.EVEN_WHEN, "d_v": ("positional", "learned")})
    assert cpu.scale_model({"d_v": 60, "positional": "learned"})["d_v"] == 16


def test_the_plans_knob_columns_are_the_tables_table3_columns(capsys, monkeypatch):
    names = [k.name for k in knobs.PLAN_COLUMNS]
    assert names == [n for n in knobs.PAPER_COLUMNS if n != "train_steps"] and "positional" in names
    assert tsweep(["plan", QUICK, "--profile", "smoke"]) == 0
    head = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("group"))
    assert head.split()[3:13] == names + ["steps"]
    # a column added to the table reaches the plan with no edit of sweeps/cli/sweep.py
    table = tuple(dataclasses.replace(k, paper=True) if k.name == "norm_type" else k for k in knobs.KNOBS)
    monkeypatch.setattr(knobs, "KNOBS", table)
    widened = [k.name for k in knobs.plan_columns()]
    assert set(widened) == set(names) | {"norm_type"}
    assert tsweep(["plan", QUICK, "--profile", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("group"))
    assert head.split()[3:14] == widened + ["steps"]
    at = 3 + widened.index("norm_type")
    assert next(line for line in lines if line.startswith("base")).split()[at] == "layernorm"


def test_a_knob_added_to_the_table_reaches_spec_plan_and_report(tmp_path, monkeypatch, capsys):
    """docs/extending.md's example, checked: a knob that needs no model code is a row of the table (and its
    dataclass field); with no other edit a spec row may set it, `tsweep plan` shows it as a Table 3 column and
    the report's knob columns have it where it varies."""
    from analysis.data.collect import collect
    from analysis.report.tables import knob_columns
    from sweeps.spec.sweep_spec import SpecError, load_spec, plan, row_keys

    @dataclasses.dataclass(frozen=True)
    class TrainWithClip(run_config.TrainConfig):
        clip_norm: float = 0.0  # the throwaway knob's dataclass field

    clip = knobs.Knob("clip_norm", "recipe", "none", "clip", "g", "gradient clipping (a test's throwaway knob)", True)
    monkeypatch.setattr(run_config, "TrainConfig", TrainWithClip)
    monkeypatch.setattr(knobs, "KNOBS", (*knobs.KNOBS, clip))

    assert "clip_norm" in row_keys() and knobs.knob("clip_norm") is clip
    spec_file = tmp_path / "clip.yaml"
    text = "name: clip\ncorpus: bible-en-de\nseeds: [1]\nrows:\n  C:\n    - {label: C1, clip_norm: 1.5}\n"
    spec_file.write_text(text.replace("clip_norm", "clip_nrm"), encoding="utf-8")
    with pytest.raises(SpecError, match="did you mean 'clip_norm'"):
        load_spec(spec_file)
    spec_file.write_text(text, encoding="utf-8")
    spec = load_spec(spec_file)
    trials = plan(spec, "smoke")
    assert [t.values.get("clip_norm") for t in trials] == [None, 1.5]
    assert tsweep(["plan", str(spec_file), "--profile", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("group")).split()
    at = head.index("clip_norm")
    assert head[at + 1] == "steps"  # the last of the Table 3 columns, before the plan's own
    assert next(line for line in lines if line.startswith("C ")).split()[at] == "1.5"
    assert next(line for line in lines if line.startswith("base ")).split()[at] == "0"

    sweep = tmp_path / "sweep"
    records = {t.trial_id: t.record(sweep).to_json() for t in trials}
    (sweep / "trials").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"name": "clip", "trials": list(records), "plan": records}))
    for tid, rec in records.items():
        (sweep / "trials" / tid).mkdir()
        (sweep / "trials" / tid / "trial.json").write_text(json.dumps(rec))
    df = collect(sweep)
    by_row = df.set_index("row")["clip_norm"]
    assert by_row.isna()["base"] and by_row["C1"] == 1.5  # unset where the row does not set it
    assert "clip_norm" in knob_columns(df)

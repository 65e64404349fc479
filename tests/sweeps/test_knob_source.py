"""The knob table is the one source (issue 46 item 1): the run-only knobs, the config hash's later fields, the
profile's even-width rule and `tsweep plan`'s knob columns are drawn from transformer_core/knobs.py."""

from __future__ import annotations

import dataclasses

from sweeps import profiles
from sweeps.cli import main as tsweep
from transformer_core import knobs, run_config
from transformer_core.run_config import RunConfig, make_run_config

QUICK = "sweeps/specs/table3-quick.yaml"


def test_run_only_knobs_are_the_tables_run_knobs():
    assert run_config.RUN_ONLY is knobs.RUN_ONLY
    # the list run_config.py held before it was drawn from the table
    assert knobs.RUN_ONLY == {"device", "precision", "threads", "log_every", "data_dir", "compile", "fused_adam",
                              "fast_dropout", "loss_kernel"}  # fmt: skip


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
    # a column added to the table reaches the plan with no edit of cli_sweep.py
    extra = dataclasses.replace(knobs.knob("norm_type"), paper=True)
    monkeypatch.setattr(knobs, "PLAN_COLUMNS", (*knobs.PLAN_COLUMNS, extra))
    assert tsweep(["plan", QUICK, "--profile", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("group"))
    assert head.split()[3:14] == names + ["norm_type", "steps"]
    assert next(line for line in lines if line.startswith("base")).split()[12] == "layernorm"

"""Hostile inputs, round 4, at the command line: a sweep.json nested too deeply for Python's decoder on --resume,
a run directory whose config.json is nested too deeply or whose result.json is not an object (tsweep translate
and evaluate), damaged sweep.json fields under `tsweep status --watch`, --watch --interval values outside half a
second to a day, and `tsweep estimate --mfu` outside (0, 1].  Each is one line and exit 2, or (a damaged field the
live view only shows) read as plain status reads it; never a traceback, nothing earlier changed."""

import json
import math
import time

import pytest

from sweeps.cli import main
from tests.helpers import DEEP, SMOKE, refused, tiny_run_config
from transformer_core.finished import read_run


# ------------------------------------------------------------------------------------------------ tsweep run --resume
def test_a_resume_of_a_sweep_json_nested_too_deeply_is_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(DEEP)
    refused(["run", SMOKE, "--profile", "smoke", "--out", out, "--resume"], capsys,
            "sweep.json in ", "is unreadable: arrays or objects nested too deeply to read")  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"] and (out / "sweep.json").read_text() == DEEP


# ------------------------------------------------------------------------------------- tsweep translate, evaluate
def _run_dir(root, config=None, result=None):
    root.mkdir()
    if config is None:
        config = json.dumps(tiny_run_config(root / "data").to_dict())
    (root / "config.json").write_text(config)
    (root / "result.json").write_text(result or json.dumps({"status": "finished", "averaged_checkpoints": [10]}))
    (root / "in.txt").write_text("in the beginning\n")
    return root


def _both(run, capsys, *needles):
    """translate and evaluate of ``run`` refused with the same line."""
    for argv in (["translate", run, "--input", run / "in.txt"],
                 ["evaluate", "--run", run, "--corpus", f"files:{run / 'in.txt'},{run / 'in.txt'}"]):  # fmt: skip
        refused(argv, capsys, *needles)


@pytest.mark.parametrize("result", ["[]", '"x"', "5", "null", DEEP])
def test_a_result_json_that_is_not_an_object_is_one_line_naming_it(tmp_path, capsys, result):
    run = _run_dir(tmp_path / "run", result=result)
    needle = "nested too deeply" if result == DEEP else "not an object"
    _both(run, capsys, f"{str(run)!r}: result.json is unreadable (", needle)
    assert (run / "result.json").read_text() == result


def test_a_config_json_nested_too_deeply_is_one_line_naming_it(tmp_path, capsys):
    run = _run_dir(tmp_path / "run", config=DEEP)
    _both(run, capsys, f"{str(run)!r}: config.json is unreadable (arrays or objects nested too deeply to read)")


def test_a_sound_run_directory_reads_as_before(tmp_path):
    run = _run_dir(tmp_path / "run")
    config, result = read_run(run)
    assert config == tiny_run_config(tmp_path / "run" / "data") and result["averaged_checkpoints"] == [10]


# ------------------------------------------------------------------------------------------- tsweep status --watch
def _watch(made_sweep, capsys, monkeypatch, *flags) -> str:
    """`tsweep status SWEEP --watch` until its first pause, then Ctrl-C (make_sweep's A4 is still running)."""

    def interrupt(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    capsys.readouterr()
    rc = main(["status", str(made_sweep), "--watch", *flags])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err, err
    return out


@pytest.mark.parametrize(
    "fields", [{"created": "abc"}, {"max_concurrent": "x"}, {"max_concurrent": [1]}, {"created": [1]},
               {"created": math.inf, "max_concurrent": math.nan}, {"created": 10**400, "max_concurrent": 10**400}],
    ids=["created-a-string", "concurrent-a-string", "concurrent-a-list", "created-a-list", "not-finite", "huge"],
)  # fmt: skip
def test_status_watch_reads_damaged_fields_as_plain_status_does(made_sweep, capsys, monkeypatch, fields):
    capsys.readouterr()
    assert main(["status", str(made_sweep)]) == 0
    plain = capsys.readouterr().out
    state = json.loads((made_sweep / "sweep.json").read_text())
    (made_sweep / "sweep.json").write_text(json.dumps({**state, **fields}))
    capsys.readouterr()
    assert main(["status", str(made_sweep)]) == 0 and capsys.readouterr().out == plain
    out = _watch(made_sweep, capsys, monkeypatch)
    assert out.endswith(plain) and "A1-s1-0000abcd s?: finished" in out  # the live view's lines, then the status table


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e400", "0", "0.4", "86401"])
def test_a_watch_interval_outside_half_a_second_to_a_day_is_one_line(made_sweep, capsys, monkeypatch, value):
    monkeypatch.setattr(time, "sleep", lambda seconds: (_ for _ in ()).throw(KeyboardInterrupt))  # never a wait
    shown = repr(float(value))
    refused(["status", made_sweep, "--watch", "--interval", value], capsys,
            f"--interval {shown} is invalid: allowed a number of seconds from 0.5 to 86400 (a day)")  # fmt: skip


@pytest.mark.parametrize("value", ["0.5", "86400"])
def test_a_watch_interval_within_the_range_watches(made_sweep, capsys, monkeypatch, value):
    assert "A1-s1-0000abcd s?: finished" in _watch(made_sweep, capsys, monkeypatch, "--interval", value)


# ------------------------------------------------------------------------------------------------ tsweep estimate
@pytest.mark.parametrize("mfu", ["0", "-1", "nan", "7", "inf"])
def test_estimate_refuses_the_mfu_plan_refuses_with_plans_line(capsys, mfu):
    line = refused(["plan", SMOKE, "--gpu", "h100", "--mfu", mfu], capsys, f"--mfu {float(mfu)!r} is invalid")
    assert refused(["estimate", "--gpu", "h100", "--mfu", mfu], capsys) == line.replace("plan", "estimate", 1)


def test_estimate_at_a_sound_mfu_prints_its_table(capsys):
    capsys.readouterr()
    assert main(["estimate", "--gpu", "h100", "--mfu", "1"]) == 0
    assert "x MFU 1 =" in capsys.readouterr().out


def test_a_resume_of_an_adaptive_sweep_whose_record_is_damaged_is_one_line_before_ray(tmp_path, capsys):
    """The loop would go on from the record (its rounds, looks, seconds spent): a damaged one is refused when the
    sweep is opened, before Ray starts or anything is written."""
    spec = tmp_path / "a.yaml"
    spec.write_text("name: adapt\ncorpus: {name: bible-en-de}\nseeds: {min: 2, max: 3}\nclaims: table3\n")
    out = tmp_path / "out"
    out.mkdir()
    state = {"name": "adapt", "profile": "smoke", "trials": [], "adaptive": {"min": 2, "max": 3, "looks": "x"}}
    (out / "sweep.json").write_text(json.dumps(state))
    refused(["run", spec, "--profile", "smoke", "--out", out, "--resume"], capsys,
            "its adaptive record is damaged", "looks 'x' (allowed an integer >= 1)")  # fmt: skip
    assert (
        sorted(p.name for p in out.iterdir()) == ["sweep.json"]
        and json.loads((out / "sweep.json").read_text()) == state
    )


@pytest.mark.parametrize("gpus", ["0", "-3", "2000000000"])
def test_estimate_refuses_a_number_of_gpus_outside_its_range(capsys, gpus):
    """--gpus 2000000000 built a list of two billion slots; 0 printed a wall time on 0 GPUs."""
    refused(["estimate", "--gpus", gpus], capsys, f"--gpus {gpus} is invalid: allowed a whole number of GPUs in [1, ")

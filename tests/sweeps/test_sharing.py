"""Trials sharing a GPU (resources: {gpus: 1/k}): `tsweep bench-device --share k` measures what k trials train
together over one alone, and `tsweep plan` times and bills shared trials at that factor instead of at 1/k of the
GPU's speed each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeps.cli import main as tsweep
from sweeps.plan import estimate
from sweeps.spec.sweep_spec import Resources
from tests.helpers import ROOT

TABLE3 = ROOT / "sweeps" / "specs" / "table3.yaml"


def _record(sharing=None, settings=None) -> dict:
    r = {"profile": "gpu", "device": "NVIDIA H100 80GB HBM3", "precision": "bf16", "flops_per_second": 2.0e14,
         "measured_at": 0}  # fmt: skip
    if settings is not None:
        r["settings"] = settings
    return {**r, "sharing": sharing} if sharing is not None else r


def _plan(capsys, tmp_path: Path, gpus: float, sharing=None, settings=None, train=None) -> str:
    data = tmp_path / f"data-{gpus}-{bool(sharing)}-{len(settings or ())}-{len(train or ())}"
    data.mkdir()
    (data / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": _record(sharing, settings)}}))
    doc = yaml.safe_load(TABLE3.read_text())
    doc.update(resources={"cpus": 1, "gpus": gpus}, seeds=[1])
    if train:
        doc["train"] = {**(doc.get("train") or {}), **train}
    spec = tmp_path / f"t3-{gpus}.yaml"
    spec.write_text(yaml.safe_dump(doc))
    assert tsweep(["plan", str(spec), "--profile", "gpu", "--data-dir", str(data)]) == 0
    return capsys.readouterr().out


def _device_hours(out: str) -> float:
    line = next(x for x in out.splitlines() if x.startswith("time at "))
    return float(line.split(" device-hours")[0].rsplit(" ", 1)[-1].replace(",", ""))


def test_a_measured_sharing_factor_cuts_the_bill_by_that_factor(tmp_path, capsys):
    alone = _plan(capsys, tmp_path, 1)
    unmeasured = _plan(capsys, tmp_path, 0.5)
    measured = _plan(capsys, tmp_path, 0.5, {"2": {"factor": 1.6, "tokens_per_second": 1.0}})
    # without a measurement a shared trial runs at half a GPU: the same GPU-hours as a trial alone
    assert _device_hours(unmeasured) == pytest.approx(_device_hours(alone), rel=0.01)
    assert "each planned at 1/2 of one: no sharing measured for 2" in unmeasured
    # measured: two trials train 1.6x one alone, so each GPU-hour buys 1.6x the training
    assert _device_hours(measured) == pytest.approx(_device_hours(alone) / 1.6, rel=0.01)
    assert "2 trials share each GPU: together 1.60x one trial alone" in measured
    assert "0.5 device(s) per trial" in measured
    assert "share each GPU" not in alone


def test_devices_per_trial_uses_the_factor_of_its_own_k_only():
    assert estimate.devices_per_trial(Resources(gpus=0.5), {2: 1.6}) == pytest.approx(0.8)
    assert estimate.devices_per_trial(Resources(gpus=1 / 3), {2: 1.6}) == pytest.approx(1 / 3)  # no factor for 3
    assert estimate.devices_per_trial(Resources(gpus=1), {2: 1.6}) == 1
    # as many as Ray places on one GPU: three trials of 0.34 would ask for 1.02 GPUs, two of 0.6 for 1.2
    assert estimate.trials_per_device(Resources(gpus=0.34)) == 2
    assert estimate.trials_per_device(Resources(gpus=1 / 3)) == 3
    assert estimate.trials_per_device(Resources(gpus=0.6)) == 1
    # a data-parallel trial's workers each hold a whole GPU (Ray Train's resources_per_worker), whatever gpus says
    assert estimate.trials_per_device(Resources(gpus=0.5, workers=2)) == 1
    assert estimate.devices_per_trial(Resources(gpus=0.5, workers=2), {2: 1.6}) == 2
    assert estimate.devices_per_trial(Resources(gpus=0.34), {2: 1.6}) == pytest.approx(0.8)  # each holds half
    assert estimate.measured_sharing({"sharing": {"4": {"factor": 1.9}, "2": {"factor": 2.2}}}) == {4: 1.9, 2: 2.0}
    bad_entries = [{"2": {"factor": "1e9"}}, {"3": {"factor": float("inf")}}, {"1": {"factor": 1.0}}, {"5": 7}]
    bad_entries += [{"2": {"factor": 50}}, {"2": {"factor": -1}}, {"2": {"factor": True}}, {"x": {"factor": 1.2}}]
    for bad in bad_entries:
        with pytest.raises(ValueError, match=r"sharing\[.*allowed"):
            estimate.measured_sharing({"sharing": bad})


def test_a_sharing_factor_holds_only_for_models_no_larger_than_the_measured_one_and_only_where_they_fit(
    tmp_path, capsys
):
    """bench-device --share measures the base row's model: its factor is planned for rows no larger (a GPU at
    least as idle, no more memory) and not for larger ones, nor for any where k of the measured trial exceed the
    device's memory; a factor beyond what k trials can train is one line naming the file."""
    base = {"params": 63_082_496, "peak_cuda_gb": 12.5, "device_memory_gb": 79.1}
    data = tmp_path / "data"
    data.mkdir()
    doc = yaml.safe_load(TABLE3.read_text())
    doc.update(resources={"cpus": 1, "gpus": 0.5}, seeds=[1])
    spec = tmp_path / "t3.yaml"
    spec.write_text(yaml.safe_dump(doc))

    def plan(**fields) -> tuple[int, str, str]:
        record = {**_record({"2": {"factor": 1.6}}), **base, **fields}
        (data / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": record}}))
        code = tsweep(["plan", str(spec), "--profile", "gpu", "--data-dir", str(data)])
        got = capsys.readouterr()
        return code, got.out, got.err

    code, out, _ = plan()
    line = next(x for x in out.splitlines() if x.startswith("2 trials share each GPU"))
    assert code == 0 and "rows C3, C5, C7, big (larger models than the measured one" in line, line
    shared = _device_hours(out)
    _, tight, _ = plan(device_memory_gb=20.0)  # two trials of 12.5 GiB need more than 20
    assert "(2 of the base row's trials need more than the device's memory) at 1/2 of a GPU each" in tight
    assert _device_hours(tight) == pytest.approx(_device_hours(_plan(capsys, tmp_path, 1)), rel=0.01)
    assert shared < 0.9 * _device_hours(tight)  # the rows that fit share at the factor
    for factor in (50, "1e9", float("nan")):
        code, out, err = plan(sharing={"2": {"factor": factor}})
        assert code == 2 and "device-bench.json" in err and "allowed" in err and len(err.strip().splitlines()) == 1


def test_bench_device_share_measures_trials_side_by_side_and_keeps_other_ks(tmp_path, capsys, fixture_data_dir):
    """A real (tiny) measurement at the smoke profile on this CPU: two spawned trials timed together."""
    data = tmp_path / "data"
    argv = ["bench-device", "--profile", "smoke", "--steps", "2", "--warmup", "1", "--windows", "1",
            "--data-dir", str(data)]  # fmt: skip
    assert tsweep([*argv, "--share", "2", "--set", "compile=off"]) == 0
    out = capsys.readouterr().out
    assert "2 trials sharing the device" in out and "one trial alone" in out
    m = json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]
    assert m["settings"]["compile"] == "off" and m["settings"]["tokens_per_batch"] == 512  # the smoke profile's
    shared = m["sharing"]["2"]
    assert len(shared["per_trial"]) == 2 and all(x > 0 for x in shared["per_trial"])
    assert shared["tokens_per_second"] == pytest.approx(sum(shared["per_trial"]), rel=1e-3)
    assert shared["factor"] == pytest.approx(shared["tokens_per_second"] / m["tokens_per_second"], rel=1e-6)
    assert tsweep([*argv]) == 0  # a plain measurement replaces the record ...
    capsys.readouterr()
    assert "sharing" not in json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]
    assert tsweep([*argv, "--share", "9"]) == 2  # ... and a share out of range is one line
    assert "--share 9 is invalid" in capsys.readouterr().err


def test_plan_says_when_the_spec_trains_with_other_step_settings_than_were_measured(tmp_path, capsys):
    """A rate measured with packed CUDA-graph steps of 1 x 25,000 tokens is not the speed of the gpu profile's
    padded eager 2 x 12,500: plan names the settings that differ and how to match them."""
    fast = {"tokens_per_batch": 25000, "accumulate": 1, "compile": "graphs", "packing": "on",
            "packed_attention": "flex", "packed_layout": "auto", "loss_kernel": "plain", "loss_sync": "auto",
            "fused_adam": True,
            "fast_dropout": False, "precision": "auto"}  # fmt: skip
    other = _plan(capsys, tmp_path, 1, settings=fast)
    note = next(line for line in other.splitlines() if line.startswith("the throughput was measured with"))
    assert "tokens_per_batch 25000, accumulate 1, compile graphs, packing on, packed_attention flex" in note
    assert "this spec's trials train with tokens_per_batch 12500, accumulate 2, compile off, packing off" in note
    assert "{tokens_per_batch: 25000, accumulate: 1, compile: graphs, packing: on, packed_attention: flex}" in note
    assert "loss_kernel" not in note and "fused_adam" not in note  # equal settings are not named
    train = {k: fast[k] for k in ("tokens_per_batch", "accumulate", "compile", "packing", "packed_attention")}
    same = _plan(capsys, tmp_path, 1, settings=fast, train=train)
    assert "the throughput was measured with" not in same
    unrecorded = _plan(capsys, tmp_path, 1)  # a record from before settings were stored: said, not compared
    assert "the throughput was measured with" not in unrecorded
    assert "the measurement keeps no step settings" in unrecorded
    assert "the measurement keeps no step settings" not in other
    # such a record's top-level compile is still compared (a CUDA-graph rate is not the eager trials' speed)
    data = tmp_path / "old"
    data.mkdir()
    old = {**_record(), "compile": "graphs", "loss_kernel": "plain", "fused_adam": True, "packing": "flex"}
    (data / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": old}}))
    assert tsweep(["plan", str(TABLE3), "--profile", "gpu", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "the throughput was measured with compile graphs; this spec's trials train with compile off" in out
    assert "the measurement keeps no step settings" in out
    odd = _plan(capsys, tmp_path, 1, settings={"compile": ["x"], "packing": "on\x1b[2J", "accumulate": 1})
    assert "\x1b" not in odd and "the throughput was measured with accumulate 1;" in odd
    stream = _plan(capsys, tmp_path, 1, settings={**fast, "residual_dtype": "bf16"}, train=train)
    assert "residual_dtype bf16" in stream and "{residual_dtype: bf16}" in stream  # a bf16 stream is another speed


def test_plan_sizes_shared_trials_by_the_measured_memory_and_names_the_larger_rows(tmp_path, capsys):
    measured = {"peak_cuda_gb": 12.5, "params": 63_082_496}
    data = tmp_path / "data"
    data.mkdir()
    (data / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": {**_record(), **measured}}}))
    doc = yaml.safe_load(TABLE3.read_text())
    outs = {}
    for gpus in (1, 1 / 3):
        doc.update(resources={"cpus": 1, "gpus": gpus}, seeds=[1])
        spec = tmp_path / f"t3-{gpus:.2f}.yaml"
        spec.write_text(yaml.safe_dump(doc))
        assert tsweep(["plan", str(spec), "--profile", "gpu", "--data-dir", str(data)]) == 0
        outs[gpus] = capsys.readouterr().out
    line = next(x for x in outs[1 / 3].splitlines() if x.startswith("memory:"))
    assert "peaked at 12.5 GiB of GPU memory alone, 3 of it about 37.5 GiB" in line
    assert "rows with more parameters (C3, C5, C7, big)" in line  # the rows larger than the measured base row
    assert "memory:" not in outs[1]  # a trial with a GPU of its own
    assert estimate.memory_note(Resources(gpus=0.5), estimate.Throughput(1.0, "x"), {"base": 1.0}) is None
    assert estimate.finite_positive(float("nan")) is None and estimate.finite_positive(True) is None
    assert estimate.finite_positive("12") is None and estimate.finite_positive(-1) is None
    assert estimate.finite_positive(3) == 3.0
    assert estimate.finite_positive(10**400) is None and estimate.finite_positive(1e300) is None  # no overflow
    with pytest.raises(ValueError, match="allowed a number above 0"):
        estimate.measured_sharing({"sharing": {"2": {"factor": 10**400}}})


def test_a_plan_of_adaptive_seeds_gives_the_cost_at_their_most_beside_the_first_seeds(tmp_path, capsys):
    """Table 3's spec runs two seeds a row and a third where a claim is undecided: the plan's figure is the two
    seeds', and a line gives the three seeds' (the most such a sweep can cost)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": _record()}}))
    assert tsweep(["plan", str(TABLE3), "--profile", "gpu", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    most = next(x for x in out.splitlines() if x.startswith("at 3 seeds a row (adaptive seeds' most"))
    assert float(most.split(" device-hours")[0].rsplit(" ", 1)[-1]) == pytest.approx(1.5 * _device_hours(out), rel=0.01)
    assert "(40 rows" not in out and "x 2 seeds" in out


def test_bench_device_refuses_to_store_a_sharing_factor_the_planner_would_refuse():
    """A factor beyond 1.5 k would make device-bench.json refused by every later plan and bench-device: it is
    refused before it is stored, in one line; one up to that is stored as measured (the planner uses it as k)."""
    from sweeps.plan.device_bench import MeasurementError, sharing_factor

    assert sharing_factor(2, 528_067.0, 474_988.0) == pytest.approx(1.1117, rel=1e-3)
    assert sharing_factor(2, 290.0, 100.0) == pytest.approx(2.9)  # noise above k: kept, used as k
    with pytest.raises(MeasurementError, match="more than 2 trials can.*no sharing factor was stored"):
        sharing_factor(2, 400.0, 100.0)
    with pytest.raises(MeasurementError):
        sharing_factor(3, float("nan"), 100.0)
    assert estimate.measured_sharing({"sharing": {"2": {"factor": 2.9}}}) == {2: 2.0}


def test_bench_device_stores_the_single_trial_before_trials_share_the_device(tmp_path, capsys, monkeypatch):
    """A measurement stopped while k trials share the device (the device script's time limit, a factor refused)
    keeps the single trial's record, what tsweep plan needs first; earlier sharing factors of the same device stay
    with it."""
    from sweeps.plan import device_bench

    data = tmp_path / "data"
    argv = ["bench-device", "--profile", "smoke", "--steps", "2", "--warmup", "1", "--windows", "1",
            "--data-dir", str(data), "--set", "compile=off"]  # fmt: skip

    def stopped(k, what, alone):
        raise device_bench.MeasurementError(f"{k} trials sharing the device: stopped (a test)")

    monkeypatch.setattr(device_bench, "measure_sharing", stopped)
    assert tsweep([*argv, "--share", "2"]) != 0
    captured = capsys.readouterr()
    assert "base row at profile 'smoke'" in captured.out and "stopped (a test)" in captured.err
    m = json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]
    assert m["tokens_per_second"] > 0 and "sharing" not in m
    body = json.loads((data / "device-bench.json").read_text())
    body["measurements"]["smoke"]["sharing"] = {"3": {"factor": 1.2, "mps": True, "per_trial": [1.0, 1.0, 1.0],
                                                      "tokens_per_second": 3.0}}  # fmt: skip
    (data / "device-bench.json").write_text(json.dumps(body))
    assert tsweep([*argv, "--share", "2"]) != 0
    capsys.readouterr()
    kept = json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]
    assert kept["sharing"]["3"]["factor"] == 1.2
    # a factor measured with another step (settings or precision) is not carried to the new record
    body = json.loads((data / "device-bench.json").read_text())
    body["measurements"]["smoke"]["settings"] = {**kept["settings"], "tokens_per_batch": 999}
    (data / "device-bench.json").write_text(json.dumps(body))
    assert tsweep([*argv, "--share", "2"]) != 0
    capsys.readouterr()
    assert "sharing" not in json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]

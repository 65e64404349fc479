"""Rates by model in a plan: `tsweep bench-device --preset big` (or model knobs in --set) stores another model's
rate beside the base row's; `tsweep plan` gives a measured model's trials that rate and any other trial the rate
of the measured model nearest to it in parameters.  Records measured with other step settings or on another
device are not mixed in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeps.cli import main as tsweep
from sweeps.plan import estimate
from sweeps.spec.profiles import profile_values
from sweeps.spec.sweep_spec import load_spec, plan
from tests.helpers import ROOT
from transformer_core.run_config import make_run_config

TABLE3 = str(ROOT / "sweeps" / "specs" / "table3.yaml")
SETTINGS = {"tokens_per_batch": 25_000, "accumulate": 1, "compile": "graphs"}


def identity(preset: str, profile: str = "gpu") -> dict:
    return estimate.model_identity(make_run_config({**profile_values(preset, profile), "corpus": "bible-en-de"}))


def record(preset: str, flops: float, params: float, **extra) -> dict:
    return {"profile": "gpu", "device": "NVIDIA H200", "precision": "bf16", "flops_per_second": flops,
            "params": params, "measured_at": 1, "settings": SETTINGS, "model": identity(preset),
            "corpus": "bible-en-de", **extra}  # fmt: skip


def write(data_dir: Path, models: dict) -> None:
    body = {"measurements": {"gpu": record("base", 1.8e14, 63_082_496)}, "models": models}
    (data_dir / "device-bench.json").write_text(json.dumps(body))


def lines(out: str) -> dict[str, str]:
    """Each row's first plan line's estimated time."""
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] == "1" and parts[1] not in found:
            found[parts[1]] = parts[-2]
    return found


def row_seconds(row: str, flops_per_second: float, data_dir: Path) -> str:
    """The row's estimated time as the plan with ``--data-dir data_dir`` works it out (split sizes from there)."""
    spec = load_spec(TABLE3)
    t = next(t for t in plan(spec, "gpu") if t.row == row and t.seed == spec.seeds[0])
    cfg = t.config
    seconds = estimate.trial_seconds(estimate.trial_flops(cfg)[1], cfg.train, flops_per_second, cfg.data, data_dir)
    return estimate.duration(seconds)


def run_plan(capsys, data_dir: Path) -> str:
    assert tsweep(["plan", TABLE3, "--profile", "gpu", "--data-dir", str(data_dir)]) == 0
    return capsys.readouterr().out


def hours(out: str) -> float:
    line = next(x for x in out.splitlines() if x.startswith("time at "))
    return float(line.split(" device-hours")[0].rsplit(" ", 1)[-1].replace(",", ""))


def test_a_measured_models_trials_take_its_rate_and_the_nearest_model_takes_the_rest(tmp_path, capsys):
    write(tmp_path, {})
    alone = run_plan(capsys, tmp_path)
    assert "rates by model" not in alone and lines(alone)["big"] == row_seconds("big", 1.8e14, tmp_path)
    write(tmp_path, {"gpu/big": record("big", 3.0e14, 214_252_544, label="big")})
    out = run_plan(capsys, tmp_path)
    got = lines(out)
    assert got["big"] == row_seconds("big", 3.0e14, tmp_path) != row_seconds("big", 1.8e14, tmp_path)
    assert got["C5"] == row_seconds("C5", 3.0e14, tmp_path)  # 164M: nearer 214M than 63M on a log scale
    assert got["C3"] == row_seconds("C3", 1.8e14, tmp_path)  # 78M: nearer 63M
    assert got["base"] == row_seconds("base", 1.8e14, tmp_path)
    assert "time at the measured models' rates (base 1.8e+14, big 3e+14 FLOP/s) per device" in out
    note = next(x for x in out.splitlines() if x.startswith("rates by model"))
    assert "big (214.3M parameters) 3e+14 FLOP/s: rows big; nearest in parameters for C5" in note
    assert "base (63.1M parameters) 1.8e+14 FLOP/s: rows base, D3, D4; nearest in parameters for A1" in note
    assert hours(out) < hours(alone)


@pytest.mark.parametrize(
    "change,why",
    [({"settings": {**SETTINGS, "compile": "off"}}, "other step settings than the base row's measurement"),
     ({"device": "NVIDIA H100 80GB HBM3"}, "other device than"), ({"precision": "fp32"}, "other precision than"),
     ({"corpus": "wmt14-en-de"}, "other corpus than"),
     ({"model": "not a mapping"}, "no model or parameters recorded"),
     ({"params": float("nan")}, "no model or parameters recorded"),
     ({"model": identity("base")}, "the base row's own model")],
)  # fmt: skip
def test_a_model_measured_unlike_the_base_row_is_left_out_and_named(tmp_path, capsys, change, why):
    write(tmp_path, {"gpu/big": {**record("big", 3.0e14, 214_252_544, label="big"), **change}})
    out = run_plan(capsys, tmp_path)
    assert lines(out)["big"] == row_seconds("big", 1.8e14, tmp_path) and "rates by model" not in out
    assert f"model measurements left out: big ({why}" in out


def test_a_base_row_measured_before_records_kept_their_model_is_still_its_rows_own(tmp_path, capsys):
    base = {k: v for k, v in record("base", 1.8e14, 63_082_496).items() if k != "model"}
    body = {"measurements": {"gpu": base}, "models": {"gpu/big": record("big", 3.0e14, 214_252_544, label="big")}}
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    out = run_plan(capsys, tmp_path)
    assert "base (63.1M parameters) 1.8e+14 FLOP/s: rows base, D3, D4; nearest in parameters for A1" in out


def test_the_newest_record_of_a_model_is_the_one_kept(tmp_path, capsys):
    write(tmp_path, {})
    estimate.store_model_measurement(tmp_path, "gpu", "big", record("big", 3.0e14, 214e6, label="big"))
    estimate.store_model_measurement(tmp_path, "gpu-half", "big", record("big", 1.0e14, 214e6, label="big"))
    later = record("big", 3.3e14, 214e6, label="base+P_drop=0.3", measured_at=5)
    estimate.store_model_measurement(tmp_path, "gpu", "base+P_drop=0.3", later)  # the same model, another label
    models = json.loads((tmp_path / "device-bench.json").read_text())["models"]
    assert set(models) == {"gpu/base+P_drop=0.3", "gpu-half/big"}  # the other profile's record is its own
    assert lines(run_plan(capsys, tmp_path))["big"] == row_seconds("big", 3.3e14, tmp_path)
    # two records of one model written by hand: the newer one's rate
    models["gpu/big"] = record("big", 2.0e14, 214e6, label="big", measured_at=9)
    body = json.loads((tmp_path / "device-bench.json").read_text())
    (tmp_path / "device-bench.json").write_text(json.dumps({**body, "models": models}))
    assert lines(run_plan(capsys, tmp_path))["big"] == row_seconds("big", 2.0e14, tmp_path)


def test_a_budget_plan_rates_each_trial_by_its_model():
    from sweeps.plan.budget_plan import trial_estimates

    spec = load_spec(TABLE3)
    trials = [t for t in plan(spec, "gpu") if t.seed == spec.seeds[0]]
    base = estimate.ModelRate("base", identity("base"), 63e6, 1.0e14)
    big = estimate.ModelRate("big", identity("big"), 214e6, 2.0e14)
    one = trial_estimates(spec, trials, 1.0e14)
    both = trial_estimates(spec, trials, estimate.Throughput(1.0e14, "x", models=(base, big)))
    ids = {t.row: t.trial_id for t in trials}
    assert both[ids["base"]] == one[ids["base"]] and both[ids["C3"]] == one[ids["C3"]]
    assert both[ids["big"]] < 0.55 * one[ids["big"]] and both[ids["C5"]] < 0.55 * one[ids["C5"]]


def test_rate_for_matches_the_model_before_the_parameters():
    base = estimate.ModelRate("base", identity("base"), 63e6, 1.0)
    big = estimate.ModelRate("big", identity("big"), 214e6, 2.0)
    source = estimate.Throughput(5.0, "x", models=(base, big))
    spec = load_spec(TABLE3)
    cfg = {t.row: t.config for t in plan(spec, "gpu")}
    assert estimate.rate_for(source, cfg["big"], 1.0) == (2.0, big)  # its own model, whatever the parameters say
    assert estimate.rate_for(source, cfg["C5"], 164e6) == (2.0, big)
    assert estimate.rate_for(source, cfg["C4"], 27e6) == (1.0, base)
    assert estimate.rate_for(estimate.Throughput(5.0, "x"), cfg["big"], 214e6) == (5.0, None)


def test_the_models_section_is_checked_and_kept_by_the_other_writers(tmp_path, capsys):
    write(tmp_path, {"gpu/big": record("big", 3.0e14, 214e6, label="big")})
    estimate.store_measurement(tmp_path, "gpu-half", {"flops_per_second": 1e14, "measured_at": 2})
    estimate.store_machine_measurement(tmp_path, "k", {"flops_per_second": 1e10, "measured_at": 2,
                                                       "seconds_per_step": 1.0, "tokens_per_second": 5.0})  # fmt: skip
    body = json.loads((tmp_path / "device-bench.json").read_text())
    assert set(body["models"]) == {"gpu/big"} and set(body["measurements"]) == {"gpu", "gpu-half"}
    assert set(body["machines"]) == {"k"}
    body["models"]["gpu/big"]["flops_per_second"] = "fast"
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    assert tsweep(["plan", TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "models['gpu/big'].flops_per_second is 'fast'; allowed a number" in err and len(err.splitlines()) == 1


def test_bench_device_labels_the_model_it_measures():
    from sweeps.cli.bench import model_label

    assert model_label("gpu", "bible-en-de", "base", {}) == "base"
    assert model_label("gpu", "bible-en-de", "base", {"steps": "7", "compile": "graphs"}) == "base"  # not model knobs
    assert model_label("gpu", "bible-en-de", "big", {}) == "big"
    assert model_label("gpu", "bible-en-de", "base", {"d_k": "128", "d_v": "128"}) == "base+d_k=128+d_v=128"
    assert model_label("gpu", "bible-en-de", "base", {"vocab": "8000"}) == "base+vocab=8000"
    assert model_label("gpu", "bible-en-de", "base", {"d_model": "512"}) == "base"  # the base row's own value
    assert model_label("gpu", "bible-en-de", "big", {"d_model": "1024", "h": "8"}) == "big+h=8"  # what differs only
    big = {"d_model": "1024", "d_ff": "4096", "h": "16", "P_drop": "0.3"}
    assert model_label("gpu", "bible-en-de", "base", big) == "big"  # the big preset's model, by its knobs


def test_bench_device_share_is_for_the_base_row(capsys):
    assert tsweep(["bench-device", "--preset", "big", "--share", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--share 2 measures trials of the base row sharing a device, not big" in err and len(err.splitlines()) == 1


def test_bench_device_stores_another_model_beside_the_base_row(tmp_path, capsys, fixture_data_dir):
    """Real (tiny) runs on this machine's CPU at the smoke profile: the base row, then big."""
    data = tmp_path / "data"
    argv = ["bench-device", "--profile", "smoke", "--steps", "2", "--warmup", "1", "--windows", "1",
            "--data-dir", str(data)]  # fmt: skip
    assert tsweep(argv) == 0 and tsweep([*argv, "--preset", "big"]) == 0
    out = capsys.readouterr().out
    assert "model big at profile 'smoke'" in out and "for trials of this model" in out
    body = json.loads((data / "device-bench.json").read_text())
    base, big = body["measurements"]["smoke"], body["models"]["smoke/big"]
    assert base["model"] == identity("base", "smoke") and big["model"] == identity("big", "smoke")
    assert big["label"] == "big" and big["params"] > base["params"] and big["settings"] == base["settings"]
    source = estimate.resolve_throughput("smoke", data_dir=data)
    assert [m.label for m in source.models] == ["base", "big"]
    assert source.models[1].flops_per_second == big["flops_per_second"]


def test_shared_gpus_are_sized_by_each_measured_models_memory(tmp_path, capsys):
    import yaml

    body = {"measurements": {"gpu": record("base", 1.8e14, 63_082_496, peak_cuda_gb=12.5)},
            "models": {"gpu/big": record("big", 3.0e14, 214_252_544, label="big", peak_cuda_gb=30.0)}}  # fmt: skip
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    doc = yaml.safe_load(Path(TABLE3).read_text())
    doc.update(resources={"cpus": 1, "gpus": 0.5}, seeds=[1])
    spec = tmp_path / "t3-half.yaml"
    spec.write_text(yaml.safe_dump(doc))
    assert tsweep(["plan", str(spec), "--profile", "gpu", "--data-dir", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("memory:"))
    assert "peaked at 12.5 GiB of GPU memory alone, 2 of it about 25.0 GiB; big (rows big) 30.0 GiB alone" in line
    assert "2 of it about 60.0 GiB" in line
    assert "rows with more parameters (C3, C5, C7) need more" in line  # big's memory was measured; theirs not
    assert "more than the device" not in line  # the device's memory not recorded: nothing to compare with
    body["measurements"]["gpu"]["device_memory_gb"] = 47.5  # a device too small for two of big's trials
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    assert tsweep(["plan", str(spec), "--profile", "gpu", "--data-dir", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("memory:"))
    assert "60.0 GiB; more than the device's 47.5 GiB for big: 1 of its trials fit at most" in line
    assert "for the base row" not in line  # 25 GiB of two base trials fit


@pytest.mark.parametrize("packing,named", [("flex", "A1 (head size 512 is above FlexAttention's 256 here)"),
                                           ("varlen", "A1 (head size 512 is above FlashAttention's 256)")])  # fmt: skip
def test_rows_that_train_padded_batches_where_the_measured_trial_packed_are_named(tmp_path, capsys, packing, named):
    settings = {**SETTINGS, "packing": "on", "packed_attention": packing}
    body = {"measurements": {"gpu": {**record("base", 1.8e14, 63_082_496), "settings": settings, "packing": packing}}}
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    out = run_plan(capsys, tmp_path)
    line = next(x for x in out.splitlines() if x.startswith("the measured trial packed its batches"))
    assert f"({packing} attention, bf16); rows {named} train padded batches on a GPU" in line and "B1" not in line
    for ran in ("mask", "off"):  # packed on a CPU (every row packs there), or not packed at all (compile off)
        body["measurements"]["gpu"]["packing"] = ran
        (tmp_path / "device-bench.json").write_text(json.dumps(body))
        assert "train padded batches on a GPU" not in run_plan(capsys, tmp_path)


def test_a_profiles_alias_finds_its_measurements(tmp_path):
    base = {**record("base", 1.0e14, 20e6), "profile": "gpu-half"}
    big = {**record("big", 2.0e14, 60e6, label="big"), "profile": "gpu-half"}
    body = {"measurements": {"gpu-half": base, "gpu": record("base", 1.8e14, 63e6)}, "models": {"gpu-half/big": big}}
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    source = estimate.resolve_throughput("gpu-small", data_dir=tmp_path)  # gpu-small: an alias of gpu-half
    assert source.flops_per_second == 1.0e14 and "none stored" not in source.source
    assert [m.label for m in source.models] == ["base", "big"]


def test_a_profiles_record_under_an_alias_and_under_its_name_the_newest_wins_and_models_join(tmp_path):
    older = {**record("base", 1.0e14, 20e6), "profile": "gpu-half", "measured_at": 1}
    newer = {**record("base", 2.0e14, 20e6), "profile": "gpu-small", "measured_at": 2}
    big = {**record("big", 3.0e14, 60e6, label="big"), "profile": "gpu-half"}
    body = {"measurements": {"gpu-half": older, "gpu-small": newer}, "models": {"gpu-half/big": big}}
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    for name in ("gpu-half", "gpu-small"):
        source = estimate.resolve_throughput(name, data_dir=tmp_path)
        assert source.flops_per_second == 2.0e14 and [m.label for m in source.models] == ["base", "big"]
    estimate.store_measurement(tmp_path, "gpu-half", {**older, "measured_at": 3})  # the alias's copy goes
    estimate.store_model_measurement(tmp_path, "gpu-small", "big", {**big, "flops_per_second": 3.5e14})
    stored = json.loads((tmp_path / "device-bench.json").read_text())
    assert set(stored["measurements"]) == {"gpu-half"} and set(stored["models"]) == {"gpu-small/big"}


def test_rows_far_larger_than_the_one_measured_are_said_to_take_its_rate(tmp_path, capsys):
    write(tmp_path, {})
    out = run_plan(capsys, tmp_path)
    assert "rows C5 (164M), big (214M), C4 (27M) are planned at the base row's measured rate (63M parameters)" in out
    assert "the trials of C4 (27M) likely take longer than planned" in out  # smaller: the GPU less busy
    write(tmp_path, {"gpu/big": record("big", 3.0e14, 214_252_544, label="big")})
    assert "are planned at the base row's measured rate" not in run_plan(capsys, tmp_path)


def test_the_packed_attention_knob_and_the_plans_backends_name_the_flex_tiles_segments_builds():
    from sweeps.plan.estimate import PACKED_BACKENDS
    from transformer_core.run_config import PACKED_ATTENTION
    from transformer_core.segments import FLEX_TILES

    assert PACKED_ATTENTION == ("auto", "varlen", *FLEX_TILES) and PACKED_BACKENDS == ("varlen", *FLEX_TILES)

"""Plan estimates for the device that will run a sweep: a stored bench-device measurement, --device-flops, a known
device x MFU; none for a GPU profile without a source.  The gpu profiles' sizing."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sweeps.cli import main as tsweep
from sweeps.plan import estimate
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Resources, load_spec, plan
from tests.helpers import ROOT
from transformer_core.run_config import make_run_config

TABLE3 = str(ROOT / "sweeps" / "specs" / "table3.yaml")
SMOKE = str(ROOT / "tests" / "specs" / "smoke.yaml")


def base_row_seconds(profile: str, flops_per_second: float) -> float:
    """The base row's time at a profile, worked out here from the paper's numbers and the profile's rules."""
    p = get_profile(profile)
    params = 63_082_496 if p.width == 1.0 else None  # base at vocabulary 37,000 (tsweep params)
    steps = p.scale_steps(100_000)
    tokens = steps * p.train["tokens_per_batch"] * p.train.get("accumulate", 1) * 0.9
    # evaluation: bible's 675 dev and 433 test sentences; the first eval_sentences of dev at each evaluation before
    # the last (BLEU at every evaluation), the whole dev at the last and test at the end; dev perplexity each time
    n, dev, test, beam = -(-steps // p.train["eval_every"]), 675, 433, p.train.get("beam", 4)
    first = min(p.train.get("eval_sentences") or dev, dev) if p.train.get("eval_bleu", "all") == "all" else 0
    decoded, scored = (n - 1) * first + dev + test, n * dev + test
    evaluation = n * 1.0 + decoded * 0.0065 + (scored * 120 + decoded * beam * 30) * params / flops_per_second
    return 6 * params * tokens / flops_per_second + evaluation


def run_plan(capsys, *args) -> tuple[int, str]:
    code = tsweep(["plan", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def base_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("base  base      1"))


def write_measurement(data_dir: Path, profile: str, flops: float) -> None:
    record = {"profile": profile, "device": "NVIDIA H100 80GB HBM3", "precision": "bf16", "flops_per_second": flops}
    (data_dir / "device-bench.json").write_text(json.dumps({"measurements": {profile: {**record, "measured_at": 0}}}))


def test_estimate_from_a_stored_measurement(tmp_path, capsys):
    write_measurement(tmp_path, "gpu", 2.0e14)
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path))
    assert code == 0, out
    expected = estimate.duration(base_row_seconds("gpu", 2.0e14))
    assert expected == "72min" and base_line(out).split()[-2] == expected
    assert "throughput source: measured by tsweep bench-device on NVIDIA H100 80GB HBM3 bf16" in out
    assert "time at 2e+14 FLOP/s per device" in out


def test_device_flops_wins_over_a_stored_measurement(tmp_path, capsys):
    write_measurement(tmp_path, "gpu", 2.0e14)
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path), "--device-flops", "3e14")
    assert code == 0, out
    assert base_line(out).split()[-2] == estimate.duration(base_row_seconds("gpu", 3.0e14)) == "48min"
    assert "throughput source: given with --device-flops" in out
    # the older flag name still works
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--flops-per-second", "3e14", "--data-dir", str(tmp_path))
    assert "throughput source: given with --device-flops" in out


def test_known_device_times_mfu(tmp_path, capsys):
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--gpu", "h100", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert base_line(out).split()[-2] == estimate.duration(base_row_seconds("gpu", 989e12 * 0.35)) == "42min"
    assert "NVIDIA H100 SXM peak dense bf16 9.89e+14 FLOP/s x assumed MFU 0.35" in out
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--gpu", "p100", "--mfu", "0.5")
    assert "P100" in out and "fp32 1.06e+13 FLOP/s x assumed MFU 0.5" in out


def test_a_gpu_profile_without_a_source_gets_no_cpu_days(tmp_path, capsys):
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert base_line(out).split()[-2] == "-" and "no time estimate: profile 'gpu' is meant for GPUs" in out
    assert "bench-device" in out and "d wall" not in out and "FLOP/s per device" not in out
    code, out = run_plan(capsys, TABLE3, "--profile", "cpu", "--data-dir", str(tmp_path))
    assert "throughput source: this project's measurement on a 2-core laptop" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--gpu", "tpu9"], "--gpu 'tpu9' is unknown: allowed h100"),
        (["--device-flops", "-1"], "--device-flops -1.0 is invalid"),
        (["--gpu", "h100", "--mfu", "2"], "--mfu 2.0 is invalid"),
    ],
)
def test_bad_throughput_arguments_are_one_line(tmp_path, capsys, args, message):
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path), *args)
    assert code == 2 and message in out and len(out.strip().splitlines()) == 1


def test_an_unreadable_measurement_file_is_one_line(tmp_path, capsys):
    (tmp_path / "device-bench.json").write_text("{not json")
    code, out = run_plan(capsys, TABLE3, "--profile", "gpu", "--data-dir", str(tmp_path))
    assert code == 2 and "device-bench.json is not a device measurement file" in out


def test_workers_multiply_a_trials_throughput(tmp_path, capsys):
    doc = yaml.safe_load(Path(TABLE3).read_text())
    doc.update(resources={"cpus": 4, "gpus": 1, "workers": 8}, seeds=[1], max_concurrent=1)
    spec = tmp_path / "t3-8x.yaml"
    spec.write_text(yaml.safe_dump(doc))
    code, out = run_plan(capsys, str(spec), "--profile", "gpu-8x", "--gpu", "h100", "--data-dir", str(tmp_path))
    assert code == 0, out
    seconds = base_row_seconds("gpu-8x", 8 * 989e12 * 0.35)
    assert base_line(out).split()[-2] == estimate.duration(seconds) == "6min"
    assert "8 device(s) per trial" in out


def test_gpu_profiles_are_sized_for_an_h100():
    spec = load_spec(TABLE3)
    trials = {t.row: t for t in plan(spec, "gpu") if t.seed == spec.seeds[0]}
    cfg = make_run_config(trials["base"].values)
    params, flops = estimate.trial_flops(cfg)
    assert (cfg.model.d_model, cfg.model.N, cfg.train.steps) == (512, 6, 100_000)  # the paper's base trial
    assert cfg.train.tokens_per_batch * cfg.train.accumulate == 25_000 and cfg.data.vocab == 37_000
    hours = estimate.trial_seconds(flops, cfg.train, 989e12 * 0.35) / 3600
    assert 0.6 < hours < 1.25  # within an hour on one H100 at 35% MFU
    small = get_profile("gpu-small")  # an alias of gpu-half
    assert (small.width, small.steps_factor, small.data["vocab"]) == (0.5, 0.2, 16000)
    eight = get_profile("gpu-8x")
    assert eight.train["tokens_per_batch"] * eight.train["accumulate"] == 25_000 and eight.train["accumulate"] % 8 == 0


def test_makespan_and_devices_per_trial():
    assert (
        estimate.makespan([5, 4, 3], 2) == 7
        and estimate.makespan([6, 1, 1, 1], 2) == 6
        and estimate.makespan([1, 1], 8) == 1
    )
    assert estimate.devices_per_trial(Resources(gpus=0.5, workers=1)) == 0.5
    assert estimate.devices_per_trial(Resources(gpus=1, workers=8)) == 8
    assert estimate.match_device("NVIDIA H100 80GB HBM3") == "h100" and estimate.match_device("NVIDIA L40S") == "l40s"


def test_bench_device_stores_a_measurement_that_plan_uses(tmp_path, capsys, fixture_data_dir):
    """A real (tiny) run on this machine's CPU at the smoke profile."""
    data = tmp_path / "data"
    argv = ["bench-device", "--profile", "smoke", "--steps", "3", "--warmup", "1", "--windows", "2"]
    code = tsweep([*argv, "--data-dir", str(data)])
    out = capsys.readouterr().out
    assert code == 0 and "stored in" in out and "windows of 3 steps: " in out
    m = json.loads((data / "device-bench.json").read_text())["measurements"]["smoke"]
    assert m["flops_per_second"] > 0 and m["steps"] == 3 and m["profile"] == "smoke"
    assert len(m["windows"]) == 2 and m["tokens_per_second"] == pytest.approx(min(m["windows"]), abs=0.06)
    assert abs(m["flops_per_second"] - 6 * m["params"] * m["tokens_per_second"]) < 1e-6 * m["flops_per_second"]
    assert time.time() - m["measured_at"] < 600
    code, out = run_plan(capsys, SMOKE, "--profile", "smoke", "--data-dir", str(data))
    assert code == 0 and f"time at {m['flops_per_second']:.3g} FLOP/s per device" in out
    assert "measured by tsweep bench-device on" in out


def test_bench_device_times_its_windows_after_an_untimed_warm_up(capsys):
    from sweeps.plan.device_bench import timed_windows

    class Trainer:  # each step adds its number's tokens: 1 and 2 untimed, then 3 + 4, 5 + 6, 7 + 8
        device, tokens, step = SimpleNamespace(type="cpu"), 0, 0

        def train_step(self):
            self.step += 1
            self.tokens += self.step
            return 1.0, 1.0, self.step

    warm, windows = timed_windows(Trainer(), warmup=2, steps=2, windows=3)
    assert warm >= 0 and [w[2] for w in windows] == [7, 11, 15]
    assert all(w[0] == pytest.approx(w[2] / w[1]) for w in windows)
    assert tsweep(["bench-device", "--windows", "0"]) == 2
    assert "--windows 0 is invalid: allowed steps >= 1, warmup >= 0, windows >= 1" in capsys.readouterr().err


def test_a_measured_run_that_diverges_is_an_error_not_a_rate():
    """A step whose loss is not finite (read every step, or at its window's read with loss_sync=window) ends the
    measurement with one message: steps that trained nothing are no rate."""
    from sweeps.plan.device_bench import DivergedError, timed_windows

    class Trainer:
        device, tokens, step, lazy = SimpleNamespace(type="cpu"), 0, 0, False
        cfg = SimpleNamespace(train=SimpleNamespace(log_every=3, steps=100))

        def train_step(self):
            self.step += 1
            self.tokens += 10
            return (math.inf if self.step == 5 else 2.0), 2.0, 10

    with pytest.raises(DivergedError, match="non-finite training loss at step 5"):
        timed_windows(Trainer(), warmup=1, steps=4, windows=2)

    class Lazy(Trainer):
        lazy = True

        def train_step(self):
            super().train_step()
            return math.nan, math.nan, 10  # unread until the window's end

        def settle(self):
            return (None, None, "non-finite training loss at step 5") if self.step == 6 else (2.0, None, None)

    assert [w[2] for w in timed_windows(Lazy(), warmup=1, steps=2, windows=2)[1]] == [20, 20]
    with pytest.raises(DivergedError, match="diverged .non-finite training loss at step 5"):
        timed_windows(Lazy(), warmup=1, steps=4, windows=2)


def test_the_device_hours_table_in_the_docs_is_what_the_script_prints(capsys, monkeypatch, tmp_path):
    # no prepared corpus: the split sizes come from the known corpora's table, not from whatever another test of
    # this process prepared in the session's data directory (the fixture corpus's small splits)
    monkeypatch.setenv("TSWEEP_DATA_DIR", str(tmp_path))
    tsweep(["estimate"])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    docs = (ROOT / "docs" / "cluster.md").read_text().splitlines()
    assert len(printed) == 4 and all(line in docs for line in printed)


def test_the_profile_help_of_the_commands_names_every_profile():
    from sweeps.spec.profiles import PROFILES_HELP, load_profiles

    named = PROFILES_HELP.split(" (")[0].replace(" or ", ", ").split(", ")
    assert sorted(named) == sorted(load_profiles())  # every profile, and no other

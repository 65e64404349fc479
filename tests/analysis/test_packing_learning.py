"""benchmarks/packing_learning.py's judgement: packed minus padded dev cross-entropy against an equivalence margin
(equivalent by two one-sided tests, differs, inconclusive), paired by seed only where the trials show the same
batches, and no verdict on the candidate where a seed did not finish or the candidate did not train packed.

The statistics are tested like code: per-seed tables simulated with a known truth, and two-sided bands around the
rates each verdict must have.  No trial is trained here."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from benchmarks.packing_learning import (
    FROM_METRICS,
    compare,
    keep_evidence,
    pairing,
    read_trial,
    schedule_position,
    trial_line,
    verdict,
)

MARGIN = 0.02
SEEDS = (1, 2, 3)


def simulate(rng, diff: float, runs: int, paired: bool, seed_sd: float = 0.02, pair_sd: float = 0.004) -> Counter:
    """Verdicts of ``runs`` simulated 3-seed pairs whose true packed - padded difference is ``diff`` nats.

    Paired: a seed's two trials share its draw (sd ``seed_sd``, the seed-to-seed spread) and differ by ``diff`` plus
    noise of sd ``pair_sd`` (the pair difference's sd); unpaired: every trial its own draw of sd ``seed_sd``."""
    seen: Counter = Counter()
    for _ in range(runs):
        base = 4.7 + rng.normal(0, seed_sd, len(SEEDS))
        if paired:
            noise = rng.normal(0, pair_sd / math.sqrt(2), (2, len(SEEDS)))
            padded, packed = base + noise[0], base + diff + noise[1]
        else:
            padded, packed = base, 4.7 + diff + rng.normal(0, seed_sd, len(SEEDS))
        c = compare(dict(zip(SEEDS, padded)), dict(zip(SEEDS, packed)), paired, MARGIN)
        seen[c["verdict"] + (f" ({c['direction']})" if c["verdict"] == "differs" else "")] += 1
    return seen


def test_no_difference_with_paired_noise_small_against_the_margin_is_shown_equivalent():
    """Paired, true difference 0, pair sd 0.004 (seed sd 0.02 cancels): with 2 degrees of freedom the 90% interval
    is mean +- 2.92 s / sqrt(3), inside +-0.02 unless the sample sd s exceeds about 0.0115, which has probability
    about exp(-8) at a true 0.004 (and the mean's own spread, sd 0.0023, costs little): power about 0.998.  The
    band [0.99, 1] also fails a TOST at 95% intervals (power about 0.98)."""
    seen = simulate(np.random.default_rng(1), 0.0, 1000, paired=True)
    assert 0.99 <= seen["equivalent"] / 1000 <= 1.0


def test_a_true_difference_at_the_margin_is_called_equivalent_about_five_percent_of_the_time():
    """TOST's size: at a true difference equal to the margin, the upper 90% bound falls below it 5% of the time
    (binomial sd 0.005 at 2000 runs: the band [0.035, 0.065] is 3 sd each way).  An interval at 95% would give
    2.5%, and "the 95% interval holds 0" (no margin) about 7.5%: both outside the band."""
    seen = simulate(np.random.default_rng(2), MARGIN, 2000, paired=True)
    assert 0.035 <= seen["equivalent"] / 2000 <= 0.065


def test_a_difference_three_times_the_margin_differs_and_packed_is_worse():
    seen = simulate(np.random.default_rng(3), 3 * MARGIN, 200, paired=True)
    assert seen["differs (packed worse)"] / 200 >= 0.99
    better = simulate(np.random.default_rng(4), -3 * MARGIN, 200, paired=True)
    assert better["differs (packed better)"] / 200 >= 0.99


def test_unpaired_seeds_with_their_seed_spread_are_mostly_inconclusive():
    """Welch, 3 seeds a side, seed sd 0.02, true difference 0: the difference's standard error is
    0.02 sqrt(2/3) = 0.016 and its 90% interval about +-2.1 x 0.016 = +-0.035 with about 4 degrees of freedom,
    wider than the +-0.02 margin, so equivalence is seldom shown (about 2%) and a true 0 is rejected at about
    3-4% (Welch is a little conservative here): about 94% inconclusive (binomial sd 0.007 at 1000 runs).
    "The 95% interval holds 0" would have called about 96% of these "within seed noise"."""
    seen = simulate(np.random.default_rng(5), 0.0, 1000, paired=False)
    assert 0.91 <= seen["inconclusive"] / 1000 <= 0.97
    assert seen["equivalent"] / 1000 <= 0.05


def test_compare_is_scipys_paired_or_welch_test_of_packed_minus_padded():
    padded = {1: 4.656, 2: 4.702, 3: 4.678}
    packed = {1: 4.660, 2: 4.707, 3: 4.681}
    pa, pb = [packed[s] for s in SEEDS], [padded[s] for s in SEEDS]
    c = compare(padded, packed, True, MARGIN)
    rel = stats.ttest_rel(pa, pb)
    assert c["estimate"] == pytest.approx(np.mean(pa) - np.mean(pb))
    assert c["ci95"] == pytest.approx(tuple(rel.confidence_interval(0.95)))
    assert c["ci90"] == pytest.approx(tuple(rel.confidence_interval(0.90)))
    assert c["p"] == pytest.approx(rel.pvalue) and c["sd_diff"] == pytest.approx(np.std(np.subtract(pa, pb), ddof=1))
    u = compare(padded, packed, False, MARGIN)
    welch = stats.ttest_ind(pa, pb, equal_var=False)
    assert u["ci95"] == pytest.approx(tuple(welch.confidence_interval(0.95))) and u["sd_diff"] is None
    assert u["ci90"] == pytest.approx(tuple(welch.confidence_interval(0.90)))
    # paired: a small, steady difference is detected and still equivalent; unpaired the seed spread hides it
    assert c["verdict"] == "equivalent" and c["detected"] and c["direction"] == "packed worse"
    assert u["verdict"] == "inconclusive"
    with pytest.raises(ValueError):
        compare({1: 4.6}, {1: 4.7}, True, MARGIN)


def finished(side: str, seed: int, ce: float, tokens: int = 9_000, **more) -> dict:
    """A finished trial as read_trial gives it (with run_trial's side and seed)."""
    packed = side == "packed"
    return {"side": side, "seed": seed, "status": "finished", "dev_ce": ce, "steps": 500, "target_tokens": tokens,
            "packing": "flex" if packed else "off", "packing_reason": "FlexAttention" if packed else "packing=off",
            "compile": "graphs" if packed else "off", "source": "result.json",
            "train": {"steps": 500, "warmup": 4000, "schedule": "rsqrt"}, **more}  # fmt: skip


def table(diffs=(0.003, 0.004, 0.002), base=(4.66, 4.70, 4.68)) -> list[dict]:
    return [t for s, d, b in zip(SEEDS, diffs, base) for t in (finished("padded", s, b), finished("packed", s, b + d))]


def test_the_verdict_line_names_the_test_the_margin_the_step_and_the_schedule():
    line = verdict(table(), 500, MARGIN, "graphs")
    assert line.startswith("verdict: equivalent: the 90% interval lies inside the margin")
    assert "a difference smaller than the margin was detected (packed worse)" in line
    assert "margin +-0.020 nats (a 2.0% perplexity ratio" in line
    assert "paired by seed" in line and "at step 500 of a 4000-step warmup (learning rate 0.125 of its peak)" in line
    assert "compile asked" not in line


def test_pairing_is_read_from_the_trials_target_tokens():
    trials = table()
    by = {side: {t["seed"]: t for t in trials if t["side"] == side} for side in ("padded", "packed")}
    assert pairing(by["padded"], by["packed"])[0]
    by["packed"][2] = {**by["packed"][2], "target_tokens": 9_100}
    paired, why = pairing(by["padded"], by["packed"])
    assert not paired and "seed 2's trials trained different batches (target_tokens 9,000 padded, 9,100 packed)" in why
    other = [{**t, "target_tokens": 9_100} if (t["side"], t["seed"]) == ("packed", 2) else t for t in trials]
    line = verdict(other, 500, MARGIN)
    assert "unpaired (Welch)" in line and "paired batches" in line
    assert line.startswith("verdict: inconclusive: the interval is wider than the margin")
    welch = stats.ttest_ind([t["dev_ce"] for t in other if t["side"] == "packed"],
                            [t["dev_ce"] for t in other if t["side"] == "padded"], equal_var=False)  # fmt: skip
    low, high = welch.confidence_interval(0.95)
    assert f"95% [{low:+.4f}, {high:+.4f}]" in line


def test_a_clear_difference_says_which_way():
    line = verdict(table(diffs=(0.061, 0.058, 0.060)), 500, MARGIN)
    assert line.startswith("verdict: differs: packed worse (the 95% interval excludes 0)")
    line = verdict(table(diffs=(-0.061, -0.058, -0.060)), 500, MARGIN)
    assert line.startswith("verdict: differs: packed better")


def test_a_seed_the_candidate_did_not_finish_fails_it_with_result_jsons_reason(tmp_path):
    (tmp_path / "result.json").write_text(
        json.dumps({"status": "diverged", "diverged_at": 240, "reason": "non-finite training loss", "seed": 2})
    )
    diverged = read_trial(tmp_path, 500, "failed", "exit 3: run diverged")
    assert diverged["status"] == "diverged" and diverged["why"] == "at step 240: non-finite training loss"
    trials = [t for t in table() if (t["side"], t["seed"]) != ("packed", 2)] + [
        {**diverged, "side": "packed", "seed": 2}
    ]
    line = verdict(trials, 500, MARGIN)
    assert line == "verdict: candidate failed: seed 2 diverged (at step 240: non-finite training loss)"


def test_a_seed_todays_step_did_not_finish_gives_no_verdict():
    stuck = {"side": "padded", "seed": 1, "status": "timed out", "why": "after 320 s; no result.json, no evaluation"}
    trials = [t for t in table() if (t["side"], t["seed"]) != ("padded", 1)] + [stuck]
    line = verdict(trials, 500, MARGIN)
    assert line.startswith("verdict: no verdict: today's step did not finish seed 1 timed out (after 320 s;")
    assert "candidate" not in line


def test_a_packed_trial_that_trained_padded_batches_is_refused():
    fell = finished("packed", 3, 4.68, packing="off", packing_reason="no packed attention for this device")
    trials = [t for t in table() if (t["side"], t["seed"]) != ("packed", 3)] + [fell]
    line = verdict(trials, 500, MARGIN)
    assert line == (
        "verdict: candidate not measured: seed 3 trained padded batches (no packed attention for this device)"
    )


def test_a_compile_mode_other_than_asked_is_named_and_still_compared():
    trials = [{**t, "compile": "on"} if t["side"] == "packed" else t for t in table()]
    line = verdict(trials, 500, MARGIN, "graphs")
    assert line.startswith("verdict: equivalent") and "compile asked graphs, ran on (seeds 1, 2, 3)" in line


def test_a_trial_cut_short_after_its_last_evaluation_keeps_its_figure(tmp_path):
    records = [{"kind": "train", "step": 500, "loss": 4.9}, {"kind": "eval", "step": 500, "steps": 500,
               "dev_ppl": math.exp(4.6812), "dev_ce": 4.6812}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"kind": "tr')
    t = read_trial(tmp_path, 500, "timed out", "after 320 s")
    assert t["status"] == "finished" and t["dev_ce"] == pytest.approx(4.6812) and t["source"] == FROM_METRICS
    t = {**t, "side": "packed", "seed": 3}
    assert (
        trial_line(t) == f"packed seed 3: dev cross-entropy 4.6812 at step 500 ({FROM_METRICS}: timed out after 320 s)"
    )
    trials = [x for x in table() if (x["side"], x["seed"]) != ("packed", 3)] + [t]
    line = verdict(trials, 500, MARGIN)
    assert "unpaired (Welch): seed 3's packed trial reports no target_tokens" in line
    assert f"seeds 3: dev_ce {FROM_METRICS}" in line
    assert "that the candidate's seeds 3 trained packed batches is not confirmed (no result.json)" in line
    # an evaluation before the last step is not the compared figure
    (tmp_path / "metrics.jsonl").write_text(json.dumps({**records[1], "step": 250}) + "\n")
    t = read_trial(tmp_path, 500, "timed out", "after 320 s")
    assert t["status"] == "timed out" and t["why"] == "after 320 s; no result.json, last evaluation at step 250"


def test_a_trials_evidence_is_kept_without_its_checkpoints(tmp_path):
    work = tmp_path / "w"
    (work / "checkpoints").mkdir(parents=True)
    (work / "checkpoints" / "step-500.pt").write_bytes(b"x")
    for name in ("result.json", "metrics.jsonl", "config.json"):
        (work / name).write_text("{}")
    keep_evidence(work, tmp_path / "out.txt.trials" / "packed-s1")
    assert sorted(p.name for p in (tmp_path / "out.txt.trials" / "packed-s1").iterdir()) == [
        "config.json", "metrics.jsonl", "result.json"]  # fmt: skip


def test_the_schedule_position_is_step_over_warmup_before_the_peak():
    """The paper's schedule rises as step / warmup to its peak at step = warmup, then falls as (warmup / step)^0.5;
    linear and wsd are the trainer's own (wsd is 0 at its last step)."""
    assert schedule_position(500, {"steps": 500, "warmup": 4000}) == (
        "at step 500 of a 4000-step warmup (learning rate 0.125 of its peak)"
    )
    assert schedule_position(40, {"steps": 40, "warmup": 10, "schedule": "rsqrt"}).endswith(
        "past its 10-step warmup (rsqrt: learning rate 0.5 of its peak)"
    )
    assert (
        schedule_position(10, {"steps": 40, "warmup": 10})
        == "at step 10, the end of its warmup (the peak learning rate)"
    )
    assert schedule_position(20, {"steps": 20, "warmup": 10, "schedule": "wsd"}).endswith(
        "(wsd: learning rate 0 of its peak)"
    )
    assert schedule_position(500, None) == "at step 500 (warmup unknown: no config.json)"


def test_a_trial_line_says_what_trained_or_why_nothing_did():
    done = {**finished("packed", 2, 4.6963), "steps": 800, "target_tokens": 800 * 22_581, "device": "cuda",
            "precision": "bf16", "tokens_per_second": 265_000.4, "compile_seconds": 44.2}  # fmt: skip
    line = trial_line(done)
    assert line.startswith("packed seed 2: dev cross-entropy 4.6963 at step 800, 22,581 target tokens a step")
    assert "layout flex (FlexAttention); compile graphs; cuda bf16; 265,000 target tokens/s" in line
    assert "peak GPU memory" not in line  # a CPU trial's result.json has peak_cuda_gb null
    assert trial_line({**done, "peak_cuda_gb": 12.61}).endswith("compile 44 s, peak GPU memory 12.6 GiB")
    assert trial_line({"side": "padded", "seed": 3, "status": "timed out", "why": "after 320 s"}) == (
        "padded seed 3: timed out (after 320 s)"
    )


def _args(tmp_path, trial_timeout=None, deadline=None, left=None):
    import time
    from types import SimpleNamespace

    ends = time.monotonic() + left if left is not None else None
    return SimpleNamespace(profile="gpu", corpus="bible-en-de", steps=500, packing="on", set=[], padded_set=[],
                           packed_set=[], data_dir=str(tmp_path), trial_timeout=trial_timeout, deadline=deadline,
                           ends_at=ends, took={})  # fmt: skip


def test_a_trial_runs_no_longer_than_the_runs_deadline_leaves(tmp_path):
    """--deadline: each trial's limit is --trial-timeout cut to what is left of the run's deadline, so that a trial
    started late (the second of two waves, where the GPU's memory holds half the trials at once) is stopped before
    the device script's own timeout would kill the run and its verdict line."""
    from benchmarks.packing_learning import time_left, trial_limit

    def limit_of(args):
        return trial_limit(args, time_left(args))

    assert limit_of(_args(tmp_path, 300)) == (300, "after 300 s")
    assert limit_of(_args(tmp_path)) == (None, "")
    limit, why = limit_of(_args(tmp_path, 300, 320, left=120))
    assert 115 < limit <= 120 and why.endswith("at the run's 320 s deadline")
    assert limit_of(_args(tmp_path, 60, 320, left=120)) == (60, "after 60 s")
    limit, _ = limit_of(_args(tmp_path, None, 320, left=200))
    assert 195 < limit <= 200


def test_a_trial_past_the_deadline_is_timed_out_and_one_too_late_is_not_started(tmp_path, monkeypatch):
    import subprocess

    import benchmarks.packing_learning as pl

    given = []

    def train(cmd, timeout=None, **_):  # the child `tsweep train`, stopped at its limit as subprocess.run stops it
        given.append(timeout)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(pl.subprocess, "run", train)
    t = pl.run_trial(_args(tmp_path, 300, 320, left=100), "packed", 2, tmp_path)
    assert 95 < given[0] <= 100 and t["status"] == "timed out"
    assert t["why"].startswith("after ") and "at the run's 320 s deadline; no result.json, no evaluation" in t["why"]
    late = pl.run_trial(_args(tmp_path, 300, 320, left=pl.START_SECONDS - 1), "packed", 3, tmp_path)
    assert len(given) == 1 and late["status"] == "not started" and "of the run's 320 s deadline" in late["why"]
    # a run out of time is no verdict on either side, not a failed candidate
    for side in ("packed", "padded"):
        trials = [x for x in table() if (x["side"], x["seed"]) != (side, 3)] + [{**late, "side": side}]
        line = verdict(trials, 500, MARGIN)
        assert line.startswith(f"verdict: no verdict: out of time, not started: {side} seed 3 (")
    # ... but a trial that really failed still says so first
    broken = {"side": "packed", "seed": 2, "status": "failed", "why": "exit 1: CUDA out of memory"}
    trials = [x for x in table() if x["seed"] not in (2, 3) or x["side"] == "padded"] + [broken, late]
    assert verdict(trials, 500, MARGIN).startswith("verdict: candidate failed: seed 2 failed (exit 1: CUDA out of")
    # a short --trial-timeout with a far deadline still starts the trial
    pl.run_trial(_args(tmp_path, 20, 320, left=300), "packed", 1, tmp_path)
    assert given[-1] == 20 and len(given) == 2


def test_a_trial_is_not_started_with_less_left_than_its_sides_quickest_trial_took(tmp_path, monkeypatch):
    """Under a deadline, a trial that cannot finish is not started (under MPS it would slow the trials still
    running): the least time left is its side's quickest finished trial so far, or START_SECONDS before one."""
    import subprocess

    import benchmarks.packing_learning as pl

    args = _args(tmp_path, None, 320, left=100)
    assert pl.start_seconds(args, "packed") == pl.START_SECONDS
    args.took = {"packed": [140.0, 95.0], "padded": [10.0]}
    assert pl.start_seconds(args, "packed") == 95.0 and pl.start_seconds(args, "padded") == pl.START_SECONDS
    args.took["packed"] = [120.0]
    started = []
    monkeypatch.setattr(
        pl.subprocess, "run", lambda cmd, **kw: started.append(cmd) or subprocess.CompletedProcess(cmd, 0)
    )
    late = pl.run_trial(args, "packed", 3, tmp_path)
    assert not started and late["status"] == "not started" and "(a trial needs 120 s)" in late["why"]
    pl.run_trial(args, "padded", 3, tmp_path)  # the padded side's quickest took 10 s: it starts
    assert len(started) == 1

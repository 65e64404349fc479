"""Learning-rate schedules: pure functions checked against hand-computed values."""

import math

import pytest

from transformer_core.errors import ConfigError
from transformer_core.optim import learning_rate, paper_lr, peak_lr
from transformer_core.run_config import TrainConfig, make_run_config

D, W, STEPS = 64, 10, 100
PEAK = 64**-0.5 * 10**-0.5  # 0.125 * 0.31623 = 0.039528


def lr(step, schedule, scale=1.0, cooldown=0.2, steps=STEPS):
    return learning_rate(step, steps, D, W, scale, schedule, cooldown)


def test_peak_is_the_paper_schedule_at_warmup():
    assert peak_lr(D, W) == pytest.approx(0.0395284708)
    assert peak_lr(D, W, 2.0) == pytest.approx(2 * 0.0395284708)
    for schedule in ("rsqrt", "linear", "wsd"):
        assert lr(W, schedule) == pytest.approx(PEAK), schedule


def test_rsqrt_is_the_papers():
    assert lr(5, "rsqrt") == pytest.approx(0.125 * 5 * 10**-1.5)  # warmup: linear
    assert lr(40, "rsqrt") == pytest.approx(0.125 / math.sqrt(40))  # then step^-0.5
    assert lr(40, "rsqrt", scale=3.0) == pytest.approx(3 * 0.125 / math.sqrt(40))
    for step in (1, 7, 10, 99, 100, 1000):
        assert lr(step, "rsqrt") == paper_lr(step, D, W)
    assert lr(STEPS, "rsqrt") > 0  # no decay to zero


def test_linear_warms_up_then_decays_to_zero_at_the_last_step():
    assert lr(1, "linear") == pytest.approx(PEAK / 10)
    assert lr(5, "linear") == pytest.approx(PEAK / 2)
    assert lr(55, "linear") == pytest.approx(PEAK * 45 / 90)  # halfway down from step 10 to 100
    assert lr(99, "linear") == pytest.approx(PEAK / 90)
    assert lr(STEPS, "linear") == 0.0
    assert lr(STEPS + 5, "linear") == 0.0  # never negative
    assert lr(55, "linear", scale=0.5) == pytest.approx(0.5 * PEAK / 2)


def test_wsd_is_constant_in_the_middle_and_decays_over_the_cooldown():
    assert lr(5, "wsd") == pytest.approx(PEAK / 2)
    assert all(lr(s, "wsd") == pytest.approx(PEAK) for s in range(W, 81))  # stable from step 10 to 80
    assert lr(90, "wsd") == pytest.approx(PEAK / 2)  # cooldown 0.2: decay over steps 80..100
    assert lr(99, "wsd") == pytest.approx(PEAK / 20)
    assert lr(STEPS, "wsd") == 0.0
    assert lr(75, "wsd", cooldown=0.5) == pytest.approx(PEAK / 2)  # decay over steps 50..100
    assert lr(STEPS, "wsd", cooldown=1.0) == 0.0


def test_schedule_and_cooldown_are_validated():
    with pytest.raises(ConfigError, match=r"schedule='cosine' is invalid: allowed one of 'rsqrt', 'linear', 'wsd'"):
        make_run_config({"schedule": "cosine"})
    with pytest.raises(ConfigError, match=r"schedule='x' is invalid"):
        TrainConfig(schedule="x")
    with pytest.raises(ConfigError, match=r"schedule='x' is invalid"):
        learning_rate(5, STEPS, D, W, 1.0, "x")
    for bad in ("0", "1.5", "-0.1"):
        with pytest.raises(ConfigError, match=r"cooldown=.* is invalid: allowed a number in \(0, 1\]"):
            make_run_config({"cooldown": bad})
    with pytest.raises(ConfigError, match=r"eval_bleu='some' is invalid: allowed one of 'all', 'final'"):
        make_run_config({"eval_bleu": "some"})
    cfg = make_run_config({"schedule": "wsd", "cooldown": "1"}).train
    assert (cfg.schedule, cfg.cooldown, cfg.eval_bleu) == ("wsd", 1.0, "all")
    assert TrainConfig().schedule == "rsqrt" and TrainConfig().cooldown == 0.2
    with pytest.raises(ConfigError, match=r"beam_stop='early' is invalid: allowed one of 'exact', 'length'"):
        make_run_config({"beam_stop": "early"})
    assert make_run_config({"beam_stop": "length"}).train.beam_stop == "length"  # ids: tests/test_variants.py

"""benchmarks/asha_vs_grid.py on a smoke grid: two real sweeps (to the end and under ASHA) and their accounting."""

import importlib.util
import math
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # the benchmark's own accounting, two sweeps; make test-slow runs it

STEPS, EVERY = 20, 5


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("asha_vs_grid", ROOT / "benchmarks" / "asha_vs_grid.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured(bench, tmp_path_factory, fixture_data_dir):
    doc = {
        "name": "asha-smoke",
        "corpus": {"name": "bible-en-de"},
        "base": {"preset": "base", "lr_scale": 1.0},
        "seeds": [1, 2],
        "rows": {"G": [{"label": "lr0.1", "lr_scale": 0.1}, {"label": "lr3", "lr_scale": 3.0}]},
        "train": {"steps": STEPS, "eval_every": EVERY},
        "metric": "dev_ppl",
        "mode": "min",
        "max_concurrent": 2,
    }
    out = tmp_path_factory.mktemp("asha")
    return bench.measure(doc, out, "smoke", num_cpus=2), out


def test_the_scheduler_follows_the_evaluations(bench):
    assert bench.asha_scheduler(4) == {"type": "asha", "grace_period": 1, "reduction_factor": 3, "max_t": 5}
    assert bench.rungs(1, 3, 9) == [1, 3, 9]
    with pytest.raises(SystemExit, match="rung at report 3"):
        bench.asha_scheduler(3)  # the last evaluation would be a rung


def test_trial_steps_are_counted_per_trial(measured):
    m, out = measured
    assert m.trials == 6 and m.seeds == 2
    assert m.full_steps == 3 * 2 * STEPS  # every full trial trained to the end
    assert 0 < m.asha_steps <= m.full_steps
    # an ASHA trial ends at a rung (reports 1 and 3: steps 5 and 15) or at the end; the sum is of those
    from sweeps import load_sweep

    asha = load_sweep(out / "asha").trials
    assert len(asha) == 6 and set(asha["step"]) <= {EVERY, 3 * EVERY, STEPS}
    assert m.asha_steps == int(asha["step"].sum())
    assert m.stopped == int((asha["step"] < STEPS).sum()) == (asha["status"] == "stopped early").sum()
    assert math.isclose(m.ratio, m.asha_steps / m.full_steps)


def test_every_configuration_is_in_both_runs(measured):
    m, _ = measured
    assert {c.row for c in m.configs} == {"base", "lr0.1", "lr3"}
    for c in m.configs:
        assert len(c.full_seeds) == 2 and math.isfinite(c.full)
        assert c.reached in (EVERY, 3 * EVERY, STEPS) and math.isfinite(c.asha_last)
        assert (c.finished > 0) == math.isfinite(c.asha_end) and (c.finished > 0) == (c.reached == STEPS)
    best = min(m.configs, key=lambda c: c.full)  # dev PPL: lower is better
    assert m.full_best == best.row
    assert m.asha_best in {c.row for c in m.configs if c.finished}  # ASHA ran at least one trial to the end


def test_the_report_says_pass_or_miss(bench, measured):
    m, _ = measured
    text = bench.report(m, "# header")
    assert text.startswith("# header\ngrid: 3 configurations x 2 seeds = 6 trials of 20 steps")
    assert f"trial-steps  full {m.full_steps:,}  ASHA {m.asha_steps:,}" in text
    verdict = "PASS" if m.passed else "MISS"
    assert f": {verdict} (best " in text and ("PASS" in text) != ("MISS" in text)
    assert m.passed == (m.within_noise and m.asha_steps <= 0.4 * m.full_steps)

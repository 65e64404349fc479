"""A search sweep's report is one model (build_search) drawn by its writers: markdown, CSV, HTML."""

import json

import pytest

from analysis.report.search_report import build_search, render_html, search_blocks, search_markdown, write_search_report

SAMPLES = [{"lr_scale": lr, "warmup": w} for lr, w in [(0.5, 5), (1.0, 10), (2.0, 5), (4.0, 20)]]


def make_search_sweep(root):
    """A search sweep of SAMPLES x two seeds at ``root``, BLEU peaking at lr_scale 1.5 (also the snapshot's)."""
    root.mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"name": "s", "profile": "smoke", "metric": "dev_bleu",
                                                 "mode": "max", "trials": [], "plan": {}}))  # fmt: skip
    for i, sampled in enumerate(SAMPLES):
        for seed in (1, 2):
            wd = root / "trials" / f"t{i}-{seed}"
            wd.mkdir(parents=True)
            trial = {"id": wd.name, "group": "base", "row": "base", "seed": seed, "config_hash": wd.name,
                     "values": {**sampled, "seed": seed}, "search": sampled}  # fmt: skip
            (wd / "trial.json").write_text(json.dumps(trial))
            bleu = 20 - 3 * abs(sampled["lr_scale"] - 1.5) + 0.3 * seed
            (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": bleu, "wall_seconds": 1.0}))
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return make_search_sweep(tmp_path_factory.mktemp("search") / "sweep")


def test_the_files_are_the_model_drawn(sweep, tmp_path):
    model = build_search(sweep, resamples=5)
    assert len(model.configs) == 4 and model.params == ["lr_scale", "warmup"] and model.confirm is None
    assert [name for _, name in model.sections] == list(model.figures)  # every figure has its section, in order
    out = write_search_report(sweep, tmp_path, resamples=5)
    assert (out / "report.md").read_text() == "\n".join(search_markdown(model))
    assert (out / "report.html").read_text() == render_html(search_blocks(model), model.figures, "s")
    assert {p.name for p in out.glob("*.png")} == set(model.figures)
    csvs = {"trials.csv", "configurations.csv", "expected-best.csv", "importance.csv"}
    assert csvs <= {p.name for p in out.iterdir()}


def test_a_search_with_no_trial_yet_reports_so(tmp_path):
    root = tmp_path / "sweep"
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"name": "s", "profile": "smoke", "metric": "dev_bleu",
                                                 "mode": "max", "trials": [], "plan": {}}))  # fmt: skip
    out = write_search_report(root, tmp_path / "report", resamples=5)
    md = (out / "report.md").read_text()
    assert "no trial yet" in md and "No sampled configuration has started yet." in md
    assert not (out / "trials.csv").exists()

"""Hostile text in a sweep's records reaching the report (issue 52): matplotlib's mathtext in group names."""

import json

from analysis.report import write_report
from tests.analysis.test_analysis import make_sweep

FIXTURE = {"base": {1: (20.0, 5.0), 2: (21.0, 5.1)}, "X1": {1: (15.0, 6.0), 2: (16.0, 6.1)}}


def test_a_group_name_with_dollar_signs_is_drawn_as_written(tmp_path):
    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    for path in sweep.glob("trials/X1-*/trial.json"):
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "group": "x$\\frac$ y"}))
    for path in sweep.glob("trials/*"):  # learning curves: one panel per group, titled with its name
        evals = [{"kind": "eval", "step": s, "dev_ce": 6.0 - s / 100, "dev_ppl": 9.0 - s / 50} for s in (50, 250)]
        (path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    out = write_report(sweep, samples=50)  # matplotlib's mathtext refused "$\\frac$": the report was not written
    assert '<img alt="learning curves"' in (out / "report.html").read_text()

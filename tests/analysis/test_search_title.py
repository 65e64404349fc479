"""A search report is titled and described by its spec (sweep.json's report record), as a rows report is."""

import json

from analysis.report.search_report import write_search_report
from tests.analysis.test_search_report_model import make_search_sweep


def test_the_search_report_honours_the_specs_title_and_description(tmp_path):
    root = make_search_sweep(tmp_path / "sweep")
    plain = (write_search_report(root, tmp_path / "plain", resamples=5) / "report.md").read_text()
    assert plain.startswith("# Search report: ")
    state = json.loads((root / "sweep.json").read_text())
    state["report"] = {"title": "Batch calibration", "description": "Which batch and warmup at fixed tokens?",
                       "paper": {}, "claims": []}  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    out = write_search_report(root, tmp_path / "titled", resamples=5)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert md.startswith(f"# Batch calibration: {state['name']}\n\nWhich batch and warmup at fixed tokens?\n")
    assert "Batch calibration" in page and "Which batch and warmup at fixed tokens?" in page

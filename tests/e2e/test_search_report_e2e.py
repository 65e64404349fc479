"""A real search sweep (Ray Tune, Optuna, MLflow) at the smoke profile: its report, load_sweep, and
optuna-dashboard on its study."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.data.samples import sample_label
from tests.helpers import tsweep


@pytest.fixture(scope="module")
def search_report(smoke_search, fixture_data_dir, tmp_path_factory):
    """The session's real search sweep (tests/e2e/conftest.py: Ray Tune, Optuna, MLflow at the smoke profile on the
    fixture corpus) and its `tsweep report`."""
    out, written = smoke_search[0], tmp_path_factory.mktemp("search-report")  # not into the shared sweep
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    rep = tsweep("report", str(out), "--out", str(written), env=env, timeout=900)
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    return out, written, rep.stdout


@pytest.mark.e2e
def test_the_search_report_of_a_real_smoke_search(search_report):
    out, report, stdout = search_report
    assert "search report written" in stdout
    md = (report / "report.md").read_text()
    trials = [json.loads((t / "trial.json").read_text()) for t in sorted((out / "trials").iterdir())]
    assert len(trials) == 5 and all(t["id"].startswith("sample-") and t["group"] == "search" for t in trials)
    samples = {sample_label(t["search"]) for t in trials}
    assert {t["row"] for t in trials} == samples and len(samples) == 5  # five configurations, not five seeds of base
    section = md.split("## Configurations")[1].split("##")[0]
    assert sum(line.startswith("| ") for line in section.splitlines()) == 1 + 5  # header + one row per sample
    assert all(s in section for s in samples) and "| base |" not in md
    every = md.split("## Every trial")[1]
    assert all(t["id"] in every for t in trials)
    assert "fANOVA" in md and "PED-ANOVA" in md and "Dodge et al. 2019" in md
    evp = pd.read_csv(report / "expected-best.csv")
    assert list(evp["n"]) == [1, 2, 3, 4, 5] and evp["expected_best"].is_monotonic_decreasing  # dev_ppl: min
    imp = pd.read_csv(report / "importance.csv")
    assert set(imp["evaluator"]) == {"fANOVA", "PED-ANOVA", "optuna-dashboard"}
    assert set(imp["param"]) <= {"lr_scale", "warmup", "d_model"} and imp["method"].str.contains("Evaluator").all()
    for png in ("progress.png", "parallel-coordinates.png", "slices.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({png})" in md
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    assert not re.search(r"(src|href)=[\"']?https?://", page)  # offline: nothing fetched from a network
    # Optuna's interactive plots of the study, drawn by the plotly.min.js shipped beside the page
    assert '<script src="plotly.min.js"></script>' in page and (report / "plotly.min.js").stat().st_size > 1e6
    for title in ("Optimization history (dev_ppl)", "Parallel coordinates (dev_ppl)", "Slices (dev_ppl"):
        assert title in page
    configs = pd.read_csv(report / "configurations.csv")
    best = configs.loc[configs["rank"] == 1, "dev_ppl"].iloc[0]
    finished = [json.loads((out / "trials" / t["id"] / "result.json").read_text()) for t in trials]
    assert best == pytest.approx(min(r["dev_ppl"] for r in finished if r["status"] == "finished"))


@pytest.mark.e2e
def test_load_sweep_reads_the_real_smoke_search(smoke_search):
    from sweeps import load_sweep

    s = load_sweep(smoke_search[0])
    assert s.kind == "search" and len(s.trials) == 5 and len(s.configurations) == 5
    assert set(s.curves["trial_id"]) == set(s.trials["trial_id"]) and s.curves["dev_ce"].notna().all()
    assert s.verdicts["rank"].iloc[0] == 1 and set(s.results["row"]) == set(s.configurations["sample"])


@pytest.mark.e2e
def test_optuna_dashboard_opens_the_search_study_over_loopback(smoke_search):
    """optuna-dashboard sqlite:///SWEEP_DIR/optuna.db (as docs/search.md says) serves the sweep's study on 127.0.0.1."""
    import shutil
    import socket
    import time
    import urllib.request

    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("optuna-dashboard is not installed (pip install -e '.[dashboard]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = smoke_search[0] / "optuna.db"
    proc = subprocess.Popen([exe, f"sqlite:///{db}", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        body, deadline = None, time.time() + 60
        while body is None and time.time() < deadline and proc.poll() is None:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5).read()
            except OSError:
                time.sleep(0.5)
        assert body is not None, "optuna-dashboard did not answer"
        (study,) = json.loads(body)["study_summaries"]
        assert study["study_name"] == "search-smoke" and study["directions"] == ["minimize"]
        detail = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{study['study_id']}",
                                                   timeout=10).read())  # fmt: skip
        assert len([t for t in detail["trials"] if t["state"] == "Complete"]) == 5
    finally:
        proc.terminate()
        proc.wait(timeout=30)

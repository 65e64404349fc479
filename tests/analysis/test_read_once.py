"""A report reads each run's files once (analysis.data.files.read_once), through the bounded reader only."""

import json
import os
import threading
from collections import Counter

from analysis.data import files
from analysis.report.writers import write_report
from tests.analysis.test_analysis import make_sweep
from transformer_core.rundir import EVALS


def test_a_report_reads_each_file_of_a_run_once(tmp_path, monkeypatch):
    sweep = make_sweep(tmp_path / "s")
    for trial in (sweep / "trials").iterdir():  # an evaluation half-way: read by the table, trajectory and plots
        if (trial / "result.json").exists():
            (trial / "metrics.jsonl").write_text(json.dumps({"kind": "eval", "step": 125, "steps": 250}) + "\n")
    reads: Counter = Counter()
    real = files._read_text

    def counting(path, limit):
        reads[os.path.abspath(path)] += 1
        return real(path, limit)

    monkeypatch.setattr(files, "_read_text", counting)
    write_report(sweep, samples=100)
    per_trial = [p for p in reads if f"{os.sep}trials{os.sep}" in p]
    kinds = {os.path.basename(p) for p in per_trial}
    assert {"trial.json", "result.json", "metrics.jsonl", "test.hyp", "test.ref"} <= kinds
    assert max(reads[p] for p in per_trial) == 1, reads.most_common(3)
    assert files._READ is None  # nothing kept once the report is built


def test_a_fifo_among_a_runs_evaluation_sets_does_not_block_the_report(tmp_path):
    sweep = make_sweep(tmp_path / "s")
    trial = next(t for t in sorted((sweep / "trials").iterdir()) if (t / "result.json").exists())
    (trial / EVALS).mkdir(exist_ok=True)
    os.mkfifo(trial / EVALS / "planted.json")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(write_report(sweep, samples=100)), daemon=True)
    worker.start()
    worker.join(120)  # a read of the FIFO would wait for a writer for ever
    assert done and (done[0] / "report.md").exists()

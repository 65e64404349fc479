"""What trains nothing imports no torch: `tsweep report`, `tsweep plan`, and a refused `evaluate` / `translate` /
`run` answer without torch's import (2-3 s on a 2-core machine), and a sweep's evaluation driver leaves torch to
its workers.  Each command runs in a fresh interpreter that then lists what it loaded."""

import json
import subprocess
import sys

from tests.analysis.test_analysis import make_sweep
from tests.helpers import ROOT, SPECS, tiny_run_config

PROBE = """
import json, sys
{pre}
from sweeps import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))[:3]}))
"""


def _run(*argv, pre: str = "") -> dict:
    """What the command returned, whether torch got loaded, and its last line on stderr."""
    code = PROBE.replace("{pre}", pre)
    r = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)  # fmt: skip
    lines = r.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("{"), r.stdout[-2000:] + r.stderr[-3000:]
    return {**json.loads(lines[-1]), "error": (r.stderr.strip().splitlines() or [""])[-1]}


def _finished_runs(sweep, data_dir) -> None:
    """The fixture sweep's finished trials given a real config.json and averaged checkpoints in result.json, so that
    `evaluate` gets past the run to the evaluation set (no checkpoint files: no model is loaded before that)."""
    config = tiny_run_config(data_dir).to_dict()
    state = json.loads((sweep / "sweep.json").read_text())
    trials = {t.parent.name: json.loads(t.read_text()) for t in sweep.glob("trials/*/trial.json")}
    state["plan"] = {tid: {k: t[k] for k in ("row", "seed", "config_hash")} for tid, t in trials.items()}
    (sweep / "sweep.json").write_text(json.dumps(state))
    for result in sweep.glob("trials/*/result.json"):
        record = json.loads(result.read_text())
        if record["status"] == "finished":
            (result.parent / "config.json").write_text(json.dumps(config))
            result.write_text(json.dumps({**record, "averaged_checkpoints": [250]}))


def test_report_plan_and_refused_commands_do_not_import_torch(tmp_path, fixture_data_dir):
    sweep = make_sweep(tmp_path / "sweep")
    _finished_runs(sweep, fixture_data_dir)
    (tmp_path / "three.en").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "two.de").write_text("a\nb\n", encoding="utf-8")
    files = f"files:{tmp_path / 'three.en'},{tmp_path / 'two.de'}"
    cases = [  # (arguments, exit code, what the last stderr line says)
        (("report", sweep, "--bootstrap", "20", "--out", tmp_path / "report"), 0, ""),
        (("plan", SPECS / "smoke.yaml", "--profile", "smoke"), 0, ""),
        (("evaluate", sweep, "--corpus", files), 2, "differ in line count"),
        (("evaluate", "--run", sweep / "trials" / "base-s1-0000abcd", "--corpus", files), 2, "differ in line count"),
        (("translate", sweep, "--input", tmp_path / "none.txt"), 2, "does not exist"),
        (("run", tmp_path / "none.yaml"), 2, "does not exist"),
    ]
    for argv, code, says in cases:
        seen = _run(*argv)
        assert seen["code"] == code and seen["torch"] == [] and says in seen["error"], (argv, seen)


def test_the_probe_sees_torch_where_it_is_loaded(tmp_path):
    """The probe's own check: the same report, with the model module loaded first, lists torch."""
    seen = _run("report", make_sweep(tmp_path / "sweep"), "--bootstrap", "20", pre="import transformer_core.model")
    assert seen["code"] == 0 and seen["torch"], seen

"""What trains nothing imports no torch: `tsweep report`, `tsweep plan`, and a refused `evaluate` / `translate` /
`run` answer in about a second less than torch's import (2-3 s on a 2-core machine), and a sweep's evaluation
driver leaves torch to its workers.  Each command runs in a fresh interpreter that then lists what it loaded."""

import json
import subprocess
import sys

from tests.analysis.test_analysis import make_sweep
from tests.helpers import ROOT, SPECS

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
    code = PROBE.replace("{pre}", pre)
    r = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)  # fmt: skip
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_report_plan_and_refused_commands_do_not_import_torch(tmp_path, fixture_data_dir):
    sweep = make_sweep(tmp_path / "sweep")
    (tmp_path / "three.en").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "two.de").write_text("a\nb\n", encoding="utf-8")
    files = f"files:{tmp_path / 'three.en'},{tmp_path / 'two.de'}"
    cases = [
        (("report", sweep, "--bootstrap", "20", "--out", tmp_path / "report"), 0),
        (("plan", SPECS / "smoke.yaml", "--profile", "smoke"), 0),
        (("evaluate", sweep, "--corpus", files), 2),  # line counts differ
        (("evaluate", "--run", next((sweep / "trials").iterdir()), "--corpus", files), 2),
        (("translate", sweep, "--input", tmp_path / "none.txt"), 2),
        (("run", tmp_path / "none.yaml"), 2),
    ]
    for argv, code in cases:
        seen = _run(*argv)
        assert seen == {"code": code, "torch": []}, (argv, seen)


def test_the_probe_sees_torch_where_it_is_loaded(tmp_path):
    """The probe's own check: the same report, with the model module loaded first, lists torch."""
    seen = _run("report", make_sweep(tmp_path / "sweep"), "--bootstrap", "20", pre="import transformer_core.model")
    assert seen["code"] == 0 and seen["torch"], seen

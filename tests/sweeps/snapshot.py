"""A snapshot of what must not move when code is restructured: every shipped spec's plan at every profile (trial
ids, config hashes, run values), the CLI's help texts and plain outputs, and every file the report writers write
for the synthetic sweeps of tests/analysis.  Compared byte for byte by tests/sweeps/test_one_source.py.

    .venv/bin/python -m tests.sweeps.snapshot OUT_DIR     # write the snapshot (OUT_DIR is emptied first)
    diff -r BASELINE_DIR OUT_DIR                          # what changed
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
from pathlib import Path

from tests.helpers import ROOT

SPECS = sorted((ROOT / "sweeps" / "specs").glob("*.yaml")) + sorted((ROOT / "tests" / "specs").glob("*.yaml"))
SPECS = [p for p in SPECS if p.name != "profiles.yaml"]
WORK = Path("/tmp/one_source_snapshot_work")  # fixed, so that paths printed in reports are the same every time
_TIMING = re.compile(r"planned in \d+\.\d+ s")


def untimed(text: str) -> str:
    """`tsweep plan`'s output with its wall-clock line masked: the one part that differs from run to run."""
    return _TIMING.sub("planned in X s", text)


def _cli(argv: list[str]) -> str:
    """``tsweep ARGV`` in process: its exit code, stdout and stderr as one text."""
    from sweeps.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # --help
            rc = exc.code
    return f"$ tsweep {' '.join(argv)}\nrc {rc}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


def _subcommands(parser: argparse.ArgumentParser, prefix: tuple = ()) -> list[tuple]:
    """Every (sub)command path of the parser, depth first."""
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _subcommands(sub, prefix + (name,))
    return out


def helps(out: Path) -> None:
    from sweeps.cli import build_parser

    for path in _subcommands(build_parser()):
        name = "_".join(("tsweep",) + path)
        (out / "help" / f"{name}.txt").write_text(_cli([*path, "--help"]))


def plans(out: Path) -> None:
    from sweeps.spec.profiles import load_profiles
    from sweeps.spec.sweep_spec import SpecError, load_spec, plan

    for spec_path in SPECS:
        rel = spec_path.relative_to(ROOT)
        for profile in load_profiles():
            name = f"{rel.parent.name}_{spec_path.stem}_{profile}"
            try:
                trials = plan(load_spec(spec_path), profile)
            except SpecError as exc:
                (out / "plan" / f"{name}.txt").write_text(f"refused: {exc}\n")
                continue
            lines = [json.dumps({"id": t.trial_id, "config_hash": t.config_hash, "group": t.group, "row": t.row,
                                 "seed": t.seed, "paper": t.paper, "values": t.values, "profile": t.profile},
                                sort_keys=True, default=str) for t in trials]  # fmt: skip
            (out / "plan" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
            text = _cli(["plan", str(rel), "--profile", profile, "--data-dir", str(WORK / "data")])
            (out / "plan" / f"{name}.txt").write_text(untimed(text))
        # the spec positional (issue 46 item 4: --spec is a deprecated spelling); the files keep their names
        for argv in (["params", str(rel)], ["params", str(rel), "--profile", "cpu"], ["estimate", str(rel)]):
            (out / "cli" / f"{'_'.join(argv[:1] + argv[2:])}_{rel.parent.name}_{spec_path.stem}.txt").write_text(
                _cli(argv)
            )
    for argv in (["knobs"], ["knobs", "--markdown"], ["params"], ["params", "--set", "norm_type=rmsnorm"]):
        (out / "cli" / f"{'_'.join(a.strip('-') for a in argv)}.txt").write_text(_cli(argv))


def _copy(src: Path, dest: Path) -> None:
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        target = dest / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.read_bytes())


def reports(out: Path) -> None:
    from analysis.report.search_report import write_search_report
    from analysis.report.writers import write_report
    from tests.analysis.test_analysis import FIXTURE, make_sweep
    from tests.analysis.test_report_family import _with_named_set
    from tests.analysis.test_search_report_model import make_search_sweep

    cases = {}
    sweep = make_sweep(WORK / "fixture")
    cases["fixture"] = lambda o: write_report(sweep, o, samples=100)
    cases["fixture-claim"] = lambda o: write_report(sweep, o, samples=20, family="claim")
    cases["fixture-holm"] = lambda o: write_report(sweep, o, samples=20, method="holm")
    cases["fixture-evalues"] = lambda o: write_report(sweep, o, samples=20, evidence="e")
    mods = {
        "base": FIXTURE["base"],
        "rope": {1: (25.0, 4.0), 2: (26.0, 4.1), 3: (25.5, 4.05)},
        "gelu": {1: (20.5, 5.0), 2: (21.5, 5.1), 3: (20.5, 5.0)},
        "nopos": {1: (12.0, 7.0), 2: (13.0, 7.2)},
        "prenorm": {1: "diverged", 2: "diverged"},
    }
    msweep = make_sweep(WORK / "mods", mods)
    for trial in (msweep / "trials").iterdir():
        result = json.loads((trial / "result.json").read_text()) if (trial / "result.json").exists() else {}
        if result.get("status") == "finished":
            seed = json.loads((trial / "trial.json").read_text())["seed"]
            half = {"kind": "eval", "step": 125, "steps": 250, "dev_ppl": 10.0 + 0.1 * seed}
            (trial / "metrics.jsonl").write_text(json.dumps(half) + "\n")
    cases["mods"] = lambda o: write_report(msweep, o, samples=100)
    one = {"base": {1: (20.0, 5.0)}, "rope": {1: (25.0, 4.0)}, "gelu": {1: (20.1, 5.0)}}
    osweep = make_sweep(WORK / "one", one)
    cases["one"] = lambda o: write_report(osweep, o, samples=100)
    nsweep = _with_named_set(make_sweep(WORK / "named"))
    cases["named"] = lambda o: write_report(nsweep, o, samples=20)
    ssweep = make_search_sweep(WORK / "search")
    cases["search"] = lambda o: write_search_report(ssweep, o, resamples=5)
    for name, write in cases.items():
        target = WORK / "reports" / name
        write(target)
        _copy(target, out / "report" / name)
    for name, where in (("fixture", sweep), ("mods", msweep), ("search", ssweep)):
        (out / "cli" / f"status_{name}.txt").write_text(_cli(["status", str(where)]))


def write_snapshot(out: Path) -> None:
    os.environ["COLUMNS"] = "120"  # argparse wraps help at the terminal's width
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(WORK, ignore_errors=True)
    for d in ("help", "plan", "cli", "report"):
        (out / d).mkdir(parents=True)
    helps(out)
    plans(out)
    reports(out)


if __name__ == "__main__":
    write_snapshot(Path(sys.argv[1]))

"""`tsweep plan --budget` says what a budget decides from a given throughput or from a step time measured on this
machine and cached (the budget spent on a real Ray: tests/e2e/test_budget_dispatch_e2e.py)."""

from __future__ import annotations

import json

from sweeps.cli import main as tsweep
from tests.helpers import ROOT

TABLE3 = str(ROOT / "sweeps" / "specs" / "table3.yaml")


def test_plan_budget_says_what_a_budget_decides_from_a_given_throughput(tmp_path, capsys):
    # a 2-core AVX2-only CPU: 1,578 target tokens/s per trial with two side by side, 1.64M parameters
    code = tsweep(["plan", TABLE3, "--profile", "cpu", "--budget", "60m", "--device-flops", "1.557e10",
                   "--data-dir", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    first = lines.index("claims in the order the budget runs them (2 trial(s) at once), each complete by:")
    assert "D-ls-hurts-ppl, D-ls-helps-bleu (rows base, D3)" in lines[first + 1]
    assert "D-dropout-helps (rows D1)" in lines[first + 2] and "beyond" not in lines[first + 2]
    assert "E-learned-positions (rows E1)" in lines[first + 3]
    assert "expected to decide 3 of 8 claims within the budget (1h)" in out  # E1 ends at 61 min of 60
    assert "rows it will not reach:" in out and out.index("C7") < out.index("D2, D4")
    assert not (tmp_path / "device-bench.json").exists()  # a given throughput: nothing measured


def test_plan_budget_measures_the_step_time_here_once_and_caches_it(tmp_path, capsys, fixture_data_dir):
    smoke = str(ROOT / "tests" / "specs" / "smoke.yaml")
    args = ["plan", smoke, "--profile", "smoke", "--budget", "10m", "--data-dir", str(tmp_path)]
    assert tsweep(args) == 0
    out = capsys.readouterr().out
    assert "throughput source: measured now on this machine" in out and "2 trial(s) side by side" in out
    machines = json.loads((tmp_path / "device-bench.json").read_text())["machines"]
    (key, record), = machines.items()  # fmt: skip
    for part in ("profile=smoke", "cpu_flags=", "isa=", "torch=", "precision=", "threads=1", "side_by_side=2"):
        assert part in key
    assert record["flops_per_second"] > 0 and record["steps"] >= 2
    assert "every trial is expected to end within it" in out
    assert tsweep(args) == 0  # the second plan reads the cache
    again = capsys.readouterr().out
    assert "throughput source: measured on this machine" in again
    assert json.loads((tmp_path / "device-bench.json").read_text())["machines"] == machines

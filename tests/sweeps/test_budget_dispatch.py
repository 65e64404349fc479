"""`tsweep plan --budget` says what a budget decides from a given throughput (measured on this machine, and the
budget spent on a real Ray: tests/e2e/test_budget_dispatch_e2e.py)."""

from __future__ import annotations

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
    assert "E-learned-positions (rows E1)" in lines[first + 3] and "beyond" not in lines[first + 3]
    assert "B-smaller-dk" in lines[first + 4] and "beyond the budget" in lines[first + 4]
    # E1 ends at 55 min of 60: base trials planned at 13 min, as measured on that machine (12% for evaluation)
    assert "expected to decide 4 of 8 claims within the budget (1h)" in out
    assert "rows it will not reach:" in out and out.index("C7") < out.index("D2, D4")
    assert not (tmp_path / "device-bench.json").exists()  # a given throughput: nothing measured

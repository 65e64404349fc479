"""What anytime-valid evidence can reach at the compute of fixed 3 seeds, and what the guard costs.

    python benchmarks/evalue_ceiling.py [--tables 60] [--seed 0]

Issue 44's last target asks e-values (decided by e-BH over the whole printed report) for power >= 80% at 3 sd
within the compute of today's fixed 3 seeds a row, while a row at 3x the others' seed sd stays <= 7%.  This
measures the ceiling of that target, on the simulated reports of benchmarks/verdict_calibration.py (19 rows,
dev + test + a named set + the rows against base: 114 comparisons; 7 rows at 3 sd on the paper's side), for
four e-values (Rule.guard: the report's analysis.stats.guard.Guard and benchmarks/guards.py's variants):

  * guard 0 (the report's): the smaller of the noise model's safe t-test and Welch's on the two rows' own seeds,
    each floored at the model's: an e-value whatever the two rows' sds;
  * guard on 1 and on 2 prior df: the rows' own variances shrunk toward the model's, an e-value only where row
    variances scatter like an inverse chi-square on that many df (the 3x row is not covered);
  * no guard: the noise model's e-value alone (not an e-value for a noisier row).

and three ways to spend the seeds, compared by mean seeds a row of 19 (fixed 3 = 3.00):
  * fixed 3 seeds a row;
  * an oracle that knows which 7 rows have an effect: those at 4 seeds, base at 8, the other 11 at 2 (3.05), or
    those at 5, base at 8, the others at 1 (2.84); no loop can do better than knowing;
  * the adaptive loop's own rule (analysis.stats.adaptive_seeds.undecided_rows: one more seed to each row one more could
    decide), from 2 to 6 seeds, judging with the same e-value.

Beside each: a 3x-spread row's false rate alone (C4 against base, alpha 0.05, e >= 20), given seeds 2 -> 3 and
2 -> 6 while undecided (stopped at its first decision), and C4 (3x, no effect) falsely decided in the whole report
of the mix through the loop.  p (BH) at fixed 3 seeds is the reference.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdict_calibration import MIX, SETS, machine_line, one_stopping, report_outcome, seed_frame  # noqa: E402

from analysis.data.claims import table3_claims  # noqa: E402
from analysis.stats.adaptive_seeds import undecided_rows  # noqa: E402
from analysis.stats.rule import Rule  # noqa: E402
from benchmarks import simulate as sim  # noqa: E402
from benchmarks.guards import guard  # noqa: E402

GUARDS = {"guard 0 (the report's)": 0.0, "guard on 1 prior df": 1.0, "guard on 2 prior df": 2.0,
          "no guard": math.inf}  # fmt: skip
EFFECTS = {r: float(np.sign(v)) * 3.0 for r, v in MIX.items()}
# seeds of (the rows with the effect, base, the others): fixed 3, and two oracles
PLANS = {"fixed 3": (3, 3, 3), "oracle 4/8/2": (4, 8, 2), "oracle 5/8/1": (5, 8, 1)}


def loop(full: dict, rule: Rule, lo: int, hi: int) -> dict:
    """The adaptive loop's rounds (sweeps.run.adaptive.seed_rounds without its budget: one more seed to each row of
    analysis.stats.adaptive_seeds.undecided_rows, judged on dev's claims with ``rule``) on a table drawn at ``hi``
    seeds."""
    n = dict.fromkeys(full["dev_bleu"], lo)
    for _ in range(hi - lo):
        why = [r for r in undecided_rows(seed_frame(full, n), table3_claims(), rule, hi) if n[r] < hi]
        if not why:
            break
        for r in why:
            n[r] += 1
    return {reading: {r: v[: n[r]] for r, v in rows.items()} for reading, rows in full.items()}


def reports(rng, rules: dict, tables: int, spread: float = 1.0) -> dict:
    """{(rule, plan): [power per real comparison, mean seeds a row, C4 falsely decided]} over ``tables`` reports
    of the mix (C4 at ``spread`` x the others' sd, no effect), every rule and plan on the same draws."""
    out: dict = {}
    for _ in range(tables):
        full = sim.table(rng, sim.Shape(seeds=8, sets=SETS, spread={"C4": spread}), EFFECTS)
        for name, rule in rules.items():
            for plan, (effect, base, other) in PLANS.items():
                if rule.evidence == "p" and plan != "fixed 3":
                    continue
                seeds = {r: base if r == "base" else effect if r in EFFECTS else other for r in full["dev_bleu"]}
                values = {rd: {r: v[: seeds[r]] for r, v in rows.items()} for rd, rows in full.items()}
                _add(out, (name, plan), report_outcome(values, rule, EFFECTS))
            if rule.evidence == "e":
                _add(out, (name, "loop 2-6"), report_outcome(loop(full, rule, 2, 6), rule, EFFECTS))
    return {k: [v["found"] / v["real"], v["seeds"] / tables, v["noisy"] / tables] for k, v in out.items()}


def _add(acc: dict, key, outcome: dict) -> None:
    cell = acc.setdefault(key, {"found": 0.0, "real": 0.0, "seeds": 0.0, "noisy": 0.0})
    for k in cell:
        cell[k] += outcome[k]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng, n, t0 = np.random.default_rng(a.seed), a.tables, time.time()
    print(machine_line(f"python benchmarks/evalue_ceiling.py --tables {a.tables} --seed {a.seed}"))
    rules = {name: Rule(evidence="e", guard=guard(d)) for name, d in GUARDS.items()}
    print(f"\n## a row at 3x the others' seed sd, alone against base (alpha 0.05, e >= 20; {8 * n} tables each): "
          f"decided share (target <= 0.07 at an adaptive third seed)")  # fmt: skip
    for name, rule in rules.items():
        cells = "  ".join(f"seeds {lo}->{hi} {one_stopping(rng, 8 * n, lo, hi, 3.0, rules={name: rule})[name][0]:.3f}"
                          for lo, hi in ((2, 3), (2, 6)))  # fmt: skip
        print(f"{name:24s} {cells}")
    print(f"\n## the whole printed report, 7 rows at 3 sd (114 comparisons, e-BH at alpha 0.05; {n} tables): power "
          f"per real comparison (target >= 0.80) at mean seeds a row (fixed 3 = 3.00)")  # fmt: skip
    cells = reports(rng, {"p (BH), today's": Rule(), **rules}, n)
    for (name, plan), (power, seeds, _) in cells.items():
        print(f"{name:24s} {plan:14s} power {power:.3f}  seeds a row {seeds:.2f}")
    print(f"\n## the same with C4 at 3x the others' seed sd and no effect ({n} tables): C4 falsely decided in the "
          f"whole report")  # fmt: skip
    for (name, plan), (power, seeds, noisy) in reports(rng, {"p (BH), today's": Rule(), **rules}, n, 3.0).items():
        print(f"{name:24s} {plan:14s} C4 falsely decided {noisy:.3f}  power {power:.3f}  seeds a row {seeds:.2f}")
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""'Unstable' over whole simulated reports (analysis/stats/stability.py through
benchmarks.simulate.unstable_flags).

    python benchmarks/unstable_report.py [--tables 200] [--seed 0]

Per seed count (2, 3): the share of null reports (every effect constant over the late budget, seed noise at 2/3
and at the end correlating 0.6; the demo's 19 rows, dev claims and rows against base) carrying any flag, with the
report's control (BH over every change) and without it (each change at alpha alone); and the share of reports
flagging D-dropout-helps when D1's effect goes from 0 at 2/3 to 4 sd worse at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.stats.rule import Rule  # noqa: E402
from benchmarks import simulate as sim  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tables", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    for seeds in (2, 3):
        for control in (True, False):
            rng = np.random.default_rng(a.seed)
            hit = sum(bool(sim.unstable_flags(rng, sim.Shape(seeds=seeds), Rule(), control=control))
                      for _ in range(a.tables))  # fmt: skip
            share = hit / a.tables
            se = (share * (1 - share) / a.tables) ** 0.5
            print(f"null, {seeds} seeds, {'BH over the report' if control else 'each change alone'}: "
                  f"{100 * share:.1f}% (+-{100 * se:.1f}) of {a.tables} reports carry a flag")  # fmt: skip
        rng = np.random.default_rng(a.seed)
        flags = [sim.unstable_flags(rng, sim.Shape(seeds=seeds), Rule(), before={"D1": 0.0}, after={"D1": -4.0})
                 for _ in range(a.tables)]  # fmt: skip
        found = np.mean([("D-dropout-helps", "dev_bleu") in f for f in flags])
        print(f"D1 0 -> 4 sd worse, {seeds} seeds: D-dropout-helps (dev BLEU) flagged in {100 * found:.1f}%")


if __name__ == "__main__":
    main()

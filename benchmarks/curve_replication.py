"""Are a run's late evaluation points a stand-in for seed replicates?  Issue 44 asked whether the learning curve's
evaluation points could count as extra replication in a comparison's evidence.  This measures, on real runs of
one configuration that differ only in their seed, the two spreads that would have to agree for that to hold:

* between seeds: the sd over runs of each run's mean reading over its last ``--last`` evaluation points (and of
  the final point alone);
* within a run: the sd of those points about the run's own straight-line trend over them (what the curve's
  points would contribute as "replicates").

    python benchmarks/curve_replication.py RUN_DIR [RUN_DIR ...] [--reading dev_ce] [--last 10]

A RUN_DIR is a trial's directory (its metrics.jsonl: `tsweep train --workdir`, or SWEEP/trials/ROW-sN-*).  Prints
both spreads per run and their ratio; where the within-run spread is far from the between-seed one in either
direction, curve points are not seed noise and using them as replicates would misstate the error rate.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def curve(run: Path, reading: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of the run's evaluation records that hold ``reading``."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    pts = [(r["step"], r[reading]) for r in rows if r.get("kind") == "eval" and reading in r]
    if not pts:
        raise SystemExit(f"{run}: no evaluation record with {reading!r} in metrics.jsonl")
    steps, values = (np.array(x, dtype=float) for x in zip(*pts))
    return steps, values


def spreads(runs: list[Path], reading: str, last: int) -> dict:
    """Per run: the within-run sd of the last points about their linear trend (ddof 2); across runs: the sd of the
    runs' means over those points and of their final points (ddof 1)."""
    within, means, finals = {}, [], []
    for run in runs:
        steps, values = curve(run, reading)
        s, v = steps[-last:], values[-last:]
        slope, icept = np.polyfit(s, v, 1)
        resid = v - (slope * s + icept)
        within[run.name] = float(np.sqrt(resid @ resid / (len(v) - 2)))
        means.append(float(v.mean()))
        finals.append(float(values[-1]))
    return {"within": within, "between_mean": float(np.std(means, ddof=1)),
            "between_final": float(np.std(finals, ddof=1)), "means": means, "finals": finals}  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--reading", default="dev_ce")
    ap.add_argument("--last", type=int, default=10, help="evaluation points at the end of each run")
    a = ap.parse_args(argv)
    if len(a.runs) < 2 or a.last < 3:
        raise SystemExit("curve_replication.py: give at least 2 runs and --last 3 or more")
    r = spreads(a.runs, a.reading, a.last)
    print(f"{a.reading}, the last {a.last} evaluation points of {len(a.runs)} runs")
    print(f"between seeds: sd of the runs' means {r['between_mean']:.4f}, of their final points "
          f"{r['between_final']:.4f}")  # fmt: skip
    for name, sd in r["within"].items():
        print(f"within {name}: sd about its trend {sd:.4f} ({sd / r['between_mean']:.2f}x the between-seed sd)")
    w = np.array(list(r["within"].values()))
    print(f"within / between: {w.min() / r['between_mean']:.2f}x to {w.max() / r['between_mean']:.2f}x")


if __name__ == "__main__":
    main()

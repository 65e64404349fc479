"""The verdict engine's distribution functions through scipy's kernels (analysis/stats/dist.py) against the
scipy.stats methods they replace, side by side in one run.

    python benchmarks/verdict_speed.py [--tables 40] [--calls 3000] [--out FILE]

Two measurements, each on the same arguments or tables in one process:

  * one call of each function at a typical comparison's arguments (microseconds a call);
  * whole printed reports of the demo's shape (benchmarks/verdict_calibration.py's: 19 rows at 3 seeds, dev, test
    and a named set, the rows against base, 7 rows at 3 sd), judged on p-values and on e-values, with the engine
    as it is and with every dist function swapped back to its scipy.stats method; the two sides' outcomes (every
    comparison's p, e, interval and verdict) must be equal, or the run fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdict_calibration import MIX, SETS, machine_line  # noqa: E402

import analysis.report.reach  # noqa: E402,F401  (loaded: its dist functions are swapped too)
import analysis.stats.adaptive_seeds  # noqa: E402,F401
from analysis.data.claims import claim_rows, table3_claims  # noqa: E402
from analysis.stats import dist  # noqa: E402
from analysis.stats.rule import Rule  # noqa: E402
from analysis.stats.verdicts import judge  # noqa: E402
from benchmarks import simulate as sim  # noqa: E402

SCIPY = {  # each dist function and the scipy.stats method it stands for
    "t_ppf": stats.t.ppf, "t_sf": stats.t.sf, "t_cdf": stats.t.cdf, "t_logpdf": stats.t.logpdf,
    "nct_logpdf": stats.nct.logpdf, "nct_sf": stats.nct.sf, "f_ppf": stats.f.ppf, "norm_sf": stats.norm.sf,
    "norm_cdf": stats.norm.cdf,
}  # fmt: skip
ARGS = {"t_ppf": (0.975, 7.3), "t_sf": (2.1, 7.3), "t_cdf": (-2.1, 7.3), "t_logpdf": (2.1, 7.3),
        "nct_logpdf": (2.1, 7.3, 4.2), "nct_sf": (2.1, 7.3, 4.2), "f_ppf": (0.9, 3.0, 7.5), "norm_sf": (1.3,),
        "norm_cdf": (-1.3,)}  # fmt: skip


@contextmanager
def scipy_methods():
    """Every module of the engine calling scipy.stats' methods again, as before dist.py: each loaded module of
    analysis/ that holds a dist function under its own name gets the scipy.stats method there instead."""
    users = [m for n, m in list(sys.modules.items()) if n.startswith("analysis.") and m is not dist]
    saved = [(m, name, f) for m in users for name in SCIPY if (f := getattr(m, name, None)) is getattr(dist, name)]
    for m, name, _ in saved:
        setattr(m, name, SCIPY[name])
    try:
        yield
    finally:
        for m, name, f in saved:
            setattr(m, name, f)


def per_call(calls: int) -> list[str]:
    lines = []
    for name, f in SCIPY.items():
        ours, args = getattr(dist, name), ARGS[name]
        times = {}
        for label, g in (("scipy.stats", f), ("dist", ours), ("scipy.stats again", f)):
            start = time.perf_counter()
            for _ in range(calls):
                g(*args)
            times[label] = (time.perf_counter() - start) / calls * 1e6
        slow = min(times["scipy.stats"], times["scipy.stats again"])
        lines.append(f"{name:11s} scipy.stats {slow:7.1f} us  dist {times['dist']:6.1f} us  "
                     f"ratio {slow / times['dist']:5.1f}x")  # fmt: skip
    return lines


def reports(tables: int, evidence: str, seed: int) -> tuple[float, float, int]:
    """(seconds with dist, seconds with scipy.stats' methods, comparisons judged) over the same tables, alternating
    the two sides table by table; fails unless every comparison comes out the same."""
    rng = np.random.default_rng(seed)
    shape = sim.Shape(sets=SETS)
    claimed = {x for v in claim_rows(table3_claims()).values() for x in v} | {"base"}
    versus = [r for r in shape.rows if r not in claimed]
    claims, rule = shape.claims(table3_claims()), Rule(evidence=evidence)
    spent = {"dist": 0.0, "scipy": 0.0}
    judged = 0
    for k in range(tables):
        values = sim.table(rng, shape, MIX)
        out = {}
        for side in ("dist", "scipy") if k % 2 == 0 else ("scipy", "dist"):
            start = time.perf_counter()
            with scipy_methods() if side == "scipy" else nullcontext():
                j = judge(values, claims, rule, versus, versus_readings=sim.DEV)
                out[side] = repr(j) + repr([r.detectable for r in j.claims])
            spent[side] += time.perf_counter() - start
        if out["dist"] != out["scipy"]:
            raise SystemExit("verdict_speed: the two sides judged a table differently")
        judged += sum(len(r.comparisons) for r in j.claims) + sum(len(cs) for cs in j.versus.values())
    return spent["dist"], spent["scipy"], judged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=40)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the printed text here")
    args = ap.parse_args()
    lines = [machine_line(f"python benchmarks/verdict_speed.py --tables {args.tables} --calls {args.calls}"), "",
             f"## one call at a comparison's arguments ({args.calls} calls each; scipy.stats timed before and after "
             "dist, the faster kept)"]  # fmt: skip
    lines += per_call(args.calls)
    lines += ["", f"## whole printed reports of the demo's shape ({args.tables} tables, the same on both sides, "
                  "outcomes checked equal; detectable differences included)"]  # fmt: skip
    for evidence in ("p", "e"):
        fast, slow, judged = reports(args.tables, evidence, args.seed)
        lines.append(f"evidence {evidence}: scipy.stats {slow:6.2f} s  dist {fast:6.2f} s  ratio {slow / fast:4.2f}x  "
                     f"({judged} comparisons, identical outcomes)")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()

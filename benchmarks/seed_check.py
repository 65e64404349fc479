"""Does a way of running the step learn the same?  Full base-row trials of a profile with two settings of run-only
knobs, seed for seed, the two of a seed side by side on the machine's two cores; then the paired differences in
dev cross-entropy and dev BLEU against the seed spread (scipy.stats.ttest_rel), and the training rates.

    python benchmarks/seed_check.py --a fast_dropout=false --b fast_dropout=true [--seeds 1,2,3]
        [--profile cpu] [--corpus bible-en-de] [--workdir seed-check]

A trial whose workdir already holds a result.json is not trained again, so the summary can be reprinted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats


def arm_name(sets: list[str]) -> str:
    return "_".join(s.replace("=", "-") for s in sets) or "default"


def train(args, sets: list[str], seed: int, workdir: Path) -> subprocess.Popen | None:
    if (workdir / "result.json").exists():
        return None
    cmd = [sys.executable, "-m", "sweeps.cli", "train", "--corpus", args.corpus, "--profile", args.profile]
    cmd += ["--workdir", str(workdir), "--set", f"seed={seed}", *sets]
    with open(workdir.with_suffix(".log"), "w") as log:  # the child keeps its own handle
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", nargs="*", default=[], help="key=value settings of the first arm")
    ap.add_argument("--b", nargs="*", default=[], help="key=value settings of the second arm")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--workdir", default="seed-check")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    arms = {"a": args.a, "b": args.b}
    started = time.time()
    for seed in seeds:  # the two arms of a seed at once, one per core
        procs = [train(args, sets, seed, root / f"{arm}-s{seed}") for arm, sets in arms.items()]
        for p in procs:
            if p is not None and p.wait() != 0:
                sys.exit(f"seed_check: a trial failed (see the .log files under {root})")
    results = {(arm, s): json.loads((root / f"{arm}-s{s}" / "result.json").read_text()) for arm in arms for s in seeds}
    print(f"a: {' '.join(args.a) or 'defaults'}; b: {' '.join(args.b) or 'defaults'}; profile {args.profile} base row, "
          f"seeds {args.seeds}; {time.time() - started:.0f} s of training in this call")  # fmt: skip
    print("run        dev ln PPL   dev BLEU   target tokens/s   wall s   precision")
    for (arm, s), r in results.items():
        print(f"{arm}-s{s:<7} {np.log(r['dev_ppl']):10.4f} {r['dev_bleu']:10.2f} {r['tokens_per_second']:13,.0f} "
              f"{r['wall_seconds']:10.0f}   {r['precision']}")  # fmt: skip
    mixed = [s for s in seeds if results["a", s]["precision"] != results["b", s]["precision"]]
    if mixed:  # precision=auto is decided in each trial's process: a pair at two precisions compares two things
        print(f"WARNING: seeds {', '.join(map(str, mixed))} ran at two precisions: set precision=... in both arms")
    for key, name, fmt in (("dev_ppl", "dev ln PPL", "{:+.4f}"), ("dev_bleu", "dev BLEU", "{:+.2f}")):
        value = np.log if key == "dev_ppl" else (lambda v: v)
        a = np.array([value(results["a", s][key]) for s in seeds])
        b = np.array([value(results["b", s][key]) for s in seeds])
        d = b - a
        p = stats.ttest_rel(b, a).pvalue
        print(f"b - a, per seed: {name} " + ", ".join(fmt.format(x) for x in d) + f" (mean {fmt.format(d.mean())}, "
              f"paired t p {p:.3f}; seed sd of a {a.std(ddof=1):.4f})")  # fmt: skip
    rate = {arm: np.mean([results[arm, s]["tokens_per_second"] for s in seeds]) for arm in arms}
    pairs = [results["b", s]["tokens_per_second"] / results["a", s]["tokens_per_second"] for s in seeds]
    print(f"training rate, two trials at once: b {rate['b']:,.0f} vs a {rate['a']:,.0f} target tokens/s; b / a within "
          f"each seed's pair " + ", ".join(f"{r:.2f}x" for r in pairs)
          + f" (geometric mean {np.exp(np.mean(np.log(pairs))):.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()

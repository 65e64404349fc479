"""The training step of two source trees, side by side: this checkout against another (a git worktree of an
earlier commit), so that a change no knob switches off is still measured before against after.

Each repeat trains the base row of ``--profile`` for ``--steps`` steps (after 10 untimed) once with each tree, one
process at a time, alternating, in each precision; then the median rate of each tree and their ratio.

    git worktree add /tmp/before COMMIT
    python benchmarks/step_ab.py /tmp/before [--repeat 3] [--steps 120] [--precisions fp32,bf16]

On a CPU without AVX512-BF16 pass ``--precisions fp32`` (bf16 there is emulated and far slower).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]


def rate(root: Path, profile: str, precision: str, steps: int) -> float:
    """Target tokens/s of ``steps`` timed steps, from the tree's own step_profile.py worker (no profiler) run
    with that tree's transformer_core first on the path; a tree from before step_profile.py existed is timed by
    this checkout's worker (it needs only the tree's Trainer, make_run_config, profiles and preset values)."""
    worker = root / "benchmarks" / "step_profile.py"
    worker = worker if worker.exists() else HERE / "benchmarks" / "step_profile.py"
    cmd = [sys.executable, str(worker), "--worker", f"time:{precision}:1",
           "--no-profile", "--profile", profile, "--steps", str(steps), "--warmup", "10"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=root, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["tokens_per_second"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="the other source tree (e.g. a git worktree of an earlier commit)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--precisions", default="fp32,bf16")
    args = ap.parse_args()
    trees = {"before": Path(args.before).resolve(), "after": HERE}
    for precision in args.precisions.split(","):
        rates: dict = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, root in trees.items():
                rates[name].append(rate(root, args.profile, precision, args.steps))
        med = {name: float(np.median(r)) for name, r in rates.items()}
        each = [f"{n} " + ", ".join(f"{r:,.0f}" for r in rates[n]) + f" (median {med[n]:,.0f})" for n in trees]
        print(f"{precision}: {'; '.join(each)} target tokens/s; after / before {med['after'] / med['before']:.2f}x")


if __name__ == "__main__":
    main()

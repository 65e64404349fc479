"""The training step of two source trees, side by side: this checkout against another (a git worktree of an
earlier commit), so that a change no knob switches off is still measured before against after.

Each repeat trains the base row of ``--profile`` for ``--steps`` steps (after 10 untimed) once with each tree, one
process at a time, alternating, in each precision; then the median rate of each tree and their ratio.

    git worktree add /tmp/before COMMIT
    python benchmarks/step_ab.py /tmp/before [--repeat 3] [--steps 120] [--precisions fp32,bf16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
WORKER = r"""
import json, sys, tempfile, time
root, profile, precision, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path[:0] = [root, root + "/benchmarks"]
import torch
torch.set_num_threads(1)
from pathlib import Path
from step_profile import base_row_values
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.train import Trainer
config = make_run_config({**base_row_values(profile, "bible-en-de", None, {}), "precision": precision, "seed": 1})
with tempfile.TemporaryDirectory() as work:
    tr = Trainer(config, Path(work), JsonTracker(Path(work) / "t.jsonl"), None)
    for _ in range(10):
        tr.train_step()
    t0, k0 = time.perf_counter(), tr.tokens
    for _ in range(steps):
        tr.train_step()
    print(json.dumps({"rate": (tr.tokens - k0) / (time.perf_counter() - t0)}))
"""


def rate(root: Path, profile: str, precision: str, steps: int) -> float:
    out = subprocess.run([sys.executable, "-c", WORKER, str(root), profile, precision, str(steps)],
                         capture_output=True, text=True, check=True, cwd=root)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"]


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

"""Chaos rounds on a smoke sweep: kill the driver or a trial worker at random points, resume, and check that the
final table equals an uninterrupted run's.  Not in the default suite (minutes per round).

    python benchmarks/chaos.py --rounds 3 [--seed 0] [--faults driver,worker]

Training is deterministic given the seed, so every finished trial's dev BLEU, dev PPL and test BLEU must match
the reference run's to the last digit, however often the sweep was killed on its way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "specs" / "smoke.yaml"
KEYS = ("dev_bleu", "dev_ppl", "test_bleu")


def _cmd(out: Path, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(SPEC), "--profile", "smoke", "--out", str(out)]
    return cmd + (["--resume"] if resume else []) + ["--num-cpus", "2"]


def table(out: Path) -> dict:
    rows = {}
    for result in sorted((out / "trials").glob("*/result.json")):
        r = json.loads(result.read_text())
        rows[result.parent.name] = tuple(r.get(k) for k in KEYS) + (r.get("status"),)
    return rows


def _kill_worker() -> bool:
    """SIGKILL one Ray trial worker process (the trial is retried from its checkpoint)."""
    found = subprocess.run(["pgrep", "-f", "ray::ImplicitFunc"], capture_output=True, text=True).stdout.split()
    if found:
        os.kill(int(random.choice(found)), signal.SIGKILL)
    return bool(found)


def chaos_round(out: Path, faults: list[str], env: dict, log) -> int:
    """Run until the sweep finishes, injecting one fault per attempt at a random time; returns faults injected."""
    injected, resume = 0, False
    for _ in range(8):
        proc = subprocess.Popen(_cmd(out, resume), env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        fault, at = random.choice(faults), random.uniform(8, 40)
        try:
            proc.wait(timeout=at)
        except subprocess.TimeoutExpired:
            if fault == "driver":
                os.killpg(proc.pid, signal.SIGKILL)
                injected += 1
                log(f"  killed the driver at {at:.0f}s")
            elif _kill_worker():
                injected += 1
                log(f"  killed a trial worker at {at:.0f}s")
            proc.wait(timeout=900)
        resume = True
        if proc.returncode == 0 and len(table(out)) == 4:
            return injected
    raise RuntimeError(f"sweep in {out} did not finish after 8 attempts")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--faults", default="driver,worker")
    args = p.parse_args()
    random.seed(args.seed)
    work = Path(tempfile.mkdtemp(prefix="tsweep-chaos-"))
    fixture = ROOT / "tests" / "fixtures" / "bible-mini.db"  # the tests' verses: seconds per trial
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               TSWEEP_DATA_DIR=str(work / "data"), TSWEEP_BIBLE_DB=str(fixture))  # fmt: skip
    start = time.time()
    subprocess.run(_cmd(work / "reference", False), env=env, cwd=ROOT, check=True, capture_output=True)
    reference = table(work / "reference")
    print(f"reference run: {len(reference)} trials in {time.time() - start:.0f}s")
    total, equal = 0, 0
    for k in range(args.rounds):
        n = chaos_round(work / f"round-{k}", args.faults.split(","), env, print)
        same = table(work / f"round-{k}") == reference
        total, equal = total + n, equal + same
        print(f"round {k + 1}: {n} faults injected; table {'equal to' if same else 'DIFFERENT from'} the reference")
    print(f"{args.rounds} rounds, {total} faults injected, {equal}/{args.rounds} tables equal "
          f"({time.time() - start:.0f}s)")  # fmt: skip
    return 0 if equal == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())

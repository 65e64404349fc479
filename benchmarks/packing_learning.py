"""Does a packed trial learn as a padded one does?  Paired trials of a profile's base row, seeds 1..S each way,
compared on dev cross-entropy at equal steps (issue 56, item 4: what must hold before packing becomes a default).

Each trial is `tsweep train` in its own process (``--parallel`` of them at once: on a GPU they share it), with
``packing`` on or off and everything else equal; the comparison is the two sets' mean dev cross-entropy, their
difference with a Welch 95% interval (scipy.stats), and the padded seeds' own spread beside it.  "within seed
noise" means the interval holds 0; a packed trial's other random stream (batch composition, dropout masks at the
buffer's shape) is what is being tested.  Every trial's result.json says which layout it trained.

    python benchmarks/packing_learning.py [--profile gpu] [--corpus bible-en-de] [--steps 1000] [--seeds 3]
        [--parallel 6] [--set beam=1] [--packed-set compile=graphs packed_attention=flex]
        [--trial-timeout 300] [--out benchmarks/results/packing_learning_h100.txt]

``--set`` goes to every trial, ``--packed-set`` to the packed side only: a candidate CUDA step (packed, compiled
as a CUDA graph, FlexAttention, one 25K micro-batch) against today's padded eager step of the profile.  Each
trial's line is printed (and written to ``--out``) as it finishes, so a call cut short keeps what finished.
    python benchmarks/packing_learning.py --dry-run     # the smoke profile on the fixture corpus, on the CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent


def run_trial(args, packing: str, seed: int, work: Path) -> dict:
    """One `tsweep train` of the base row: its result.json (status, dev_ce, layout)."""
    workdir = work / f"{packing}-s{seed}"
    sets = [f"steps={args.steps}", f"eval_every={args.steps}", f"packing={packing}", f"seed={seed}",
            "eval_bleu=final", *args.set, *(args.packed_set if packing != "off" else [])]  # fmt: skip
    cmd = [sys.executable, "-m", "sweeps.cli", "train", "--profile", args.profile, "--corpus", args.corpus,
           "--workdir", str(workdir), "--quiet", "--set", *sets]  # fmt: skip
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           timeout=args.trial_timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"status": "timed out", "why": f"after {args.trial_timeout:g} s", "packing": packing, "seed": seed}
    path = workdir / "result.json"
    if r.returncode or not path.exists():
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": "failed", "why": tail[0], "packing": packing, "seed": seed}
    result = json.loads(path.read_text())
    ppl = result.get("dev_ppl")
    return {**result, "dev_ce": math.log(ppl) if ppl else None, "packing_asked": packing, "seed": seed}


def compare(padded: list[float], packed: list[float]) -> dict:
    """Packed minus padded mean dev cross-entropy, its Welch 95% interval and p, and the padded seeds' sd."""
    a, b = np.asarray(packed, float), np.asarray(padded, float)
    diff = a.mean() - b.mean()
    test = stats.ttest_ind(a, b, equal_var=False)
    ci = test.confidence_interval(0.95)
    return {"diff": diff, "low": ci.low, "high": ci.high, "p": test.pvalue, "sd_padded": b.std(ddof=1),
            "sd_packed": a.std(ddof=1), "within_noise": bool(ci.low <= 0 <= ci.high)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=1, help="trials at once (on a GPU: processes sharing it)")
    ap.add_argument(
        "--packing", default="on", choices=["on", "fill", "blocks"], help="the packed side's packing (default on)"
    )
    ap.add_argument("--set", nargs="*", default=[], help="more key=value for every trial (e.g. beam=1)")
    ap.add_argument("--packed-set", nargs="*", default=[], help="key=value for the packed side only")
    ap.add_argument("--trial-timeout", type=float, default=None, help="seconds: a trial past it is 'timed out'")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dry-run", action="store_true", help="smoke profile, fixture corpus, CPU, 20 steps")
    args = ap.parse_args()
    if args.dry_run:
        args.profile, args.steps = "smoke", min(args.steps, 20)
        os.environ.setdefault("TSWEEP_BIBLE_DB", str(ROOT / "tests" / "fixtures" / "bible-mini.db"))
        args.data_dir = args.data_dir or tempfile.mkdtemp(prefix="packing-learning-data-")
        args.set = [*args.set, "device=cpu"]
        if args.parallel > 1:  # prepare the corpus once before the trials would race to
            run_trial(args, "off", 1, Path(tempfile.mkdtemp(prefix="packing-learning-warm-")))
    now = datetime.now(timezone.utc)
    head = [f"# {platform.node()}; Python {platform.python_version()}; {now:%Y-%m-%d %H:%M} UTC; "
            f"profile {args.profile} base row, corpus {args.corpus}, {args.steps} steps, seeds 1-{args.seeds}",
            "$ python benchmarks/packing_learning.py " + " ".join(sys.argv[1:])]  # fmt: skip
    lines = list(head)
    print("\n".join(head), flush=True)

    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            lines.append(line)
            print(line, flush=True)
            if args.out:
                Path(args.out).write_text("\n".join(lines) + "\n")

    def one(job) -> dict:
        r = run_trial(args, job[0], job[1], Path(tmp))
        say(trial_line(r))
        return r

    jobs = [(p, s) for s in range(1, args.seeds + 1) for p in ("off", args.packing)]
    with tempfile.TemporaryDirectory(prefix="packing-learning-") as tmp:
        with ThreadPoolExecutor(max(1, args.parallel)) as pool:
            results = list(pool.map(one, jobs))
    done = [r for r in results if r.get("status") == "finished"]
    ce = {p: [r["dev_ce"] for r in done if r["packing_asked"] == p] for p in ("off", args.packing)}
    if min(len(v) for v in ce.values()) >= 2:
        c = compare(ce["off"], ce[args.packing])
        verdict = "within" if c["within_noise"] else "NOT within"
        say(f"packing {args.packing} - padded dev cross-entropy: {c['diff']:+.4f} nats, Welch 95% interval "
            f"[{c['low']:+.4f}, {c['high']:+.4f}], p {c['p']:.3g}; seed sd padded {c['sd_padded']:.4f}, "
            f"packed {c['sd_packed']:.4f}: {verdict} seed noise")  # fmt: skip
    else:
        say("too few finished trials to compare (2 a side needed)")


def trial_line(r: dict) -> str:
    """One trial's line: its dev cross-entropy, tokens a step, layout and device, or why it has none."""
    if r.get("status") != "finished":
        return (
            f"packing {r.get('packing_asked', r.get('packing'))} seed {r['seed']}: {r.get('status')} {r.get('why', '')}"
        )
    return (f"packing {r['packing_asked']} seed {r['seed']}: dev cross-entropy {r['dev_ce']:.4f} at step "
            f"{r['steps']}, {r['target_tokens'] / r['steps']:,.0f} target tokens a step; layout "
            f"{r.get('packing')} ({r.get('packing_reason')}); compile {r.get('compile', '?')}; {r['device']} "
            f"{r['precision']}; {r.get('tokens_per_second') or 0:,.0f} target tokens/s while the trials shared the "
            f"device, compile {r.get('compile_seconds') or 0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()

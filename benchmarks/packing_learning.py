"""Does a packed trial learn as a padded one does?  Trials of a profile's base row, seeds 1..S a side, compared on
dev cross-entropy at the last step (issue 56, item 4: what must hold before packing becomes a default).

Each trial is `tsweep train` in its own process (``--parallel`` of them at once: on a GPU they share it).  The
padded side is today's step (packing off), the packed side the candidate (``--packing``, default on); ``--set``
goes to both sides, ``--padded-set`` and ``--packed-set`` to one side each.

Paired by seed on identical batches: where the sides' batch settings (tokens_per_batch, accumulate) match,
packing=on packs the padded stream's very batches, and one seed gives both sides the same initial weights and
batch order: only dropout masks (drawn at the packed buffer's shape) and arithmetic differ.  A seed's two trials
are then a pair, compared by scipy.stats.ttest_rel on the per-seed differences, and the seed-to-seed spread
(larger than what packing may change) cancels.  The pairing is read from the trials, not assumed: paired where
every seed finished on both sides and both trials of each seed report the same target_tokens in result.json;
otherwise the sides are compared unpaired (Welch, scipy.stats.ttest_ind) and the verdict line says why.

The equivalence margin (``--margin``, default 0.02 nats: a 2% perplexity ratio) is fixed before the run.  On
packed minus padded dev cross-entropy:
  equivalent    the 90% interval lies inside (-margin, +margin): two one-sided tests at 5% (TOST); where the 95%
                interval also excludes 0, a difference smaller than the margin was detected and the line says so
  differs       not equivalent, and the 95% interval excludes 0: packed better or worse
  inconclusive  neither: the interval is wider than the margin; more seeds narrow it (and pairing, where the
                sides were unpaired).  With 3 seeds, an unpaired comparison is about always inconclusive.
Before any of these, every seed must finish on both sides ("candidate failed: seed N ...", or "no verdict: today's
step did not finish seed N ...", with result.json's status and reason), and every packed trial must have trained
packed batches ("candidate not measured" where result.json says packing off); a compile mode other than the one
asked (graphs run as on) is named in the line.  Under ``--deadline`` (seconds for the whole run) a trial ends by
then ("timed out") and none starts with less left than its side's quickest trial took: "no verdict: out of time".
A trial cut short after its last evaluation counts, with that evaluation's dev_ce from its metrics.jsonl.  The line
names the compared step and where it lies in the learning-rate schedule: 500 steps of the gpu profile's 4000-step
warmup compare early training, at an eighth of the peak rate, not converged models.

    python benchmarks/packing_learning.py [--profile gpu] [--corpus bible-en-de] [--steps 1000] [--seeds 3]
        [--parallel 6] [--set beam=1] [--padded-set tokens_per_batch=25000 accumulate=1]
        [--packed-set compile=graphs packed_attention=flex tokens_per_batch=25000 accumulate=1] [--margin 0.02]
        [--trial-timeout 300] [--deadline 320] [--out benchmarks/results/packing_learning_h100.txt]

``--parallel``: trials at once, on a GPU no more than its memory holds (benchmarks/device/issue56.sh sizes it at
22 GiB a trial at one 25,000-token micro-batch: six on an H200, three on an 80 GB H100); each trial's line gives
its peak GPU memory.  Each trial's line is printed (and ``--out`` rewritten) as it finishes, so a call cut short
keeps what finished; with ``--out`` each trial's result.json, metrics.jsonl and config.json (not its checkpoints)
are kept under ``<out>.trials/<side>-s<seed>/``.
    python benchmarks/packing_learning.py --dry-run     # the smoke profile on the fixture corpus, on the CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the project's packages (analysis reads a trial's metrics)
SIDES = ("padded", "packed")
KEPT = ("result.json", "metrics.jsonl", "config.json")  # a trial's evidence; never its checkpoints
FROM_METRICS = "from metrics.jsonl, result.json not written"
NOT_STARTED = "not started"  # too little of --deadline was left for the trial: the run's time, not the candidate
# a trial is not started with less than this left of --deadline, nor with less than its side's quickest finished
# trial took so far (it could not finish, and under MPS it would take GPU time from the trials still running)
START_SECONDS = 30.0


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def last_eval(metrics: Path) -> dict | None:
    """The last {"kind": "eval"} record of a metrics.jsonl, read as the report reads it (a torn last line is
    skipped), or None."""
    from analysis.data.collect import metrics_lines, metrics_record

    if not metrics.is_file():
        return None
    evals = [rec for rec in map(metrics_record, metrics_lines(metrics)) if rec and rec.get("kind") == "eval"]
    return evals[-1] if evals else None


def failure_reason(result: dict) -> str:
    """Why result.json says a trial did not finish: the step it diverged at and its reason fields."""
    parts = [f"at step {result['diverged_at']}"] if result.get("diverged_at") is not None else []
    parts += [str(result[k]) for k in ("reason", "why", "fault", "error") if result.get(k)]
    return ": ".join(parts)


def read_trial(workdir: Path, steps: int, exit_status: str | None = None, exit_why: str = "") -> dict:
    """What a trial's workdir says: status, dev_ce (nats) at step ``steps``, layout and its config's train settings.

    result.json first (its status and reason where it did not finish); without one (a timeout or a crash), an
    evaluation at step ``steps`` in metrics.jsonl counts as finished.  ``exit_status``/``exit_why``: how the
    process ended where it did not end well ("timed out", "after 320 s"), the reason when the files give none."""
    workdir = Path(workdir)
    train = ((_read_json(workdir / "config.json") or {}).get("train")) or {}
    result = _read_json(workdir / "result.json")
    if result is not None:
        out = {**result, "train": train, "source": "result.json"}
        if result.get("status") == "finished":
            ppl = result.get("dev_ppl")
            if ppl:
                return {**out, "dev_ce": math.log(ppl)}
            return {**out, "status": "failed", "why": "result.json holds no dev_ppl"}
        return {**out, "status": result.get("status") or "failed", "why": failure_reason(result) or exit_why}
    ev = last_eval(workdir / "metrics.jsonl")
    if ev is not None and ev.get("step") == steps and (ev.get("dev_ce") is not None or ev.get("dev_ppl")):
        ce = ev["dev_ce"] if ev.get("dev_ce") is not None else math.log(ev["dev_ppl"])
        ended = " ".join(x for x in (exit_status, exit_why) if x)
        return {"status": "finished", "dev_ce": ce, "steps": steps, "train": train, "source": FROM_METRICS,
                "ended": ended}  # fmt: skip
    seen = f"last evaluation at step {ev.get('step')}" if ev else "no evaluation"
    why = "; ".join(x for x in (exit_why, f"no result.json, {seen}") if x)
    return {"status": exit_status or "failed", "why": why, "train": train, "source": None}


def keep_evidence(workdir: Path, dest: Path) -> None:
    """Copy a trial's result.json, metrics.jsonl and config.json (those it has) to ``dest``, replacing a stale one."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (workdir / name).exists():
            shutil.copy2(workdir / name, dest / name)


def trial_sets(args, side: str, seed: int) -> list[str]:
    """The --set words of one trial: the run's shape, the side's packing, then --set, then the side's own sets."""
    own = args.padded_set if side == "padded" else args.packed_set
    packing = "off" if side == "padded" else args.packing
    return [f"steps={args.steps}", f"eval_every={args.steps}", f"packing={packing}", f"seed={seed}",
            "eval_bleu=final", *args.set, *own]  # fmt: skip


def time_left(args) -> float | None:
    """Seconds left of --deadline (``args.ends_at``, a time.monotonic() value set when the run starts), or None
    without one."""
    return None if args.ends_at is None else max(0.0, args.ends_at - time.monotonic())


def trial_limit(args, left: float | None) -> tuple[float | None, str]:
    """(seconds the trial starting now may run, how a trial stopped at them is said): --trial-timeout, cut to what is
    ``left`` of --deadline (time_left), so that a trial started late ends before the whole run must and the verdict
    is still written."""
    limit = args.trial_timeout
    why = f"after {limit:g} s" if limit is not None else ""
    if left is not None and (limit is None or left < limit):
        limit, why = left, f"after {left:.0f} s, at the run's {args.deadline:g} s deadline"
    return limit, why


def start_seconds(args, side: str) -> float:
    """The least time left of --deadline a trial of ``side`` starts with: START_SECONDS, or the quickest finished
    trial of that side so far (``args.took``: side -> wall seconds of its finished trials) where longer."""
    took = args.took.get(side)
    return max(START_SECONDS, min(took)) if took else START_SECONDS


def run_trial(args, side: str, seed: int, work: Path, keep: Path | None = None) -> dict:
    """One `tsweep train` of the base row, read back by read_trial; its evidence copied under ``keep`` if given.
    Not started where less than start_seconds are left of --deadline."""
    workdir = work / f"{side}-s{seed}"
    left = time_left(args)
    if left is not None and left < (least := start_seconds(args, side)):
        why = f"{left:.0f} s were left of the run's {args.deadline:g} s deadline (a trial needs {least:.0f} s)"
        return {"status": NOT_STARTED, "why": why, "train": {}, "source": None, "side": side, "seed": seed}
    limit, limit_why = trial_limit(args, left)
    began = time.monotonic()
    cmd = [sys.executable, "-m", "sweeps.cli", "train", "--profile", args.profile, "--corpus", args.corpus,
           "--workdir", str(workdir), "--quiet", "--set", *trial_sets(args, side, seed)]  # fmt: skip
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    exit_status, exit_why = None, ""
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           timeout=limit)  # fmt: skip
        if r.returncode:
            lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
            exit_status, exit_why = "failed", f"exit {r.returncode}: {lines[-1] if lines else 'no output'}"
    except subprocess.TimeoutExpired:
        exit_status, exit_why = "timed out", limit_why
    trial = {**read_trial(workdir, args.steps, exit_status, exit_why), "side": side, "seed": seed}
    if trial["status"] == "finished" and exit_status is None:
        args.took.setdefault(side, []).append(time.monotonic() - began)  # one append: safe across the pool's threads
    if keep is not None:
        keep_evidence(workdir, keep / workdir.name)
    return trial


def compare(padded: dict[int, float], packed: dict[int, float], paired: bool, margin: float) -> dict:
    """Packed minus padded dev cross-entropy (seed -> nats each side) against an equivalence margin (nats).

    Paired: scipy.stats.ttest_rel on the seeds both sides have; unpaired: Welch's ttest_ind.  Returns the
    estimate, its 95% and 90% intervals, p, the sds and the verdict word: "equivalent" where the 90% interval lies
    inside (-margin, +margin) (two one-sided tests at 5%), else "differs" where the 95% interval excludes 0, else
    "inconclusive".  ``detected``: the 95% interval excludes 0 (also under "equivalent": a difference smaller
    than the margin); ``direction``: "packed worse" (higher cross-entropy) or "packed better"."""
    if paired:
        seeds = sorted(set(padded) & set(packed))
        a, b = np.array([packed[s] for s in seeds], float), np.array([padded[s] for s in seeds], float)
    else:
        a, b = np.array(list(packed.values()), float), np.array(list(padded.values()), float)
    if min(len(a), len(b)) < 2:
        raise ValueError(f"2 seeds a side are needed, not {len(b)} padded and {len(a)} packed")
    test = stats.ttest_rel(a, b) if paired else stats.ttest_ind(a, b, equal_var=False)
    ci95, ci90 = test.confidence_interval(0.95), test.confidence_interval(0.90)
    estimate = float(a.mean() - b.mean())
    equivalent = bool(-margin < ci90.low and ci90.high < margin)
    detected = bool(ci95.low > 0 or ci95.high < 0)
    return {"estimate": estimate, "ci95": (float(ci95.low), float(ci95.high)),
            "ci90": (float(ci90.low), float(ci90.high)), "p": float(test.pvalue), "paired": paired,
            "n": (len(b), len(a)), "sd_padded": float(b.std(ddof=1)), "sd_packed": float(a.std(ddof=1)),
            "sd_diff": float((a - b).std(ddof=1)) if paired else None, "margin": margin,
            "verdict": "equivalent" if equivalent else "differs" if detected else "inconclusive",
            "detected": detected, "direction": "packed worse" if estimate > 0 else "packed better"}  # fmt: skip


def pairing(padded: dict[int, dict], packed: dict[int, dict]) -> tuple[bool, str]:
    """Whether the sides pair by seed, and why: every seed finished on both sides with equal target_tokens."""
    seeds = sorted(set(padded) | set(packed))
    for s in seeds:
        for side, trials in (("padded", padded), ("packed", packed)):
            t = trials.get(s)
            if t is None or t.get("status") != "finished":
                return False, f"unpaired (Welch): seed {s}'s {side} trial did not finish"
            if t.get("target_tokens") is None:
                return False, f"unpaired (Welch): seed {s}'s {side} trial reports no target_tokens (no result.json)"
        a, b = padded[s]["target_tokens"], packed[s]["target_tokens"]
        if a != b:
            return False, (f"unpaired (Welch): seed {s}'s trials trained different batches (target_tokens {a:,} "
                           f"padded, {b:,} packed)")  # fmt: skip
    same = f"equal target_tokens, seeds {seeds[0]}-{seeds[-1]}"
    return True, f"paired by seed (t-test on the differences): each seed's two trials trained the same batches ({same})"


def schedule_position(step: int, train: dict | None) -> str:
    """Where step ``step`` lies in a trial's learning-rate schedule (its config.json "train"), in words."""
    if not train or not train.get("warmup"):
        return f"at step {step} (warmup unknown: no config.json)"
    from transformer_core.optim import learning_rate, peak_lr  # the trainer's own schedule (rsqrt: the paper's)

    warmup, schedule = int(train["warmup"]), train.get("schedule", "rsqrt")
    steps, cooldown = int(train.get("steps") or step), float(train.get("cooldown", 0.2))
    fraction = learning_rate(step, steps, 512, warmup, 1.0, schedule, cooldown) / peak_lr(512, warmup, 1.0)
    if step < warmup:
        return f"at step {step} of a {warmup}-step warmup (learning rate {fraction:.3g} of its peak)"
    if step == warmup:
        return f"at step {step}, the end of its warmup (the peak learning rate)"
    return f"at step {step}, past its {warmup}-step warmup ({schedule}: learning rate {fraction:.3g} of its peak)"


def _unfinished(trials: list[dict]) -> str:
    return "; ".join(f"seed {t['seed']} {t['status']} ({t.get('why') or 'no reason given'})" for t in trials)


def verdict(trials: list[dict], steps: int, margin: float, compile_asked: str | None = None) -> str:
    """The verdict line of a run's trials (dicts of read_trial with "side" and "seed"), or why it has none."""
    by: dict[str, dict[int, dict]] = {side: {t["seed"]: t for t in trials if t["side"] == side} for side in SIDES}
    seeds = sorted(set(by["padded"]) | set(by["packed"]))
    get = lambda side, s: by[side].get(s) or {"seed": s, "status": "not run", "why": "no trial"}
    fell_back = [t for t in by["packed"].values() if t.get("packing") == "off"]
    if fell_back:
        return "verdict: candidate not measured: " + "; ".join(
            f"seed {t['seed']} trained padded batches ({t.get('packing_reason') or 'no reason given'})"
            for t in fell_back
        )
    failed = {side: [get(side, s) for s in seeds if get(side, s)["status"] not in ("finished", NOT_STARTED)]
              for side in SIDES}  # fmt: skip
    late = [t for t in trials if t.get("status") == NOT_STARTED]
    notes = []
    ran = sorted({t["compile"] for t in by["packed"].values() if t.get("compile")} - {compile_asked})
    if compile_asked and ran:
        who = [str(t["seed"]) for t in by["packed"].values() if t.get("compile") in ran]
        notes.append(f"compile asked {compile_asked}, ran {'/'.join(ran)} (seeds {', '.join(who)})")
    fallback = [str(t["seed"]) for t in trials if t.get("source") == FROM_METRICS]
    if fallback:
        notes.append(f"seeds {', '.join(fallback)}: dev_ce {FROM_METRICS}")
    unknown = [
        str(t["seed"]) for t in by["packed"].values() if t.get("source") == FROM_METRICS and not t.get("packing")
    ]
    if unknown:  # the layout a trial trained is in its result.json only
        notes.append(f"that the candidate's seeds {', '.join(unknown)} trained packed batches is not confirmed "
                     "(no result.json)")  # fmt: skip
    note = "".join(f"; {n}" for n in notes)
    if failed["padded"]:
        also = f"; the candidate did not finish {_unfinished(failed['packed'])} either" if failed["packed"] else ""
        return f"verdict: no verdict: today's step did not finish {_unfinished(failed['padded'])}{also}{note}"
    if failed["packed"]:
        return f"verdict: candidate failed: {_unfinished(failed['packed'])}{note}"
    if late:
        which = "; ".join(f"{t['side']} seed {t['seed']} ({t.get('why')})" for t in late)
        return f"verdict: no verdict: out of time, not started: {which}{note}"
    if len(seeds) < 2:
        return f"verdict: no verdict: {len(seeds)} seed a side, 2 needed{note}"
    paired, why = pairing(by["padded"], by["packed"])
    ce = {side: {s: by[side][s]["dev_ce"] for s in seeds} for side in SIDES}
    c = compare(ce["padded"], ce["packed"], paired, margin)
    trains = [t["train"] for t in trials if t.get("train")]
    warmups = {(t.get("warmup"), t.get("schedule")) for t in trains}
    position = schedule_position(steps, trains[0] if trains else None)
    if len(warmups) > 1:
        position += " (the trials' warmups or schedules differ)"
    (lo95, hi95), (lo90, hi90), m = c["ci95"], c["ci90"], margin
    if c["verdict"] == "equivalent":
        head = "equivalent: the 90% interval lies inside the margin (two one-sided tests at 5%)"
        if c["detected"]:
            head += f"; a difference smaller than the margin was detected ({c['direction']})"
    elif c["verdict"] == "differs":
        head = f"differs: {c['direction']} (the 95% interval excludes 0)"
    else:
        narrow = "more seeds" if paired else "more seeds, or paired batches (equal batch settings on both sides)"
        head = f"inconclusive: the interval is wider than the margin (it holds 0 and reaches outside it); {narrow}"
        head += " would narrow it"
    sds = f"seed sd padded {c['sd_padded']:.4f}, packed {c['sd_packed']:.4f}"
    sds += f", of the differences {c['sd_diff']:.4f}" if c["sd_diff"] is not None else ""
    return (f"verdict: {head}.  Packed - padded dev cross-entropy {c['estimate']:+.4f} nats, 90% interval "
            f"[{lo90:+.4f}, {hi90:+.4f}], 95% [{lo95:+.4f}, {hi95:+.4f}], p {c['p']:.3g}, margin +-{m:.3f} nats (a "
            f"{math.exp(m) - 1:.1%} perplexity ratio, fixed before the run); {why}; {sds}; "
            f"{position}{note}")  # fmt: skip


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
    ap.add_argument("--padded-set", nargs="*", default=[], help="key=value for the padded side only")
    ap.add_argument("--packed-set", nargs="*", default=[], help="key=value for the packed side only")
    ap.add_argument(
        "--margin", type=float, default=0.02, help="equivalence margin in nats (default 0.02: a 2%% perplexity ratio)"
    )
    ap.add_argument("--trial-timeout", type=float, default=None, help="seconds: a trial past it is 'timed out'")
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds for the whole run: a trial ends by then ('timed out'), none starts with less left than its "
        "side's quickest trial took (30 s before one finished), and the verdict is written",
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--dry-run", action="store_true", help="smoke profile, fixture corpus, CPU, 20 steps")
    args = ap.parse_args()
    if args.margin <= 0:
        ap.error("--margin must be a positive number of nats")
    if args.deadline is not None and not args.deadline > 0:
        ap.error("--deadline must be a positive number of seconds")
    args.ends_at = time.monotonic() + args.deadline if args.deadline is not None else None
    args.took = {}
    if args.dry_run:
        args.profile, args.steps = "smoke", min(args.steps, 20)
        os.environ.setdefault("TSWEEP_BIBLE_DB", str(ROOT / "tests" / "fixtures" / "bible-mini.db"))
        args.data_dir = args.data_dir or tempfile.mkdtemp(prefix="packing-learning-data-")
        args.set = [*args.set, "device=cpu"]
        if args.parallel > 1:  # prepare the corpus once before the trials would race to
            run_trial(args, "padded", 1, Path(tempfile.mkdtemp(prefix="packing-learning-warm-")))
    compile_asked = None
    for kv in [*args.set, *args.packed_set]:
        if kv.startswith("compile="):
            compile_asked = kv.split("=", 1)[1]
    keep = Path(args.out + ".trials") if args.out else None
    now = datetime.now(timezone.utc)
    head = [f"# {platform.node()}; Python {platform.python_version()}; {now:%Y-%m-%d %H:%M} UTC; "
            f"profile {args.profile} base row, corpus {args.corpus}, {args.steps} steps, seeds 1-{args.seeds}; "
            f"equivalence margin +-{args.margin:g} nats",
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
        r = run_trial(args, job[0], job[1], Path(tmp), keep)
        say(trial_line(r))
        return r

    jobs = [(side, s) for s in range(1, args.seeds + 1) for side in SIDES]
    with tempfile.TemporaryDirectory(prefix="packing-learning-") as tmp:
        with ThreadPoolExecutor(max(1, args.parallel)) as pool:
            results = list(pool.map(one, jobs))
    say(verdict(results, args.steps, args.margin, compile_asked))


def trial_line(r: dict) -> str:
    """One trial's line: its dev cross-entropy, tokens a step, layout and device, or why it has none."""
    who = f"{r['side']} seed {r['seed']}"
    if r.get("status") != "finished":
        return f"{who}: {r.get('status')} ({r.get('why') or 'no reason given'})"
    if r.get("source") == FROM_METRICS:
        return f"{who}: dev cross-entropy {r['dev_ce']:.4f} at step {r['steps']} ({FROM_METRICS}: {r.get('ended')})"
    # the GPU memory a trial's process allocated at most (result.json's peak_cuda_gb): what sizes --parallel
    peak = f", peak GPU memory {r['peak_cuda_gb']:.1f} GiB" if r.get("peak_cuda_gb") else ""
    return (f"{who}: dev cross-entropy {r['dev_ce']:.4f} at step {r['steps']}, "
            f"{r['target_tokens'] / r['steps']:,.0f} target tokens a step; layout "
            f"{r.get('packing')} ({r.get('packing_reason')}); compile {r.get('compile', '?')}; {r['device']} "
            f"{r['precision']}; {r.get('tokens_per_second') or 0:,.0f} target tokens/s while the trials shared the "
            f"device, compile {r.get('compile_seconds') or 0:.0f} s{peak}")  # fmt: skip


if __name__ == "__main__":
    main()

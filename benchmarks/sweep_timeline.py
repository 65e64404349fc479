"""Where a sweep's wall time went, read from its run directories: each trial's own time, the start-up inside a
trial before its first step (what the trial imports and builds: MLflow, corpus, model, optimizer), and the wait on
a slot between one trial's end and the next one's start (Tune's scheduling, and a fresh worker's process start
and torch import where the worker is not reused); several sweeps side by side, with which of their common trials
computed the same.

    PYTHONPATH=. python benchmarks/sweep_timeline.py SWEEP_DIR [SWEEP_DIR ...] [--trials 38]

A trial's start is the last line of its sessions.jsonl (written when its worker begins it; a resumed trial has
one per session), its first step the last line of attempts.jsonl, its end when result.json was written (its
modification time; where that is not within 5 minutes after the start plus result.json's session_seconds, the
file was copied, and that sum is the end, short by what the trial did before train_and_evaluate began).  What a
worker does after result.json (MLflow's artifact upload) counts as wait.  Slots are rebuilt from the times: a
trial takes the slot that freed up last before it started.  ``--trials N`` counts only the first N trials to
finish (e.g. the minimum seeds of an adaptive sweep that went on to another round).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis.data.metrics import DEFAULT_TASK, for_task
from transformer_core.rundir import ATTEMPTS, RESULT

SAME = for_task(DEFAULT_TASK).final  # every key a finished trial reports (analysis.data.metrics)


def last_line(path: Path) -> dict:
    return json.loads(path.read_text().splitlines()[-1])


def trials(sweep: Path) -> list[dict]:
    if not (sweep / "trials").is_dir():
        raise SystemExit(f"sweep_timeline.py: {sweep} is not a sweep directory (it has no trials/ folder)")
    out = []
    for d in sorted((sweep / "trials").iterdir()):
        try:
            result = json.loads((d / RESULT).read_text())
            session, attempt = last_line(d / "sessions.jsonl"), last_line(d / ATTEMPTS)
        except (OSError, ValueError, IndexError):
            continue  # not finished (or not started): no end to place
        start, written = session["time"], (d / RESULT).stat().st_mtime
        end = start + result["session_seconds"]
        end = written if end - 1 <= written <= end + 300 else end
        out.append({"id": d.name, "start": start, "first_step": attempt["time"] - start,
                    "pid": (session.get("node"), session["pid"]) if "pid" in session else None,
                    "end": end, "result": {k: result.get(k) for k in SAME}})  # fmt: skip
    return out


def timeline(sweep: Path, limit: int | None) -> dict:
    runs = trials(sweep)
    if not runs:
        raise SystemExit(f"sweep_timeline.py: {sweep} has no finished trial (trials/*/result.json)")
    runs = sorted(runs, key=lambda r: r["end"])[:limit] if limit else runs
    runs = sorted(runs, key=lambda r: r["start"])
    t0, slots, waits = runs[0]["start"], [], []
    for r in runs:
        free = [i for i, end in enumerate(slots) if end <= r["start"] + 1.0]
        if free:
            i = max(free, key=lambda j: slots[j])
            waits.append(r["start"] - slots[i])
            slots[i] = r["end"]
        else:
            slots.append(r["end"])
    pids = [r["pid"] for r in runs if r["pid"] is not None]
    return {
        "trials": len(runs),
        "slots": len(slots),
        "span": max(slots) - t0,
        "trial_seconds": sum(r["end"] - r["start"] for r in runs),
        "first_step": [r["first_step"] for r in runs],
        "waits": waits,
        "processes": len(set(pids)) if pids else None,
        "by_id": {r["id"]: r for r in runs},
    }


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+", type=Path)
    ap.add_argument("--trials", type=int, default=None, help="only the first N trials to finish")
    args = ap.parse_args(argv)
    lines = {s: timeline(s, args.trials) for s in args.sweeps}
    print("| sweep | trials | slots | first start to last end | trials' own time | start-up before the first step, "
          "mean (sum) | wait between trials on a slot, mean (sum) | worker processes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for s, t in lines.items():
        processes = t["processes"] if t["processes"] is not None else "not recorded"
        print(f"| {s} | {t['trials']} | {t['slots']} | {t['span'] / 60:.1f} min | {t['trial_seconds'] / 60:.1f} min | "
              f"{mean(t['first_step']):.1f} s ({sum(t['first_step']):.0f} s) | {mean(t['waits']):.1f} s "
              f"({sum(t['waits']):.0f} s) | {processes} |")  # fmt: skip
    if len(lines) > 1:
        first, *rest = lines.values()
        for s, t in zip(args.sweeps[1:], rest):
            common = sorted(set(first["by_id"]) & set(t["by_id"]))
            same = [i for i in common if first["by_id"][i]["result"] == t["by_id"][i]["result"]]
            span = f"; span {t['span'] - first['span']:+.0f} s" if t["trials"] == first["trials"] else ""
            print(f"{s} against {args.sweeps[0]}: {len(same)} of {len(common)} common trials with the same "
                  f"{', '.join(SAME)}{span}")  # fmt: skip


if __name__ == "__main__":
    main()

"""The live view of a sweep in the user's terms: rows and seeds, steps, loss, dev metrics, an ETA.

It reads the sweep directory (the files the trials write), so the driver and `tsweep status --watch`
(another terminal, another machine with the directory or URI) show the same thing.  On a terminal it
draws tqdm bars: one line for the sweep, one per running trial.  Elsewhere (CI, `make demo > log`) it
prints one plain line per trial event: started, eval, finished, failed, retried.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tqdm import tqdm

from transformer_core import rundir
from transformer_core.rundir import Status

TERMINAL = (Status.FINISHED.value, Status.DIVERGED.value)


@dataclass
class TrialState:
    trial_id: str
    name: str  # "A1 s1"
    status: str
    step: int = 0
    steps: int = 0
    loss: Optional[float] = None
    dev_bleu: Optional[float] = None
    dev_ppl: Optional[float] = None
    dev_bpb: Optional[float] = None  # task lm: bits per byte (no BLEU)
    tokens_per_second: Optional[float] = None
    evals: int = 0
    attempts: int = 0
    seconds: Optional[float] = None  # wall time of a finished trial
    started: Optional[float] = None  # first attempt's start (epoch seconds)


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _lines(path: Path) -> list[dict]:
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return out


def snapshot(sweep_dir: Path) -> list[TrialState]:
    """Every planned trial's state, read from sweep.json and the trials' files."""
    state = _json(sweep_dir / "sweep.json")
    plan = state.get("plan") or {}
    out = []
    for tid in state.get("trials") or []:
        p, wd = plan.get(tid, {}), sweep_dir / "trials" / tid
        t = TrialState(tid, f"{p.get('row', tid)} s{p.get('seed', '?')}", Status.PENDING.value)
        t.steps = int((p.get("values") or {}).get("steps") or 0)
        attempts = _lines(wd / rundir.ATTEMPTS)
        t.attempts, t.started = len(attempts), (attempts[0].get("time") if attempts else None)
        for rec in _lines(wd / rundir.METRICS):
            t.step = max(t.step, int(rec.get("step", 0)))
            if rec.get("kind") == "train":
                t.loss, t.tokens_per_second = rec.get("loss"), rec.get("tokens_per_second")
            elif rec.get("kind") == "eval":
                t.evals += 1
                t.dev_ppl, t.dev_bpb = rec.get("dev_ppl"), rec.get("dev_bpb")
                t.dev_bleu = rec.get("dev_bleu") if rec.get("dev_bleu") is not None else t.dev_bleu
        result = _json(wd / rundir.RESULT)
        if result.get("status"):
            t.status, t.seconds = result["status"], result.get("session_seconds") or result.get("wall_seconds")
            t.dev_bleu, t.dev_ppl = result.get("dev_bleu", t.dev_bleu), result.get("dev_ppl", t.dev_ppl)
            t.dev_bpb = result.get("dev_bpb", t.dev_bpb)
        elif t.attempts:
            t.status = Status.RUNNING.value
        out.append(t)
    return out


def summary_line(trials: list[TrialState], started: float, est_trial_s: Optional[float], concurrent: int) -> str:
    """finished / running / pending / failed, elapsed, ETA from measured trial times (else the plan's estimate)."""
    n = {k: 0 for k in ("finished", "running", "pending", "failed")}
    for t in trials:
        key = "finished" if t.status == "finished" else "failed" if t.status in ("diverged", "failed") else t.status
        n[key if key in n else "running"] += 1
    done = [t.seconds for t in trials if t.seconds]
    # before the first trial ends: the running trials' pace (time so far / fraction of steps done), else the plan
    pace = [(time.time() - t.started) * t.steps / t.step for t in trials
            if t.status == "running" and t.started and t.step and t.steps]  # fmt: skip
    per = sum(done) / len(done) if done else (sum(pace) / len(pace) if pace else est_trial_s)
    left = n["running"] + n["pending"]
    eta = f"ETA ~{_dur(per * -(-left // max(concurrent, 1)))}" if per and left else ("done" if not left else "ETA ?")
    source = "measured" if done else "from the running trials' pace" if pace else "plan estimate"
    return (f"{n['finished']} finished, {n['running']} running, {n['pending']} pending, {n['failed']} failed; "
            f"elapsed {_dur(time.time() - started)}; {eta}" + (f" ({source})" if left else ""))  # fmt: skip


def trial_line(t: TrialState) -> str:
    parts = [f"{t.name:<8}", f"step {t.step}/{t.steps}"]
    if t.loss is not None:
        parts.append(f"loss {t.loss:.3f}")
    if t.dev_bpb is not None:  # a language model
        parts.append(f"bits/byte {t.dev_bpb:.3f}")
    else:
        parts.append(f"dev BLEU {t.dev_bleu:.2f}" if t.dev_bleu is not None else "dev BLEU -")
    parts.append(f"PPL {t.dev_ppl:.1f}" if t.dev_ppl is not None else "PPL -")
    if t.tokens_per_second:
        parts.append(f"{t.tokens_per_second:,.0f} tok/s")
    return "  ".join(parts)


def events(before: dict[str, TrialState], now: list[TrialState]) -> list[str]:
    """Plain lines for what changed between two snapshots."""
    out = []
    for t in now:
        b = before.get(t.trial_id)
        if t.status != "pending" and (b is None or b.status == "pending") and t.attempts:
            out.append(f"{t.name}: started")  # also when it started and ended between two looks
        elif b is not None and t.attempts > b.attempts and b.attempts:
            out.append(f"{t.name}: retried (attempt {t.attempts}, from its checkpoint)")
        if b is not None and t.evals > b.evals and t.status == "running":
            bleu = f"dev BLEU {t.dev_bleu:.2f}, " if t.dev_bleu is not None else ""
            bleu += f"dev bits/byte {t.dev_bpb:.3f}, " if t.dev_bpb is not None else ""
            out.append(f"{t.name}: eval at step {t.step}/{t.steps}: {bleu}dev PPL {t.dev_ppl:.2f}")
        if t.status in TERMINAL + ("failed",) and (b is None or b.status != t.status):
            if t.status == "finished":
                first = f"dev bits/byte {t.dev_bpb:.3f}" if t.dev_bpb is not None else f"dev BLEU {t.dev_bleu:.2f}"
                out.append(f"{t.name}: finished: {first}, dev PPL {t.dev_ppl:.2f}"
                           + (f" in {_dur(t.seconds)}" if t.seconds else ""))  # fmt: skip
            else:
                out.append(f"{t.name}: {t.status}")
    return out


def _dur(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class LiveView:
    """Redraws (terminal) or prints events (otherwise) from the sweep directory until stopped."""

    def __init__(self, sweep_dir: Path, concurrent: int, est_trial_s: Optional[float] = None,
                 interval: float = 2.0, out=None, tty: Optional[bool] = None,
                 refresh: Callable[[], Path] | None = None):  # fmt: skip
        self.sweep_dir, self.concurrent, self.est, self.interval = Path(sweep_dir), concurrent, est_trial_s, interval
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.refresh = refresh or (lambda: self.sweep_dir)
        self.started, self.seen = time.time(), {}
        self.bars: list[tqdm] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def tick(self) -> list[TrialState]:
        now = snapshot(self.refresh())
        if self.tty:
            self._draw(now)
        else:
            for line in events(self.seen, now):
                print(line, file=self.out, flush=True)
        self.seen = {t.trial_id: t for t in now}
        return now

    def _draw(self, now: list[TrialState]) -> None:
        running = [t for t in now if t.status == "running"]
        need = 1 + max(self.concurrent, len(running))
        while len(self.bars) < need:
            self.bars.append(tqdm(total=0, position=len(self.bars), bar_format="{desc}", file=self.out, leave=True))
        self.bars[0].set_description_str(summary_line(now, self.started, self.est, self.concurrent))
        for i, bar in enumerate(self.bars[1:]):
            bar.set_description_str(trial_line(running[i]) if i < len(running) else "")

    def start(self) -> "LiveView":
        def loop():
            while not self._stop.wait(self.interval):
                try:
                    self.tick()
                except Exception:  # a half-written file or a vanished scratch dir: next tick
                    continue

        self.seen = {t.trial_id: t for t in snapshot(self.refresh())}
        self._thread = threading.Thread(target=loop, name="tsweep-live-view", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        try:
            self.tick()
        finally:
            for bar in self.bars:
                bar.close()

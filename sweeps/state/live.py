"""The live view of a sweep in the user's terms: rows and seeds, steps, loss, dev metrics, an ETA.

It reads the sweep directory (the files the trials write), so the driver and `tsweep status --watch`
(another terminal, another machine with the directory or URI) show the same thing.  On a terminal it
draws tqdm bars: one line for the sweep, one per running trial.  Elsewhere (CI, `make demo > log`) it
prints one plain line per trial event: started, eval, finished, failed, retried.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tqdm import tqdm

from analysis.data.files import METRICS_BYTES, read_json, read_text
from transformer_core import rundir
from transformer_core.formatting import MISSING, number
from transformer_core.rundir import SAFE_NAME, Status, loads

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
    eval_step: int = 0  # the step the newest evaluation is recorded at (the curves' x), not the step trained to
    attempts: int = 0
    seconds: Optional[float] = None  # wall time of a finished trial
    started: Optional[float] = None  # first attempt's start (epoch seconds)
    sampled: Optional[dict] = None  # a search sample's knobs (its trial.json's search; a confirmation: its sample's)


def _json(path: Path) -> dict:
    try:
        value = read_json(path)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):  # OSError: Unreadable too (a FIFO, a huge file planted in the sweep)
        return {}


def _lines(path: Path) -> list[dict]:
    out: list[dict] = []
    try:
        text = read_text(path, METRICS_BYTES)
    except (OSError, ValueError):
        return out
    for line in text.splitlines():
        try:
            out.append(loads(line))
        except ValueError:
            continue  # a line being written
    return out


def _int(x, default: int) -> int:
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


def _search_samples(sweep_dir: Path, planned: set) -> dict:
    """{trial id: plan-like entry} of a search's sampled trials that sweep.json does not list yet (Optuna
    samples them while the round runs): each trial.json that names its sample."""
    out = {}
    for path in sorted((sweep_dir / "trials").glob(f"*/{rundir.TRIAL}")):
        tid = path.parent.name
        if tid in planned or not SAFE_NAME.match(tid):
            continue
        rec = _json(path)
        if isinstance(rec.get("search"), dict) or rec.get("group") == "search":
            out[tid] = {"row": rec.get("row") or tid, "seed": rec.get("seed", "?"), "values": rec.get("values") or {},
                        "search": rec.get("search") if isinstance(rec.get("search"), dict) else None}  # fmt: skip
    return out


def snapshot(sweep_dir: Path) -> list[TrialState]:
    """Every planned trial's state (and a search's sampled ones), read from sweep.json and the trials' files."""
    from analysis.data.sweep_record import read_record
    from analysis.data.text import printable
    from transformer_core.errors import UserError

    try:
        record = read_record(sweep_dir)
    except UserError:  # being replaced, or damaged: the trials' own files still say what ran
        record = None
    plan = dict(record.plan) if record else {}
    ids = [t for t in (record.trials if record else ()) if isinstance(t, str) and SAFE_NAME.match(t)]
    extra = _search_samples(sweep_dir, set(ids)) if (sweep_dir / "trials").is_dir() else {}
    plan = {**plan, **extra}
    # a search sample's knobs by its row (sample-...): a confirmation trial of the same sample names them too
    knobs = {e["row"]: e["search"] for e in extra.values() if e.get("search")}
    out = []
    for tid in ids + list(extra):
        planned = plan.get(tid)
        p, wd = planned if isinstance(planned, dict) else {}, sweep_dir / "trials" / tid
        name = f"{p.get('row', tid)} s{p.get('seed', '?')}"
        t = TrialState(tid, printable(name), Status.PENDING.value)  # terminal escapes from disk written as \xNN
        t.sampled = knobs.get(p.get("row"))
        planned_values = p.get("values")
        values = planned_values if isinstance(planned_values, dict) else {}
        t.steps = _int(values.get("steps"), 0)
        attempts = _lines(wd / rundir.ATTEMPTS)
        t.attempts, t.started = len(attempts), (attempts[0].get("time") if attempts else None)
        for rec in _lines(wd / rundir.METRICS):
            t.step = max(t.step, _int(rec.get("step"), 0))
            if rec.get("kind") == "train":
                t.loss, t.tokens_per_second = rec.get("loss"), rec.get("tokens_per_second")
            elif rec.get("kind") == "eval":
                t.evals += 1
                t.eval_step = _int(rec.get("step"), t.eval_step)
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


def _eta(per: Optional[float], left: int, concurrent: int) -> str:
    """'ETA ~12m30s' for ``left`` trials of ``per`` seconds each, ``concurrent`` at a time ('done', 'ETA ?')."""
    if not left:
        return "done"
    return f"ETA ~{_dur(per * -(-left // max(concurrent, 1)))}" if per else "ETA ?"


def progress_line(trials: list[TrialState], started: float, concurrent: int, deadline: Optional[float] = None,
                  total: Optional[int] = None) -> str:  # fmt: skip
    """'k of n trials ended; elapsed; ETA; budget left': what a finished-trial line adds, from the measured times;
    n is ``total`` (a search's whole plan: samples x seeds and its confirmation) where given, else the trials seen."""
    ended = sum(1 for t in trials if t.status in TERMINAL + ("failed",))
    planned = max(total or 0, len(trials))
    left = planned - ended
    done = [t.seconds for t in trials if t.seconds]
    per = sum(done) / len(done) if done else None
    eta = _eta(per, left, concurrent)
    budget = f"; budget left {_dur(deadline - time.time())}" if deadline is not None else ""
    return f"{ended} of {planned} trials ended; elapsed {_dur(time.time() - started)}; {eta}{budget}"


def summary_line(trials: list[TrialState], started: float, est_trial_s: Optional[float], concurrent: int,
                 total: Optional[int] = None) -> str:  # fmt: skip
    """finished / running / pending / failed, elapsed, ETA from measured trial times (else the plan's estimate); the
    trials of ``total`` (a search's whole plan) not seen yet are pending."""
    n = {k: 0 for k in ("finished", "running", "pending", "failed")}
    for t in trials:
        key = "finished" if t.status == "finished" else "failed" if t.status in ("diverged", "failed") else t.status
        n[key if key in n else "running"] += 1
    n["pending"] += max(0, (total or 0) - len(trials))
    done = [t.seconds for t in trials if t.seconds]
    # before the first trial ends: the running trials' pace (time so far / fraction of steps done), else the plan
    pace = [(time.time() - t.started) * t.steps / t.step for t in trials
            if t.status == "running" and t.started and t.step and t.steps]  # fmt: skip
    per = sum(done) / len(done) if done else (sum(pace) / len(pace) if pace else est_trial_s)
    left = n["running"] + n["pending"]
    eta = _eta(per, left, concurrent)
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


def events(before: dict[str, TrialState], now: list[TrialState], progress: Callable[[], str] = lambda: "") -> list[str]:
    """Plain lines for what changed between two snapshots; a trial's end adds ``progress()`` (progress_line)."""
    out = []
    for t in now:
        b = before.get(t.trial_id)
        if t.status != "pending" and (b is None or b.status == "pending") and t.attempts:
            out.append(f"{t.name}: started" + (f" ({knob_text(t.sampled)})" if t.sampled else ""))  # a sample's knobs
        elif b is not None and t.attempts > b.attempts and b.attempts:
            out.append(f"{t.name}: retried (attempt {t.attempts}, from its checkpoint)")
        if b is not None and t.evals > b.evals and t.status == "running":
            bleu = f"dev BLEU {t.dev_bleu:.2f}, " if t.dev_bleu is not None else ""
            bleu += f"dev bits/byte {t.dev_bpb:.3f}, " if t.dev_bpb is not None else ""
            ppl = f"dev PPL {t.dev_ppl:.2f}" if isinstance(t.dev_ppl, (int, float)) else "dev PPL -"
            out.append(f"{t.name}: eval at step {t.eval_step}/{t.steps}: {bleu}{ppl}")
        if t.status in TERMINAL + ("failed",) and (b is None or b.status != t.status):
            tail = progress()
            tail = f" [{tail}]" if tail else ""
            if t.status == "finished":
                first = f"dev bits/byte {t.dev_bpb:.3f}" if t.dev_bpb is not None else f"dev BLEU {_f(t.dev_bleu)}"
                out.append(f"{t.name}: finished: {first}, dev PPL {_f(t.dev_ppl)}"
                           + (f" in {_dur(t.seconds)}" if t.seconds else "") + tail)  # fmt: skip
            else:
                out.append(f"{t.name}: {t.status}{tail}")
    return out


def knob_text(values: dict) -> str:
    """A search sample's knobs as 'lr_scale=0.5234, warmup=10' (floats to 4 significant digits, escaped)."""
    from analysis.data.text import printable

    return printable(", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()))


def _f(x, digits: int = 2) -> str:
    return number(x, f".{digits}f") if isinstance(x, (int, float)) else MISSING


def _dur(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class LiveView:
    """Redraws (terminal) or prints events (otherwise) from the sweep directory until stopped."""

    def __init__(self, sweep_dir: Path, concurrent: int, est_trial_s: Optional[float] = None,
                 interval: float = 2.0, out=None, tty: Optional[bool] = None,
                 refresh: Callable[[], Path] | None = None, deadline: Optional[float] = None,
                 total: Optional[int] = None, started: Optional[float] = None):  # fmt: skip
        self.sweep_dir, self.concurrent, self.est, self.interval = Path(sweep_dir), concurrent, est_trial_s, interval
        self.deadline = deadline  # epoch seconds when the wall-clock budget runs out (None: no budget)
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.refresh = refresh or (lambda: self.sweep_dir)
        self.started = started if started is not None else time.time()  # elapsed from the sweep's start where given
        self.total = total  # trials counted against (a search's whole plan), else the trials seen
        self.seen: dict = {}
        self.bars: list[tqdm] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def tick(self) -> list[TrialState]:
        now = snapshot(self.refresh())
        if self.tty:
            self._draw(now)
        else:
            progress = lambda: progress_line(now, self.started, self.concurrent, self.deadline, self.total)  # noqa: E731
            for line in events(self.seen, now, progress):
                print(line, file=self.out, flush=True)
        self.seen = {t.trial_id: t for t in now}
        return now

    def _draw(self, now: list[TrialState]) -> None:
        running = [t for t in now if t.status == "running"]
        need = 1 + max(self.concurrent, len(running))
        while len(self.bars) < need:
            self.bars.append(tqdm(total=0, position=len(self.bars), bar_format="{desc}", file=self.out, leave=True))
        self.bars[0].set_description_str(summary_line(now, self.started, self.est, self.concurrent, self.total))
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

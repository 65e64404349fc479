"""Chaos rounds on a smoke sweep: kill the driver or a trial worker, or fill the sweep's disk, at random points;
resume, and check that the final table equals an uninterrupted run's.  Not in the default suite (minutes per round).

    python benchmarks/chaos.py --rounds 3 [--seed 0] [--faults kill,disk]

--faults takes kill (= driver,worker), driver, worker and disk.  Every round injects one fault of each kind
asked for (a kill, driver or worker at random, and a full disk) in a random order, each at a random moment of
an attempt; later attempts draw a fault at random until one finishes before its fault comes.

A disk fault needs root: each round's --out lies on a real tmpfs of its own (as tests/test_faults.py does), and
at the fault a ballast file fills it (ENOSPC).  The driver must then end with one line naming the directory
and no traceback, every trial that had finished must keep its result, and every state file must still parse;
the ballast is deleted and --resume goes on.  Where no tmpfs can be mounted, disk faults are skipped (said once).

Training is deterministic given the seed, so every finished trial's dev BLEU, dev PPL and test BLEU must match
the reference run's to the last digit, however often the sweep was killed or ran out of disk on its way.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "specs" / "smoke.yaml"
KEYS = ("dev_bleu", "dev_ppl", "test_bleu")
KILLS = ("driver", "worker")
DISK_SIZE = "64m"  # a smoke sweep needs a few MiB; the ballast takes whatever is free at the fault
STATE_FILES = ("sweep.json", "tune_summary.json", "trials/*/trial.json", "trials/*/config.json", "trials/*/result.json")
ATTEMPTS = 8


def _cmd(out: Path, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(SPEC), "--profile", "smoke", "--out", str(out)]
    return cmd + (["--resume"] if resume else []) + ["--num-cpus", "2"]


def table(out: Path) -> dict:
    rows = {}
    for result in sorted((out / "trials").glob("*/result.json")):
        r = json.loads(result.read_text())
        rows[result.parent.name] = tuple(r.get(k) for k in KEYS) + (r.get("status"),)
    return rows


def finished(out: Path) -> dict:
    """The rows whose result.json reads back now (a half-written one would be a bug: it is reported)."""
    rows = {}
    for result in sorted((out / "trials").glob("*/result.json")):
        try:
            r = json.loads(result.read_text())
        except (OSError, ValueError) as exc:
            rows[result.parent.name] = f"unreadable: {exc}"
            continue
        rows[result.parent.name] = tuple(r.get(k) for k in KEYS) + (r.get("status"),)
    return rows


# processes: only those of the sessions this script started ----------------------------------------------------


def _session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _session_pids(sid: int) -> list[int]:
    """Every live process of session ``sid`` (a driver started with start_new_session: it, Ray and its workers)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        if pid != os.getpid() and _session_of(pid) == sid:
            pids.append(pid)
    return pids


def _kill_worker(sid: int) -> bool:
    """SIGKILL one Ray trial worker of this driver's session (the trial is retried from its checkpoint).

    Workers of another sweep on this machine (another session) are never touched."""
    found = []
    for pid in _session_pids(sid):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::ImplicitFunc"):
                found.append(pid)
        except OSError:
            continue
    if found:
        try:
            os.kill(random.choice(found), signal.SIGKILL)
        except ProcessLookupError:
            return False
    return bool(found)


def _reap(sid: int, grace: float = 15.0) -> None:
    """After the driver ended: give Ray's processes of its session ``grace`` seconds, then SIGKILL what is left."""
    deadline = time.time() + grace
    while _session_pids(sid) and time.time() < deadline:
        time.sleep(0.5)
    for pid in _session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# the disk ------------------------------------------------------------------------------------------------------


def can_mount(work: Path) -> str:
    """'' where a tmpfs can be mounted here, else why not."""
    if os.geteuid() != 0:
        return f"not running as root (uid {os.geteuid()})"
    probe = work / "probe"
    probe.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True, text=True)
    if r.returncode:
        probe.rmdir()
        return f"mount -t tmpfs failed: {(r.stderr or r.stdout).strip() or r.returncode}"
    subprocess.run(["umount", str(probe)], check=True)
    probe.rmdir()
    return ""


@contextmanager
def tiny_disk(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (unmounted, lazily if something still holds it, on the way out)."""
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(path)], check=True)


def fill(disk: Path) -> int:
    """Write a ballast file on ``disk`` until ENOSPC; returns its size in bytes."""
    fd = os.open(disk / "ballast", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    size, chunk = 0, 1 << 20
    try:
        while True:
            try:
                size += os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if chunk <= 4096:
                    return size
                chunk //= 16
    finally:
        os.close(fd)


def _unreadable_state(out: Path) -> list[str]:
    bad = []
    for path in (p for pattern in STATE_FILES for p in out.glob(pattern)):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            bad.append(f"{path.relative_to(out)} ({exc})")
    return bad


# one round -----------------------------------------------------------------------------------------------------


class Round:
    """One sweep from scratch to a full table, with faults injected on its way."""

    def __init__(self, out: Path, disk: Path | None, kinds: list[str], env: dict, logs: Path, log, window: float):
        self.out, self.disk, self.kinds, self.env, self.logs, self.log = out, disk, kinds, env, logs, log
        self.window = window  # faults come 8 s to ``window`` s into an attempt
        self.injected: list[str] = []  # "driver", "worker", "disk", in order
        self.events: list[str] = []
        self.problems: list[str] = []  # checks that failed (a product bug to report)
        self.disk_problems = 0  # disk faults with a failed check

    def queue(self) -> list[str]:
        """One fault of each asked-for category (kill: driver or worker at random; disk), in a random order."""
        kills = [k for k in self.kinds if k in KILLS]
        todo = ([random.choice(kills)] if kills else []) + (["disk"] if "disk" in self.kinds else [])
        random.shuffle(todo)
        return todo

    def run(self) -> None:
        todo = self.queue()
        for attempt in range(ATTEMPTS):
            fault = todo.pop(0) if todo else (random.choice(self.kinds) if self.kinds else None)
            # as the driver's message says: --resume once sweep.json is written, before that run it again
            ok = self.attempt(attempt, fault, (self.out / "sweep.json").exists())
            if ok and len(table(self.out)) == 4:
                return
        raise RuntimeError(f"sweep in {self.out} did not finish after {ATTEMPTS} attempts")

    def attempt(self, attempt: int, fault: str | None, resume: bool) -> bool:
        """One driver run, ``fault`` injected at a random moment; whether the driver ended with 0."""
        err = self.logs / f"{self.out.parent.name}-attempt-{attempt}.err"
        with open(err, "w") as stderr, open(err.with_suffix(".out"), "w") as stdout:
            proc = subprocess.Popen(_cmd(self.out, resume), env=self.env, cwd=ROOT, stdout=stdout, stderr=stderr,
                                    start_new_session=True)  # fmt: skip
            at = random.uniform(8, self.window)
            try:
                proc.wait(timeout=at)  # finished (or failed) before its fault came
            except subprocess.TimeoutExpired:
                if fault == "driver":
                    os.killpg(proc.pid, signal.SIGKILL)
                    self.note("driver", f"killed the driver at {at:.0f}s")
                elif fault == "worker":
                    if _kill_worker(proc.pid):
                        self.note("worker", f"killed a trial worker at {at:.0f}s")
                    else:
                        self.log(f"  no trial worker to kill at {at:.0f}s")
                elif fault == "disk":
                    return self.disk_fault(proc, at, err)
                self.wait_or_kill(proc, f"attempt {attempt}: the driver was still running 900 s after the {fault}")
            finally:
                _reap(proc.pid)
        return proc.returncode == 0

    def wait_or_kill(self, proc: subprocess.Popen, problem: str) -> None:
        """Wait for the driver; one still running after 900 s is killed and ``problem`` recorded."""
        try:
            proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.problems.append(problem)

    def note(self, kind: str, event: str) -> None:
        self.injected.append(kind)
        self.events.append(event)
        self.log(f"  {event}")

    def disk_fault(self, proc: subprocess.Popen, at: float, err: Path) -> bool:
        """Fill the disk under the running sweep, wait for its driver, check how it ended; delete the ballast."""
        filled = time.time()
        ballast = fill(self.disk)
        kept = {k: v for k, v in finished(self.out).items() if isinstance(v, tuple)}
        self.note("disk", f"filled the disk at {at:.0f}s ({ballast / 2**20:.1f} MiB of ballast, {len(kept)} trials "
                          "finished then)")  # fmt: skip
        self.wait_or_kill(proc, f"disk full at {at:.0f}s: the driver was still running 900 s later (killed)")
        took = time.time() - filled
        text = err.read_text(errors="replace")
        errors = [x for x in text.splitlines() if x.startswith("tsweep run: error:")]
        problems = []
        if "Traceback" in text:
            problems.append(f"{tracebacks(text, proc.returncode)} in the driver's stderr ({err})")
        if proc.returncode == 0:
            outcome = "the sweep still finished"
        else:
            outcome = f"the driver ended with {proc.returncode} after {took:.0f}s"
            if len(errors) != 1:
                problems.append(f"{len(errors)} 'tsweep run: error:' lines instead of one ({err})")
            elif "no space left" not in errors[0] or str(self.out) not in errors[0]:
                problems.append(f"the error line does not name the full directory {self.out}: {errors[0]!r}")
        now = finished(self.out)
        lost = [tid for tid, row in kept.items() if now.get(tid) != row]
        if lost:
            problems.append(f"finished trials lost or changed: {', '.join(lost)}")
        bad = _unreadable_state(self.out)
        if bad:
            problems.append(f"state files left unreadable: {'; '.join(bad)}")
        (self.disk / "ballast").unlink()
        line = errors[0] if errors else "(no error line)"
        verdict = "; ".join(problems) if problems else "one line, no traceback, nothing finished lost"
        self.log(f"    {outcome}: {line}")
        self.log(f"    {verdict}; ballast deleted")
        self.problems += [f"disk full at {at:.0f}s: {p}" for p in problems]
        self.disk_problems += bool(problems)
        return proc.returncode == 0


def tracebacks(stderr: str, returncode: int) -> str:
    """What the tracebacks in a driver's stderr are: logged by Ray/MLflow on the way, or one the driver died of."""
    n = stderr.count("Traceback (most recent call last)")
    lines = [x for x in stderr.splitlines() if x.strip()]
    last = lines[-1] if lines else ""
    uncaught = (
        returncode != 0
        and not last.startswith("tsweep run: error:")
        and not last.startswith((" ", "\t"))
        and ": " in last
    )
    died = f"; the driver died of {last[:160]!r}" if uncaught else ""
    return f"{n} traceback{'s' * (n != 1)}{died}"


def parse_faults(text: str) -> list[str]:
    kinds = []
    for name in (x.strip() for x in text.split(",") if x.strip()):
        if name not in ("kill", "disk", *KILLS):
            raise ValueError(f"unknown fault {name!r}; allowed kill (= driver,worker), driver, worker, disk")
        kinds += [k for k in (KILLS if name == "kill" else (name,)) if k not in kinds]
    return kinds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--faults", default="kill,disk", help="kill (= driver,worker), driver, worker, disk")
    args = p.parse_args()
    try:
        kinds = parse_faults(args.faults)
    except ValueError as exc:
        p.error(f"--faults: {exc}")
    random.seed(args.seed)
    work = Path(tempfile.mkdtemp(prefix="tsweep-chaos-"))
    logs = work / "logs"
    logs.mkdir()
    if "disk" in kinds:
        why = can_mount(work)
        if why:
            print(f"disk faults skipped: {why}; a disk fault needs a tmpfs mounted for the sweep (kills still run)")
            kinds.remove("disk")
    if not kinds:
        print("no fault left to inject")
        return 2
    fixture = ROOT / "tests" / "fixtures" / "bible-mini.db"  # the tests' verses: seconds per trial
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               TSWEEP_DATA_DIR=str(work / "data"), TSWEEP_BIBLE_DB=str(fixture))  # fmt: skip
    print(f"faults: {', '.join(kinds)}; work and driver logs in {work}")
    start = time.time()
    subprocess.run(_cmd(work / "reference", False), env=env, cwd=ROOT, check=True, capture_output=True)
    reference = table(work / "reference")
    took = time.time() - start
    window = max(40.0, 0.85 * took)  # 8-40 s on an idle machine; a loaded one's sweep takes longer
    print(f"reference run: {len(reference)} trials in {took:.0f}s; faults come 8-{window:.0f}s into an attempt")
    totals, equal, problems, disk_problems = Counter(), 0, [], 0
    for k in range(args.rounds):
        here = work / f"round-{k}"
        with tiny_disk(here, DISK_SIZE) if "disk" in kinds else _no_disk(here) as disk:
            r = Round(disk / "sweep", disk if "disk" in kinds else None, kinds, env, logs, print, window)
            r.run()
            same = table(r.out) == reference
        totals.update(r.injected)
        equal += same
        problems += [f"round {k + 1}: {x}" for x in r.problems]
        disk_problems += r.disk_problems
        faults = ", ".join(r.injected) or "none"
        print(f"round {k + 1}: {len(r.injected)} faults injected ({faults}); "
              f"table {'equal to' if same else 'DIFFERENT from'} the reference")  # fmt: skip
    by_kind = ", ".join(f"{kind} {totals[kind]}" for kind in kinds)
    print(f"{args.rounds} rounds, {sum(totals.values())} faults injected ({by_kind}), "
          f"{equal}/{args.rounds} tables equal ({time.time() - start:.0f}s)")  # fmt: skip
    if "disk" in kinds:
        ok = totals["disk"] - disk_problems
        print(f"disk faults: {ok}/{totals['disk']} ended in one line naming the directory, no traceback, "
              "nothing finished lost, state files whole")  # fmt: skip
    for x in problems:
        print(f"PROBLEM {x}")
    return 0 if equal == args.rounds and not problems else 1


@contextmanager
def _no_disk(path: Path):
    path.mkdir(parents=True)
    yield path


if __name__ == "__main__":
    sys.exit(main())

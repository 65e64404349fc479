"""Chaos rounds on a smoke sweep: kill the driver or a trial worker, or fill the sweep's disk, at random points;
resume, and check that the final table equals an uninterrupted run's.  Not in the default suite (minutes per round).

    python benchmarks/chaos.py --rounds 3 [--seed 0] [--faults kill,disk]

--faults takes kill (= driver,worker), driver, worker and disk.  Every round injects one fault of each kind
asked for (a driver kill, a trial worker kill, a full disk), in a random order, each at a random point of its
share of the work left (counted in the trials' metrics records, so it comes before the sweep ends on a fast or a
slow machine); a driver kill or a full disk ends its attempt (the next one resumes), a worker kill does not.
A fault counts as injected only when it fired: a worker kill needs a trial worker to be running, and waits for
one until the driver ends; a fault that did not fire is tried again in the next attempt, and a round whose sweep
finished before all its faults fired does not count: it is drawn again (at most --rounds times).  The summary
gives per kind the faults planned, injected and survived.

A disk fault needs root: each round's --out lies on a real tmpfs of its own (as tests/e2e/test_faults_e2e.py does), and
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
sys.path.insert(0, str(ROOT))

from analysis.data.metrics import DEFAULT_TASK, for_task  # noqa: E402

SPEC = ROOT / "tests" / "specs" / "smoke.yaml"
KEYS = for_task(DEFAULT_TASK).final  # every key a finished trial reports (analysis.data.metrics)
KILLS = ("driver", "worker")
DISK_SIZE = "64m"  # a smoke sweep needs a few MiB; the ballast takes whatever is free at the fault
REFERENCE: dict = {}  # the uninterrupted run's table
STATE_FILES = ("sweep.json", "tune_summary.json", "trials/*/trial.json", "trials/*/config.json", "trials/*/result.json")
ATTEMPTS = 8


def _cmd(out: Path, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(SPEC), "--profile", "smoke", "--out", str(out)]
    return cmd + (["--resume"] if resume else []) + ["--num-cpus", "2"]


def finished(out: Path) -> dict:
    """The table: a row per result.json (a half-written one would be a bug: it shows as unreadable)."""
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


def progress(out: Path) -> int:
    """How far the sweep is: training and evaluation records of every trial, and results (only grows)."""
    n = len(list(out.glob("trials/*/result.json")))
    for metrics in out.glob("trials/*/metrics.jsonl"):
        try:
            n += sum(1 for line in metrics.read_text(errors="replace").splitlines() if line.startswith('{"kind"'))
        except OSError:
            continue
    return n


class Round:
    """One sweep from scratch to a full table, with one fault of each kind injected on its way.

    A fault comes at a random point of the work left when its attempt starts (``progress`` records, so that
    it comes before the sweep ends, however fast or slow the machine): a fault counts as injected only when it
    fired (a worker was there to kill, the driver was still running); one that did not fire is tried again in
    the next attempt, and a round that finishes before all of its faults fired is reported as such."""

    def __init__(self, out: Path, disk: Path | None, kinds: list[str], env: dict, logs: Path, log, total: int):
        self.out, self.disk, self.kinds, self.env, self.logs, self.log = out, disk, kinds, env, logs, log
        self.total = total  # progress records of a whole sweep (from the reference run)
        self.planned: list[str] = []
        self.fired: list[list] = []  # [kind, whether its own checks passed], in order
        self.unfired: list[str] = []  # planned, never fired (the sweep ended first)
        self.problems: list[str] = []  # checks that failed (a product bug to report)
        self.same = False  # the final table equal to the reference

    def queue(self) -> list[str]:
        """One fault of each asked-for kind (driver kill, worker kill, full disk), in a random order."""
        todo = list(self.kinds)
        random.shuffle(todo)
        return todo

    def run(self) -> None:
        todo = self.queue()
        self.planned = list(todo)
        for attempt in range(ATTEMPTS):
            # as the driver's message says: --resume once sweep.json is written, before that run it again
            ok = self.attempt(attempt, todo, (self.out / "sweep.json").exists())
            if ok and len(finished(self.out)) == 4:
                self.unfired = todo
                return
        raise RuntimeError(f"sweep in {self.out} did not finish after {ATTEMPTS} attempts")

    def attempt(self, attempt: int, todo: list[str], resume: bool) -> bool:
        """One driver run; the faults of ``todo`` that fire are taken from it (a worker kill lets the attempt go
        on to the next fault, a driver kill or a full disk ends it).  Each comes at a random point of its share of
        the work left, so that the later ones have work left to come in.  Whether the driver ended with 0."""
        err = self.logs / f"{self.out.parent.name}-attempt-{attempt}.err"
        with open(err, "w") as stderr, open(err.with_suffix(".out"), "w") as stdout:
            proc = subprocess.Popen(_cmd(self.out, resume), env=self.env, cwd=ROOT, stdout=stdout, stderr=stderr,
                                    start_new_session=True)  # fmt: skip
            try:
                while todo and proc.poll() is None:
                    now = progress(self.out)
                    share = (self.total - now - 1) // len(todo)
                    if share < 1:
                        self.log(f"  no work left for a {todo[0]} fault ({self.total - now} records)")
                        break
                    if not self.inject(proc, todo[0], now + random.randint(1, share), err):
                        break
                    if todo.pop(0) != "worker":
                        break
                self.wait_or_kill(proc, f"attempt {attempt}: the driver was still running 900 s after its faults")
            finally:
                _reap(proc.pid)
        return proc.returncode == 0

    def inject(self, proc: subprocess.Popen, fault: str, at: int, err: Path) -> bool:
        """Wait until the sweep's progress reaches ``at``, then inject ``fault``; whether it fired (a worker
        kill waits for a trial worker to be there, until the driver ends)."""
        while proc.poll() is None and progress(self.out) < at:
            time.sleep(0.1)
        while proc.poll() is None:
            where = f"at {progress(self.out)}/{self.total} records"
            if fault == "driver":
                os.killpg(proc.pid, signal.SIGKILL)
                return self.note("driver", f"killed the driver {where}")
            if fault == "worker" and _kill_worker(proc.pid):
                return self.note("worker", f"killed a trial worker {where}")
            if fault == "disk":
                return self.disk_fault(proc, where, err)
            time.sleep(0.1)
        self.log(f"  the {fault} fault did not fire: the driver ended first")
        return False

    def wait_or_kill(self, proc: subprocess.Popen, problem: str) -> None:
        """Wait for the driver; one still running after 900 s is killed and ``problem`` recorded."""
        try:
            proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.problems.append(problem)

    def note(self, kind: str, event: str, ok: bool = True) -> bool:
        self.fired.append([kind, ok])
        self.log(f"  {event}")
        return True

    def disk_fault(self, proc: subprocess.Popen, where: str, err: Path) -> bool:
        """Fill the disk under the running sweep, wait for its driver, check how it ended; delete the ballast."""
        filled = time.time()
        ballast = fill(self.disk)
        kept = {k: v for k, v in finished(self.out).items() if isinstance(v, tuple)}
        self.note("disk", f"filled the disk {where} ({ballast / 2**20:.1f} MiB of ballast, {len(kept)} trials "
                          "finished then)")  # fmt: skip
        self.wait_or_kill(proc, f"disk full {where}: the driver was still running 900 s later (killed)")
        took = time.time() - filled
        text = err.read_text(errors="replace")
        errors = [x for x in text.splitlines() if x.startswith("tsweep run: error:")]
        lines = [x for x in text.splitlines() if x.strip() and "taking over the stale lock" not in x]  # a kill before
        problems = []
        if "Traceback" in text:
            problems.append(f"{tracebacks(text, proc.returncode)} in the driver's stderr ({err})")
        if proc.returncode == 0:
            outcome = "the sweep still finished"
        else:
            outcome = f"the driver ended with {proc.returncode} after {took:.0f}s"
            if len(errors) != 1 or len(lines) != 1:
                problems.append(f"{len(lines)} lines on stderr, {len(errors)} of them 'tsweep run: error:' ({err})")
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
        self.problems += [f"disk full {where}: {p}" for p in problems]
        self.fired[-1][1] = not problems
        return True


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


def setup(args) -> tuple[list[str], Path, dict] | None:
    """(fault kinds, work directory, driver environment); None when no fault can be injected here."""
    kinds = parse_faults(args.faults)
    random.seed(args.seed)
    work = Path(tempfile.mkdtemp(prefix="tsweep-chaos-"))
    (work / "logs").mkdir()
    if "disk" in kinds:
        why = can_mount(work)
        if why:
            print(f"disk faults skipped: {why}; a disk fault needs a tmpfs mounted for the sweep (kills still run)")
            kinds.remove("disk")
    fixture = ROOT / "tests" / "fixtures" / "bible-mini.db"  # the tests' verses: seconds per trial
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               TSWEEP_DATA_DIR=str(work / "data"), TSWEEP_BIBLE_DB=str(fixture))  # fmt: skip
    return (kinds, work, env) if kinds else None


def one_round(k: int, tried: int, kinds: list[str], work: Path, env: dict, total: int) -> Round:
    here = work / f"round-{k}-{tried}"
    with tiny_disk(here, DISK_SIZE) if "disk" in kinds else _no_disk(here) as disk:
        r = Round(disk / "sweep", disk if "disk" in kinds else None, kinds, env, work / "logs", print, total)
        r.run()
        r.same = finished(r.out) == REFERENCE
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--faults", default="kill,disk", help="kill (= driver,worker), driver, worker, disk")
    args = p.parse_args()
    try:
        ready = setup(args)
    except ValueError as exc:
        p.error(f"--faults: {exc}")
    if ready is None:
        print("no fault left to inject")
        return 2
    kinds, work, env = ready
    print(f"faults: {', '.join(kinds)}; work and driver logs in {work}")
    start = time.time()
    subprocess.run(_cmd(work / "reference", False), env=env, cwd=ROOT, check=True, capture_output=True)
    REFERENCE.update(finished(work / "reference"))
    total = progress(work / "reference")
    print(f"reference run: {len(REFERENCE)} trials, {total} progress records, in {time.time() - start:.0f}s")
    planned, injected, survived, problems, rounds, redrawn = Counter(), Counter(), Counter(), [], [], 0
    while len(rounds) < args.rounds and redrawn <= args.rounds:
        k = len(rounds) + 1
        r = one_round(k, redrawn, kinds, work, env, total)
        planned.update(r.planned)
        injected.update(kind for kind, _ in r.fired)
        survived.update(kind for kind, ok in r.fired if ok and r.same)
        problems += [f"round {k}: {x}" for x in r.problems]
        fired = ", ".join(kind for kind, _ in r.fired) or "none"
        print(f"round {k}: {len(r.fired)} of {len(r.planned)} planned faults injected ({fired}); "
              f"table {'equal to' if r.same else 'DIFFERENT from'} the reference")  # fmt: skip
        if r.unfired:  # its sweep finished before these faults could fire: the round does not count, draw again
            redrawn += 1
            print(f"round {k}: {', '.join(r.unfired)} did not fire before the sweep finished: drawn again")
            continue
        rounds.append(r)
    equal = sum(r.same for r in rounds)
    print(f"{len(rounds)} rounds with every planned fault injected ({redrawn} drawn again), {equal}/{len(rounds)} "
          f"tables equal to the reference ({time.time() - start:.0f}s)")  # fmt: skip
    print(f"{'fault':<8}{'planned':>9}{'injected':>10}{'survived':>10}")
    for kind in kinds:
        print(f"{kind:<8}{planned[kind]:>9}{injected[kind]:>10}{survived[kind]:>10}")
    if "disk" in kinds:
        print("survived: the table equal to the reference at the end of its round; for a full disk also one line "
              "naming the directory, no traceback, nothing finished lost, state files whole")  # fmt: skip
    for x in problems:
        print(f"PROBLEM {x}")
    ok = len(rounds) == args.rounds and equal == len(rounds) and all(survived[k] == injected[k] for k in kinds)
    return 0 if ok and not problems else 1


@contextmanager
def _no_disk(path: Path):
    path.mkdir(parents=True)
    yield path


if __name__ == "__main__":
    sys.exit(main())

"""The run-directory contract: what a run's workdir holds, its status values, and how files get there.

One home for the names that the trainer writes and that sweeps and analysis read:

    config.json          CONFIG: the RunConfig and its content hash
    metrics.jsonl        METRICS: one line per training log interval ("train") and per evaluation ("eval")
    attempts.jsonl       ATTEMPTS: one line per start or resumption
    checkpoints/         CHECKPOINTS: step-<n>.pt, the newest few
    dev.hyp, test.hyp    DEV_HYP, TEST_HYP: detokenised beam-search output
    dev.ref, test.ref    DEV_REF, TEST_REF: the references, one line each
    result.json          RESULT: the summary; its "status" is a Status value
    tracking.jsonl       TRACKING: the JSON tracker's log when no other tracker is given

Files are written atomically (a temporary file, flushed and fsynced, then renamed over the
target), so a reader or a resumed run sees either the old file or the new one, never half of
one.  A full disk is a UserError naming the directory and the space needed, not a traceback.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import IO, Any, Callable, Optional, TypeVar

from .errors import UserError
from .knobs import KnobValue, RunValues

log = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG = "config.json"
METRICS = "metrics.jsonl"
ATTEMPTS = "attempts.jsonl"
FAULTS = "faults.jsonl"  # a sweep's driver: each failure of the trial's worker (killed, errored) and its retry
CHECKPOINTS = "checkpoints"
DEV_HYP, TEST_HYP = "dev.hyp", "test.hyp"
DEV_REF, TEST_REF = "dev.ref", "test.ref"
RESULT = "result.json"
TRACKING = "tracking.jsonl"
EVALS = "evals"  # NAME.json and NAME.hyp per evaluation set (tsweep evaluate)


class Status(str, Enum):
    """A run's (or trial's) state.  The trainer writes FINISHED or DIVERGED into result.json."""

    FINISHED = "finished"  # trained and evaluated; result.json holds the metrics
    DIVERGED = "diverged"  # a result, not an error: the loss went non-finite or stayed far too high
    RUNNING = "running"  # started (attempts.jsonl has a line), no result yet
    PENDING = "pending"  # planned, never started
    FAILED = "failed"  # ended with an error
    STOPPED = "stopped early"  # ended by a scheduler (ASHA) before its last step, as the scheduler recorded
    INTERRUPTED = "interrupted"  # started, no result, and its sweep's driver has ended: --resume trains it
    CORRUPT = "corrupt"  # result.json exists but cannot be read
    WORKER = "worker"  # what a data-parallel worker of rank > 0 returns (rank 0 writes the result)

    def __str__(self) -> str:
        return self.value


DONE = frozenset({Status.FINISHED, Status.DIVERGED})  # a result.json with these is never trained again

# A name that becomes a path under a run's or a sweep's directory (a trial id, a row label, a set's name); \Z, not
# $, so that a name ending in a newline is refused
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\Z")
SAFE_ALLOWED = "letters, digits, '_', '.', '-' (not starting with '.')"
# A name that also becomes a key in MLflow (a claim id in verdict tags, an evaluation set's name in metric names):
# what MLflow's keys and file names both accept, starting with a letter or digit, up to 64 characters
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
KEY_ALLOWED = "up to 64 letters, digits, '_', '.', '-' (starting with a letter or digit)"


def check_name(value: str, what: str) -> str:
    """``value`` if it is a safe name, else a UserError: "WHAT 'VALUE' is invalid; allowed ..."."""
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise UserError(f"{what} {value!r} is invalid; allowed {SAFE_ALLOWED}")
    return value


def loads(text: str | bytes) -> Any:
    """``json.loads`` of a file's text, where a document nested too deeply is unreadable JSON like any other.

    Python's decoder recurses once per level, so ``"[" * 100000`` raises RecursionError, not the JSONDecodeError
    (a ValueError) of a truncated file; here it is a JSONDecodeError too.  A reader of the project's JSON files
    (sweep.json, a trial's or a run's result.json, config.json, trial.json, JSON lines) reads through this
    (analysis.data.files.read_json for a sweep's), so that such a file is a damaged file (one line, a corrupt
    trial) like a truncated one, never a traceback."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep("arrays or objects nested too deeply to read", text if isinstance(text, str) else "", 0) from None


class TooDeep(json.JSONDecodeError):
    """JSON nested deeper than Python's decoder follows (``loads``); said without a position, which is not where
    anything went wrong."""

    def __str__(self) -> str:
        return self.msg


def done_result(done, config_hash: str) -> Optional[dict]:
    """``done`` (a parsed result.json) if it is a finished or diverged run of this config, else None."""
    ok = isinstance(done, dict) and done.get("status") in DONE and done.get("config_hash") == config_hash
    return done if ok else None


def finished_result(workdir: Path, config_hash: str, warn: bool = False) -> Optional[dict]:
    """The result.json in ``workdir`` if it is a finished or diverged run of this config (a result that exists but
    cannot be read counts as none: with ``warn``, a warning says the run starts again)."""
    path = Path(workdir) / RESULT
    if not path.exists():
        return None
    try:
        done = loads(path.read_text())
    except (OSError, ValueError) as exc:
        if warn:
            log.warning("%s unreadable (%s): running again", path, exc)
        return None
    return done_result(done, config_hash)


def checkpoint_name(step: int) -> str:
    return f"step-{step}.pt"


def checkpoint_step(path: Path) -> int:
    return int(path.stem.split("-")[1])


def checkpoints(workdir: Path) -> list[Path]:
    """The checkpoints under ``workdir``, oldest first."""
    return sorted((Path(workdir) / CHECKPOINTS).glob("step-*.pt"), key=checkpoint_step)


def newest_checkpoint(workdir: Path, load: Callable[[Path], T]) -> Optional[T]:
    """``load`` of the newest checkpoint it can read, or None.

    Each unreadable one (a truncated file, say) is renamed to <name>.unreadable, so that it is
    neither averaged nor tried again, with a warning that names it and what is used instead."""
    bad = []
    for path in reversed(checkpoints(workdir)):
        try:
            state = load(path)
        except Exception as exc:  # truncated zip, foreign pickle, missing keys: whatever it is, not a checkpoint
            first = str(exc).splitlines()[0] if str(exc) else ""
            bad.append((path, f"{type(exc).__name__}: {first}" if first else type(exc).__name__))
            continue
        _set_aside(bad, f"resuming from {path.name}")
        return state
    _set_aside(bad, "no readable checkpoint left: starting from scratch")
    return None


def _set_aside(bad: list[tuple[Path, str]], then: str) -> None:
    for path, why in bad:
        log.warning("checkpoint %s unreadable (%s); %s", path.name, why, then)
        try:
            path.replace(path.with_name(path.name + ".unreadable"))
        except OSError:
            pass


class DiskFullError(UserError):
    """No space left on the device that holds a run directory."""

    exit_code = 1


def _human(n: int) -> str:
    size, units = float(n), ("B", "KB", "MB", "GB", "TB")
    i = 0
    while size >= 1024 and i < len(units) - 1:
        size, i = size / 1024, i + 1
    return f"{size:.0f} {units[i]}" if i == 0 else f"{size:.1f} {units[i]}"


@contextmanager
def disk_full_is_user_error(path: Path, needed: int):
    """Turn ENOSPC while writing ``path`` into a one-line DiskFullError."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise DiskFullError(
            f"no space left on the device of {str(Path(path).parent)!r} while writing {Path(path).name} "
            f"(about {_human(needed)} needed): free some space there and run again to resume"
        ) from None


def write_atomic(path: Path, write: Callable[[IO[bytes]], None], size_hint: int) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file, fsync it, then rename it over ``path``.

    ``size_hint`` (bytes) is what a full disk's message says is needed."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with disk_full_is_user_error(path, size_hint):
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    write_atomic(path, lambda f: f.write(data), len(data))


def write_json(path: Path, obj) -> None:
    write_bytes(path, json.dumps(obj, indent=2, default=str).encode("utf-8"))


def write_lines(path: Path, lines: list[str]) -> None:
    write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))


def append_json(path: Path, record: dict) -> None:
    """One JSON line appended (and flushed) to ``path``."""
    line = json.dumps(record) + "\n"
    with disk_full_is_user_error(path, len(line)):
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)


TRIAL = "trial.json"


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a sweep: what the sweep hands a worker, and what the worker keeps as trial.json.

    The single definition of that payload: the sweep builds it (``sweeps.spec.sweep_spec.Trial.record``), the
    worker runs it (``sweeps.run.trial.run_trial``), and analysis reads it back (``from_json``) without parsing
    the trial id.  It lives in the run-directory contract because analysis reads it and must not import
    sweeps.  ``tracking`` ({uri, experiment_id, parent_run_id}) travels to the worker but is never written.
    """

    id: str
    group: Optional[str]
    row: str
    seed: int
    values: RunValues  # flat run keys at the profile's scale
    config_hash: str
    paper: dict[str, KnobValue] = field(default_factory=dict)  # the row's knobs in the paper's units
    profile: dict = field(default_factory=dict)  # the profile's rules (name, scaling, train, data, exclude)
    preset: str = "base"
    sweep_dir: str = ""
    tracking: Optional[dict] = None
    search: Optional[dict[str, KnobValue]] = None  # the sampled knobs, for a trial suggested by a search

    def to_json(self) -> dict:
        """trial.json's content (no tracking: where the sweep's database is is not the trial's business)."""
        d = asdict(self)
        d.pop("tracking")
        if d["search"] is None:
            d.pop("search")
        return d

    def plan_entry(self) -> dict:
        """What sweep.json's ``plan`` keeps of it (its identity; the profile is sweep.json's own)."""
        return {k: getattr(self, k) for k in ("group", "row", "seed", "paper", "values", "config_hash")}

    @classmethod
    def from_json(cls, d, trial_id: Optional[str] = None) -> "TrialRecord":
        """A trial.json (or a plan entry with ``trial_id``); ValueError naming what is missing or wrong."""
        if not isinstance(d, dict):
            raise ValueError(f"a trial record is a JSON object, not {type(d).__name__}")
        d = {**d, "id": d.get("id", trial_id)}
        missing = [k for k in ("id", "row", "seed", "values", "config_hash") if d.get(k) is None]
        if missing:
            raise ValueError(f"trial record without {', '.join(missing)}")
        if not isinstance(d["seed"], int) or not isinstance(d["values"], dict):
            raise ValueError("trial record: seed must be an integer and values an object")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known and (v is not None or k == "group")})

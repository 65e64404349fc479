"""sweep.json's adaptive record: what an adaptive sweep's loop planned, what it did, and why its last session stopped.

The one module that writes, reads and migrates it.  ``sweeps.run.adaptive`` writes the record as the dict sweep.json
holds (``new_record``, ``record_stop``); verdicts and reports read it typed (``read_adaptive`` -> ``AdaptiveRecord``)
and decide on its ``StopReason``, never on ``stopped``, the sentence written for people (the report shows it as
written).  A record without a ``version`` (written before the stop was typed) goes through ``migrate_stop``, the
one place that reads that sentence; where it cannot say why the session stopped it says so in one line.

On disk (version 2)::

    {"version": 2, "min": 2, "max": 5, "evidence": "p", "looks": 4, "rounds": [{"round": 1, "added": {...}, ...}],
     "spent_seconds": 123.4, "stop": "budget_spent", "stopped": "wall-clock budget (60 min) spent during ...",
     "unreached": {"CLAIM": "1h35m"}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Optional

from transformer_core.errors import UserError

VERSION = 2  # 2: every session records a StopReason in "stop"; 1 (no "version"): "stop" only for some stops


class StopReason(str, Enum):
    """Why a session of the adaptive loop stopped (sweep.json's adaptive ``stop``)."""

    DATA = "data"  # every claim decided, or no undecided comparison that one more seed could decide
    MAX = "max"  # max seeds reached
    BUDGET = "budget"  # the loop looked, and the next round would exceed the wall-clock budget
    BUDGET_SPENT = "budget_spent"  # the budget ran out before or during the minimum seeds, before the loop's first look
    INTERRUPTED = "interrupted"  # a signal, or trials that ended without a result
    FAILED = "failed"  # an error ended the session
    NOT_RECORDED = "not_recorded"  # the session is running, or was killed before it could record its stop


@dataclass(frozen=True)
class AdaptiveRecord:
    """The adaptive record, typed (``read_adaptive``).  ``stop`` is None where no session has recorded one."""

    min: Optional[int] = None
    max: Optional[int] = None
    looks: int = 1  # planned looks: max - min + 1
    evidence: str = "p"  # what the loop and the report decide on (p: every planned look charged; e: none)
    rounds: tuple[dict, ...] = ()  # the rounds that added seeds: {"round": k, "added": {row: why}, "started": t}
    spent_seconds: float = 0.0  # wall-clock time of every session so far
    stop: Optional[StopReason] = None
    stopped: Optional[str] = None  # the stop in words, for people: shown, never decided on
    unreached: dict[str, str] = field(default_factory=dict)  # {claim: the budget that would finish it}


def new_record(seeds: Mapping[str, Any], looks: int) -> dict:
    """The record a sweep's first session starts from: the spec's seeds {min, max, evidence}, its planned looks."""
    return {**seeds, "looks": looks, "rounds": [], "version": VERSION}


def record_stop(ad: dict, stop: StopReason, stopped: Optional[str] = None) -> None:
    """Record in ``ad`` (the record as sweep.json holds it) why this run of the sweep stopped, and in words where
    given; the record is this version's from then on (each run, a --resume included, replaces the stop record of
    the run before it)."""
    ad["version"] = VERSION
    ad["stop"] = stop.value
    if stopped is not None:
        ad["stopped"] = stopped


def read_adaptive(raw: AdaptiveRecord | Mapping | None, where: str = "sweep.json") -> Optional[AdaptiveRecord]:
    """The adaptive record typed, from sweep.json's dict (an older one migrated: ``migrate_stop``); None for a sweep
    without adaptive seeds.  ``where`` names the sweep in the one-line error of a record it cannot read."""
    if isinstance(raw, AdaptiveRecord):
        return raw
    if not raw:  # none, or an empty record (written by hand): no adaptive seeds
        return None
    version = raw.get("version", 1)
    if _integer(version) and version > VERSION:
        raise UserError(f"sweep.json in {where}: its adaptive record is of version {version!r}, written by a newer "
                        f"tsweep (this one reads 1 and {VERSION}): report it with that version")  # fmt: skip
    bad = [f"{key} {_shown(raw[key])} (allowed {allowed})" for key, (ok, allowed) in _FIELDS.items()
           if key in raw and not ok(raw[key])]  # fmt: skip
    if bad:
        raise UserError(f"sweep.json in {where}: its adaptive record is damaged (edited by hand?): {'; '.join(bad)}: "
                        "restore it from a copy")  # fmt: skip
    stop = migrate_stop(raw, where) if version == 1 else _stop(raw.get("stop"), where)
    return AdaptiveRecord(
        min=raw.get("min"),
        max=raw.get("max"),
        looks=int(raw.get("looks", 1)),
        evidence=raw.get("evidence", "p"),
        rounds=tuple(raw.get("rounds", [])),
        spent_seconds=float(raw.get("spent_seconds") or 0.0),
        stop=stop,
        stopped=raw.get("stopped"),
        unreached=dict(raw.get("unreached") or {}),
    )


def _integer(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _seconds(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1e30)  # NaN fails


def _round(x: Any) -> bool:
    """A round of the loop as sweeps.run.adaptive writes it ({"round": k, "added": {row: why}, "started": t}); the
    keys the report reads typed where given."""
    if not isinstance(x, dict):
        return False
    added = x.get("added", {})
    return ("round" not in x or _integer(x["round"])) and isinstance(added, dict) and all(map(_is_str, added))


def _is_str(x: Any) -> bool:
    return isinstance(x, str)


# each key of the record that a reader decides on or shows, its shape, and the shape in words (a key left out is
# read at its default); a record that fails one is damaged, said in one line
_FIELDS: dict[str, tuple[Any, str]] = {
    "version": (lambda x: x in (1, VERSION) and _integer(x), f"1 or {VERSION}"),
    "min": (lambda x: x is None or _integer(x), "an integer"),
    "max": (lambda x: x is None or _integer(x), "an integer"),
    "looks": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "evidence": (lambda x: x in ("p", "e") and isinstance(x, str), "'p' or 'e'"),
    "rounds": (lambda x: isinstance(x, list) and all(map(_round, x)), "a list of {round, added} objects"),
    "spent_seconds": (_seconds, "a number of seconds >= 0"),
    "stopped": (lambda x: x is None or isinstance(x, str), "a string"),
    "unreached": (
        lambda x: x is None or (isinstance(x, dict) and all(map(_is_str, x.values()))),
        "an object of claim: budget strings",
    ),
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _stop(value: Any, where: str) -> Optional[StopReason]:
    if value is None:
        return None
    try:
        return StopReason(value)
    except ValueError:
        raise UserError(f"sweep.json in {where}: its adaptive record's stop {_shown(value)} is none of "
                        f"{', '.join(s.value for s in StopReason)}: restore it from a copy") from None  # fmt: skip


# A version-1 record's sentences (sweeps.run.adaptive before the stop was typed), each with its reason, in the order
# tried: what a sentence starts with, or (the loop's own) what it holds.
_SENTENCES: tuple[tuple[str, StopReason], ...] = (
    ("not recorded:", StopReason.NOT_RECORDED),
    ("failed:", StopReason.FAILED),
    ("interrupted", StopReason.INTERRUPTED),
    ("max seeds (", StopReason.MAX),
    ("every claim decided", StopReason.DATA),
    ("no undecided comparison that one more seed could decide", StopReason.DATA),
)


def migrate_stop(raw: Mapping, where: str = "sweep.json") -> Optional[StopReason]:
    """The stop reason of a version-1 record: its ``stop`` where it has one (``budget`` then covered both budget
    stops, told apart by the sentence: spent during, or before, the minimum seeds, or the next round would exceed
    it), else its ``stopped`` sentence (records from before ``stop``, and sessions that failed or did not close).
    The one place a sentence is read; one line where it says no stop this version knows."""
    stop = raw.get("stop")
    stopped = "" if raw.get("stopped") is None else str(raw["stopped"])
    if stop == "budget":
        return StopReason.BUDGET_SPENT if "minimum seeds" in stopped else StopReason.BUDGET
    if stop is not None:
        return _stop(stop, where)
    if raw.get("stopped") is None:
        return None  # no session recorded a stop
    for start, reason in _SENTENCES:
        if stopped.startswith(start):
            return reason
    if stopped.startswith("wall-clock budget ("):
        if "would be exceeded" in stopped:
            return StopReason.BUDGET
        if " spent " in stopped:
            return StopReason.BUDGET_SPENT
    shown = stopped if len(stopped) <= 80 else stopped[:77] + "..."
    raise UserError(f"sweep.json in {where}: its adaptive record's stop {shown!r} says no stop this version knows "
                    f"(written by hand?): add \"stop\" (one of {', '.join(s.value for s in StopReason)}) and "
                    f"\"version\": {VERSION} to it, or restore it from a copy")  # fmt: skip

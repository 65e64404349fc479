"""sweep.json, typed: the one module that writes, reads, checks and migrates a sweep's record.

The driver (sweeps.run.runner) builds the record as the dict sweep.json holds and writes it with ``write_record``
(which stamps its ``version``); every reader, in sweeps/ and in analysis/, goes through ``parse_record`` (text or
an already-decoded object) or ``read_record`` (a sweep directory), which refuse a record of the wrong shape in one
line and give a ``SweepState``.  Its parts are typed where a decision reads them: the tracking ids
(``Tracking``), the adaptive record (``adaptive``: analysis.data.adaptive_record, whose stop reason is an enum)
and the report's shape (``shape()``: title, description, claims, paper rows, amendments).  A record's damaged
report or adaptive part is said when that part is read (a report), not when the sweep is resumed or listed.

On disk (version 1)::

    {"version": 1, "name": "table3", "spec": "sweeps/specs/table3.yaml", "profile": "cpu", "profile_rules": {...},
     "uri": "sqlite:///mlflow.db", "experiment_id": "1", "parent_run_id": "...", "created": 1.7e9,
     "updated": 1.7e9, "status": "running", "metric": "dev_bleu", "mode": "max", "seed_plan": {"seeds": [1, 2]},
     "objectives": null, "report": {"title": ..., "claims": [...], "paper": {...}}, "rounds": [{...}],
     "trials": ["base-s1", ...], "plan": {"base-s1": {"row": "base", "seed": 1, "config_hash": ...}},
     "adaptive": {...}, "error": null}

A record without ``version`` was written before the record was versioned; it has the same keys and is read as
version 1.  A record of a newer version is refused in one line (the tsweep that wrote it reads it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Optional

from transformer_core.errors import UserError
from transformer_core.rundir import SAFE_NAME, loads, write_json

from .adaptive_record import AdaptiveRecord, read_adaptive
from .claims import Claim, recorded_claims, table3_claims
from .files import read_text

VERSION = 1
FILE = "sweep.json"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _objective_list(x) -> bool:
    return isinstance(x, list) and all(
        isinstance(o, dict) and isinstance(o.get("metric"), str) and isinstance(o.get("mode"), str) for o in x
    )


# the keys a reader decides on, and the shape each must have (a key left out is None)
SHAPES = {
    "name": lambda x: isinstance(x, str) and bool(SAFE_NAME.match(x)),  # a spec's name is a plain name
    "plan": lambda x: x is None or (isinstance(x, dict) and all(isinstance(p, dict) for p in x.values())),
    "spec": lambda x: x is None or (isinstance(x, str) and not _CONTROL.search(x)),
    "trials": lambda x: x is None or isinstance(x, list),
    "profile": lambda x: x is None or (isinstance(x, str) and bool(SAFE_NAME.match(x))),
    "metric": lambda x: x is None or isinstance(x, str),
    "mode": lambda x: x is None or x in ("max", "min"),
    "objectives": lambda x: x is None or _objective_list(x),
    "adaptive": lambda x: x is None or isinstance(x, dict),
    "rounds": lambda x: x is None or (isinstance(x, list) and all(isinstance(r, dict) for r in x)),
}


@dataclass(frozen=True)
class Tracking:
    """Where the sweep's MLflow runs are: the store's URI as recorded (a SQLite file relative to the sweep), the
    experiment and the sweep's parent run."""

    uri: Optional[str] = None
    experiment_id: Optional[str] = None
    parent_run_id: Optional[str] = None


@dataclass(frozen=True)
class ReportShape:
    """What the spec says the report is (sweep.json "report", recorded when the sweep ran): its title and
    description, the claims it states, the rows that show the paper's numbers.  A sweep recorded before specs
    stated these is Table 3's: the paper's claims, rows matched to the paper's by label (``paper`` None)."""

    title: str = "Table 3 reproduction"
    description: str = ""
    claims: tuple[Claim, ...] = field(default_factory=lambda: tuple(table3_claims()))
    paper: dict | None = None  # our row -> the paper's row; None: every row whose label is the paper's
    amended: tuple = ()  # claims changed after the sweep started: [{at, claims, trials}]

    @property
    def papers(self) -> bool:
        """Whether any row shows the paper's numbers (then the paper's facts and columns are shown)."""
        return self.paper is None or bool(self.paper)

    @property
    def paper_claims(self) -> bool:
        """The claims are the paper's (the headings say so)."""
        return list(self.claims) == list(table3_claims())

    def heading(self, sweep: str) -> str:
        return f"{self.title}: {sweep}" if self.title else str(sweep)

    def claims_heading(self, where: str = "") -> str:
        whose = "The paper's claims" if self.paper_claims else "Claims"
        return f"{whose} on {where}" if where else f"{whose}, judged on these results"

    @property
    def table_heading(self) -> str:
        return "Variations on the Transformer (Table 3 layout)" if self.papers else "Rows and their results"

    def amended_lines(self) -> list[str]:
        return [f"**Claims amended**: {', '.join(a['claims'])} changed after the sweep started, with {a['trials']} "
                "trials finished: stated after results could be seen, so read their verdicts as exploratory."
                for a in self.amended]  # fmt: skip


@dataclass(frozen=True)
class SweepState:
    """A sweep's record as read (``parse_record``), its shape checked.  ``raw`` is the record as sweep.json holds
    it: the driver starts a resumed session from it (keys it does not know kept)."""

    raw: dict[str, Any] = field(repr=False)
    where: str  # the sweep as messages name it

    @property
    def name(self) -> str:
        return self.raw["name"]

    @property
    def plan(self) -> Mapping[str, dict]:
        """Trial id -> its plan entry (row, seed, knobs, config hash); empty where the record has none."""
        return self.raw.get("plan") or {}

    @property
    def trials(self) -> tuple[str, ...]:
        """The plan's trial ids in plan order."""
        return tuple(self.raw.get("trials") or ())

    @property
    def version(self) -> int:
        return self.raw.get("version", 1)

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the record that no reader decides on (times, status, the run values the driver keeps)."""
        return self.raw.get(key, default)

    @property
    def spec(self) -> Optional[str]:
        return self.raw.get("spec")

    @property
    def profile(self) -> Optional[str]:
        return self.raw.get("profile")

    @property
    def status(self) -> Optional[str]:
        return self.raw.get("status")

    @property
    def rounds(self) -> tuple[dict, ...]:
        return tuple(self.raw.get("rounds") or ())

    @property
    def tracking(self) -> Tracking:
        return Tracking(self.raw.get("uri"), self.raw.get("experiment_id"), self.raw.get("parent_run_id"))

    @cached_property
    def adaptive(self) -> Optional[AdaptiveRecord]:
        """The adaptive record typed (an older one migrated), None for a sweep without adaptive seeds; one line
        where it cannot be read."""
        return read_adaptive(self.raw.get("adaptive"), self.where)

    def shape(self) -> ReportShape:
        """The report's shape (``ReportShape``), or one line where its record is damaged."""
        rec = self.raw.get("report")
        if rec is None:
            return ReportShape()
        bad = not isinstance(rec, dict) or not all(isinstance(rec.get(k, ""), str) for k in ("title", "description"))
        paper = rec.get("paper") if isinstance(rec, dict) else None
        bad = bad or not isinstance(paper, dict) or not all(isinstance(x, str) for kv in paper.items() for x in kv)
        amended = rec.get("amended", []) if isinstance(rec, dict) else None
        ok = isinstance(amended, list) and all(isinstance(a, dict) and isinstance(a.get("claims"), list) and
                                                isinstance(a.get("trials"), int) for a in amended)  # fmt: skip
        if bad or not ok or amended is None:  # (ok: a list)
            raise UserError(f"sweep.json in {self.where} records the report's title, description, paper rows or "
                            "amendments in the wrong shape (edited by hand?): restore it from a copy, or resume the "
                            "sweep with its spec to record them again")  # fmt: skip
        amended = tuple({"claims": [str(c) for c in a["claims"]], "trials": a["trials"]} for a in amended)
        return ReportShape(rec.get("title", ""), rec.get("description", ""),
                           tuple(recorded_claims(rec.get("claims", []), self.where)), paper, amended)  # fmt: skip


def parse_record(raw: Any, where: str) -> SweepState:
    """The record typed from sweep.json's text (str) or its decoded JSON; one line naming what is wrong where it
    is not JSON, not a sweep's record, or written by a newer tsweep."""
    if isinstance(raw, str):
        try:
            raw = loads(raw)
        except ValueError as exc:
            raise UserError(
                f"sweep.json in {where} is unreadable: {str(exc).splitlines()[0]} (truncated, or not "
                "JSON): restore it from a copy, or start anew"
            ) from None
    if not isinstance(raw, dict):
        raise UserError(f"sweep.json in {where} is unreadable: it is not a JSON object")
    version = raw.get("version", 1)
    if version != VERSION:
        raise UserError(f"sweep.json in {where} is of version {version!r}, written by another tsweep (this one "
                        f"reads version {VERSION}): read it with the tsweep that wrote it")  # fmt: skip
    bad = [k for k, ok in SHAPES.items() if not ok(raw.get(k))]
    if bad:
        raise UserError(f"sweep.json in {where} is not a sweep's state ({', '.join(bad)} missing or of the wrong "
                        "shape): restore it from a copy, or start anew")  # fmt: skip
    return SweepState(raw, where)


def read_record(sweep_dir: Path | str, where: Optional[str] = None) -> Optional[SweepState]:
    """The record of the sweep directory ``sweep_dir`` (None where it has no sweep.json), read through
    analysis.data.files (a regular file of a bounded size; once per report); one line where it cannot be read.
    ``where``: the sweep as messages name it (default: the directory, quoted)."""
    path = Path(sweep_dir) / FILE
    where = repr(str(sweep_dir)) if where is None else where
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        text = read_text(path)
    except OSError as exc:
        raise unreadable(where, exc) from None
    return parse_record(text, where)


def unreadable(where: str, exc: OSError) -> UserError:
    """The one line for a sweep.json that cannot be read (a FIFO, a file too large, a failed read)."""
    return UserError(f"sweep.json in {where} is unreadable: {str(exc).splitlines()[0]}")


def require_record(sweep_dir: Path | str, where: Optional[str] = None) -> SweepState:
    """``read_record``, and one line where the directory holds no sweep."""
    state = read_record(sweep_dir, where)
    if state is None:
        shown = repr(str(sweep_dir)) if where is None else where
        raise UserError(f"{shown} is not a sweep directory (no sweep.json): give the --out of 'tsweep run'")
    return state


def record_json(state: Mapping[str, Any]) -> dict:
    """The record as sweep.json holds it: ``state`` with this version stamped."""
    return {**state, "version": VERSION}


def write_record(sweep_dir: Path, state: Mapping[str, Any]) -> None:
    """Write the record (``record_json``) atomically: a kill or a full disk leaves the previous one whole."""
    write_json(Path(sweep_dir) / FILE, record_json(state))

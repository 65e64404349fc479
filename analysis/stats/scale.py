"""The scale guard: when a sweep's profile or its results cannot carry conclusions, the report says so.

Two things are checked, each from what the sweep recorded:

* **A test profile**: a profile whose ``purpose`` in sweeps/specs/profiles.yaml is ``test`` (smoke) exists to
  check that the pipeline runs.  Its report opens with a bold line saying so, and every claim-reading carries the
  caveat whatever its kind; the verdict is still computed (it is what the pipeline's tests read), but it is
  marked as meaning nothing about the claim.
* **A reading at its floor**: a BLEU reading whose every finished seed, in every row a claim compares, is below
  ``FLOORS`` (1 BLEU point): nothing was translated, and differences of near-zero scores (often identical across
  seeds) are no evidence.  Such a claim-reading is not judged: its verdict is ``NOT_MEASURABLE``, whatever the
  engine decided, and the header names the readings at their floor.

analysis.report.tables applies it to each claims line (``claim_record``) and to the rows against base; the report's
header prints ``header_lines``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.data.metrics import get_reading, is_reading
from transformer_core.knobs import DEPTH_KNOBS, WIDTH_KNOBS

PROFILES_FILE = Path(__file__).resolve().parents[2] / "sweeps" / "specs" / "profiles.yaml"
TEST_PURPOSE = "test"  # profiles.yaml's ``purpose`` of a profile that exists to test the pipeline
# a reading's floor, by the unit of the column it is read from: every value below it reads "nothing learned"
FLOORS = {"bleu": 1.0}
NOT_MEASURABLE = "not measurable: reading at its floor"


@cache
def _purposes() -> dict[str, str]:
    import yaml

    doc = yaml.safe_load(PROFILES_FILE.read_text(encoding="utf-8"))
    out = {}
    for name, body in doc.items():
        for each in (name, *(body.get("aliases") or ())):
            out[each] = str(body.get("purpose", "results"))
    return out


def profile_purpose(profile: str | None) -> str:
    """The purpose profiles.yaml gives ``profile`` (or the profile it is an alias of): ``test`` or ``results``
    (the default; also for a profile the file does not name)."""
    return _purposes().get(str(profile), "results")


def purpose_line(profile: str) -> str:
    """The line a report, a run's log and its MLflow parent run give a test profile."""
    return (f"**Test profile**: {profile} is a profile for testing the pipeline (tiny model, a few steps): its "
            "verdicts say that the pipeline ran, not whether any claim holds; run a results profile (cpu, gpu, "
            "...) to judge the claims.")  # fmt: skip


def floor_of(reading: str) -> float | None:
    """The floor of a reading (None where it has none): BLEU's, for dev, test and every named set's BLEU."""
    column = get_reading(reading).column if is_reading(reading) else reading
    return next((v for unit, v in FLOORS.items() if column.endswith(unit)), None)


@dataclass
class ScaleGuard:
    """The guard of one collected sweep: its test profile (``""`` where it is a results profile) and, computed on
    demand, which rows are at the floor of a reading."""

    frame: pd.DataFrame
    test_profile: str = ""
    _floored: dict = field(default_factory=dict)

    def floored_rows(self, reading: str) -> set[str]:
        """Rows with finished seeds on ``reading`` whose every value is below the reading's floor."""
        if reading not in self._floored:
            from .comparisons import seed_values

            floor = floor_of(reading)
            values = seed_values(self.frame, reading) if floor is not None and is_reading(reading) else {}
            self._floored[reading] = {r for r, v in values.items() if len(v) and bool(np.all(v < floor))}
        return self._floored[reading]

    def at_floor(self, reading: str, rows: list[str]) -> bool:
        """Whether every row of ``rows`` that has a finished seed is at the reading's floor (and one has)."""
        fin = set(self.frame.loc[self.frame["status"] == "finished", "row"])
        ran = [r for r in rows if r in fin]
        return bool(ran) and all(r in self.floored_rows(reading) for r in ran)

    def caveat(self) -> str:
        """The caveat every claim-reading of a test profile carries ("" at a results profile)."""
        if not self.test_profile:
            return ""
        return f"{self.test_profile} is a test profile: this verdict means nothing about the claim"

    def header_lines(self, readings: list[str]) -> list[str]:
        """The report header's lines: the test profile, each of ``readings`` at its floor in every row, and the rows
        whose parameter count is a confound (``param_confounds``)."""
        lines = [purpose_line(self.test_profile)] if self.test_profile else []
        fin = self.frame[self.frame["status"] == "finished"]
        if "params" in fin and len(fin):
            counts = pd.to_numeric(fin["params"], errors="coerce").groupby(fin["row"], sort=False).mean()
            cols = [c for c in fin if c in SIZE_KNOBS or c.removeprefix("paper_") in SIZE_KNOBS]
            knobs = {row: {c: part[c].iloc[0] for c in cols} for row, part in fin.groupby("row", sort=False)}
            lines += [x for x in [confound_line(param_confounds(counts.to_dict(), sized_rows(knobs)))] if x]
        rows = list(dict.fromkeys(self.frame.loc[self.frame["status"] == "finished", "row"]))
        for reading in readings:
            if rows and floor_of(reading) is not None and self.at_floor(reading, rows):
                lines.append(
                    f"**Reading at its floor**: {get_reading(reading).label} is below {floor_of(reading):g} in every "
                    "finished trial: nothing measurable was translated, so claims on it are not judged "
                    f'("{NOT_MEASURABLE}").'
                )
        return lines


def scale_guard(df: pd.DataFrame) -> ScaleGuard:
    """The guard of a collected sweep (analysis.data.collect): its profile from the trials' records."""
    profiles = [p for p in dict.fromkeys(df["profile"]) if isinstance(p, str)] if "profile" in df else []
    test = next((p for p in profiles if profile_purpose(p) == TEST_PURPOSE), "")
    return ScaleGuard(df, test)


# a row whose parameter count differs from base's by more than this fraction of base's, without varying a size knob
# (SIZE_KNOBS), is a confound: its size changes as a side effect of what it varies (learned positions' table, ...)
CONFOUND_FRACTION = 0.25
SIZE_KNOBS = (*WIDTH_KNOBS, *DEPTH_KNOBS, "h")  # the architecture's dimensions: a row varying them varies the size


def sized_rows(values: dict[str, dict], base: str = "base") -> set[str]:
    """The rows of ``values`` ({row: its knobs}) whose value of some size knob differs from base's."""
    ref = values.get(base, {})
    return {r for r, v in values.items() if any(repr(v.get(k)) != repr(ref.get(k)) for k in SIZE_KNOBS)}


def param_confounds(params: dict[str, float], sized: set[str] | frozenset = frozenset(),
                    base: str = "base") -> dict[str, float]:  # fmt: skip
    """{row: its parameter count's change from base's, as a fraction} of the rows beyond ``CONFOUND_FRACTION``, in
    ``params``' order; rows in ``sized`` (``sized_rows``: they vary the size on purpose) are left out, as is every
    row where base has no count."""
    ref = params.get(base)
    if not ref or not np.isfinite(ref):
        return {}
    out = {}
    for row, n in params.items():
        change = (n - ref) / ref
        if row != base and row not in sized and np.isfinite(change) and abs(change) > CONFOUND_FRACTION:
            out[row] = float(change)
    return out


def confound_line(confounds: dict[str, float]) -> str:
    """The plan's and the report's line naming the rows of ``param_confounds`` ("" where there are none)."""
    if not confounds:
        return ""
    each = ", ".join(f"{row} {100 * f:+.0f}%" for row, f in confounds.items())
    return (f"**Parameter count confound**: {each} parameters against base (more than {100 * CONFOUND_FRACTION:.0f}% "
            "either way) with no size knob changed: a difference in quality may come from the size, not from what "
            "the row changes.")  # fmt: skip

"""The rule a report decides by: the error rate, the looks charged, the family, its procedure, the evidence and the
noise model, with the sentence the report prints for it (``Rule.describe``), and the rule a sweep's record asks for
(``sweep_rule``, ``charged_looks``).  analysis/stats/verdicts.py says how the pieces fit."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.data.adaptive_record import AdaptiveRecord, StopReason, read_adaptive

from .evalues import DESIGN_DELTA
from .guard import Guard
from .seed_noise import MODELS

ALPHA = 0.05


@dataclass(frozen=True)
class Rule:
    """How a report decides: the error rate, the looks charged, the family, its procedure, the noise model."""

    alpha: float = ALPHA
    looks: int = 1  # looks charged (adaptive seeds): each comparison is tested at alpha / looks
    family: str = "report"  # report: every claim-reading and row-vs-base of the report together; claim: each alone
    method: str = "bh"  # over the family: bh (Benjamini-Hochberg, the false discovery rate) or holm (family-wise)
    variance: str = "moderated"  # seed_noise.MODELS
    # the whole printed report's cutoff (family "report"): p at or under it is decided.  Set by
    # analysis.report.evalsets.report_rule from every comparison the report prints (dev, test, each named set, rows
    # against base): the procedure over that union rejects exactly p <= cutoff, so each table decided at it is
    # one family with the others.  None: the procedure runs over what judge() is given.
    cutoff: float | None = None
    size: int = 0  # comparisons with a p in the family the cutoff came from
    # what a comparison is decided on: "p" its p-value (BH / Holm), "e" its e-value (analysis/stats/evalues.py; the
    # procedure runs on 1/e: e-BH, or Holm on 1/e, valid under any dependence); with "e" the cutoff is on 1/e and
    # looks are not charged (the safe t-test's e-values are anytime-valid)
    evidence: str = "p"
    # the e-value's guard on the two rows' own spread (evidence "e"; analysis/stats/guard.py): the report's floors
    # each row's own variance at the noise model's, an e-value whatever the two rows' sds
    guard: Guard = Guard()

    def __post_init__(self):
        if (self.family not in FAMILIES or self.method not in METHODS or self.variance not in MODELS
                or self.evidence not in EVIDENCE):  # fmt: skip
            raise ValueError(f"rule: family {self.family!r} / method {self.method!r} / variance {self.variance!r} / "
                             f"evidence {self.evidence!r}; allowed {sorted(FAMILIES)} / {sorted(METHODS)} / "
                             f"{list(MODELS)} / {sorted(EVIDENCE)}")  # fmt: skip

    def describe(self) -> str:
        if self.evidence == "e":
            return self._describe_e()
        looks = f", each comparison at α/{self.looks} for {self.looks} looks" if self.looks > 1 else ""
        if self.family == "claim":
            return (f"per claim: Holm over each claim-reading's comparisons at α = {self.alpha}{looks}; the report as "
                    "a whole has no error control (more claims, more false verdicts)")  # fmt: skip
        if self.cutoff is not None:
            return (f"{METHODS[self.method]} over the report's family, the whole printed report ({self.size} "
                    f"comparisons: every claim-reading on dev, test and each named evaluation set, and every row "
                    f"judged against base) at α = {self.alpha}{looks}: a comparison is decided where its p <= "
                    f"{self.cutoff:.2g}")  # fmt: skip
        return (f"{METHODS[self.method]} over the report's family (every claim-reading and every row judged against "
                f"base) at α = {self.alpha}{looks}")  # fmt: skip

    def _describe_e(self) -> str:
        how = (f"e-values (the safe t-test designed for {DESIGN_DELTA:g} seed sd, the smaller of the noise model's and "
               f"the two rows' own spread's; '~' by a calibrator from its p, not anytime-valid), decided by "
               f"{'e-BH' if self.method == 'bh' else 'Holm on 1/e'}")  # fmt: skip
        how += self.guard.describe()  # words only where it is not the report's guard
        if self.family == "claim":
            return f"per claim: {how} over each claim-reading's comparisons at α = {self.alpha}, no looks charged"
        where = f": a comparison is decided where its e >= {1 / self.cutoff:.3g}" if self.cutoff else ""
        size = f" ({self.size} comparisons)" if self.cutoff is not None else ""
        return f"{how} over the report's family{size} at α = {self.alpha}, no looks charged{where}"


FAMILIES = {"report": "the whole report", "claim": "each claim-reading alone"}
EVIDENCE = {"p": "p-values", "e": "e-values (anytime-valid)"}
METHODS = {"bh": "Benjamini-Hochberg (false discovery rate)", "holm": "Holm (family-wise error rate)"}


def sweep_rule(
    adaptive: AdaptiveRecord | dict | None, family: str = "report", method: str = "bh", evidence: str | None = None
) -> Rule:
    """The rule a sweep is judged by, in its adaptive loop and its report: on the evidence its spec chose
    (``seeds: {min, max, evidence: e}``, recorded in sweep.json's adaptive record, typed or as sweep.json holds
    it; p where none) unless ``evidence`` overrides it; on p-values every planned look is charged (charged_looks),
    on e-values none."""
    record = read_adaptive(adaptive)
    evidence = evidence or (record.evidence if record else "p")
    looks = charged_looks(record) if evidence == "p" else 1
    return Rule(looks=looks, family=family, method=method, evidence=evidence)


def charged_looks(adaptive: AdaptiveRecord | dict | None) -> int:
    """The looks a sweep's comparisons are charged for (their p is multiplied by it): every planned look once the
    loop has looked at the data, however it stopped.  A wall-clock budget stop is no exception: the loop stops
    when the next round would overrun, and the next round's cost is the number of rows still undecided, so the
    data choose that stop too (charging only the looks taken would not keep alpha: docs/verdicts.md,
    benchmarks/verdict_calibration.py).  One look where the session stopped before the
    loop's first look (a signal, or the budget spent, during the minimum seeds: no result chose it).  A sweep
    without adaptive seeds looks once.  ``adaptive``: the record typed, or as sweep.json holds it."""
    record = read_adaptive(adaptive)
    if not record:
        return 1
    if record.rounds:
        return record.looks
    if record.stop in (StopReason.INTERRUPTED, StopReason.BUDGET_SPENT):  # by hand, or the budget spent, before
        return 1  # the loop judged anything
    return record.looks

"""The family's procedure: Benjamini-Hochberg or Holm over every comparison with a p (or 1/e), each not rejected
made within noise, each given the threshold it was decided at; and the whole report's cutoff (``family_rule``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import stats

from .comparisons import Comparison, Outcome, strength
from .rule import ALPHA, Rule


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rejections (the same decisions as statsmodels' multipletests(method="holm"), which
    tests/analysis/test_verdicts.py checks; written out because that function runs gc.collect() on every call)."""
    order = np.argsort(pvalues, kind="stable")
    reject = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        reject[i] = True
    return reject


def decide(comps: list[Comparison], rule: Rule) -> None:
    """The family's procedure over the comparisons that have a p: a comparison not rejected becomes WITHIN_NOISE.
    Each gets ``threshold``: the p at or under which it would have been rejected in this family (used for the
    difference the table could detect)."""
    tested = [c for c in comps if c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)]
    if not tested:
        return
    p = [strength(c, rule.evidence) for c in tested]
    if rule.cutoff is not None and rule.family == "report":  # the whole report's family, decided elsewhere
        threshold, reject = rule.cutoff, [x <= rule.cutoff for x in p]
    else:
        threshold, reject = _procedure(p, rule)
    for c, r in zip(tested, reject):
        c.threshold, c.decided_on = threshold, rule.evidence
        if not r:
            c.outcome = Outcome.WITHIN_NOISE


def _procedure(p: list[float], rule: Rule) -> tuple[float, list[bool]]:
    """(threshold, rejections) of the rule's procedure over p: it rejects exactly the p at or under the threshold
    (BH: alpha r / m, Holm: alpha / (m - r), for r rejections of m; alpha / m when none is rejected)."""
    m = len(p)
    if rule.method == "bh":
        reject = list(stats.false_discovery_control(p, method="bh") <= rule.alpha)
        return rule.alpha * max(sum(reject), 1) / m, reject
    reject = holm(p, rule.alpha)
    return rule.alpha / max(m - sum(reject), 1), reject


def family_rule(comps: list[Comparison], rule: Rule) -> Rule:
    """``rule`` with the cutoff of the family ``comps`` (every comparison the report prints, before any is
    decided): deciding each table at it is the procedure over their union."""
    p = [strength(c, rule.evidence) for c in comps if c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)]
    if rule.family != "report":
        return rule
    threshold = _procedure(p, rule)[0] if p else rule.alpha
    return replace(rule, cutoff=threshold, size=len(p))

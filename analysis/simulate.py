"""Simulated tables with a known truth, for calibrating the verdict engine (tests, benchmarks).

A table has the demo's shape by default: Table 3's 19 rows (big excluded), n seeds each, two readings (dev BLEU
and dev cross-entropy) whose seed noise correlates (the demo's: -0.7 between BLEU and ln PPL, i.e. +0.7 in
quality) at the demo's pooled seed sd (0.654 BLEU, 0.034 nats).  Effects are given in units of each reading's sd
on the quality scale (+ better), so one number moves both readings alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .claims import CLAIMS, claim_rows
from .verdicts import READINGS, Outcome, Rule, Verdict, compare, decide, judge, pooled_noise

DEMO_ROWS = ["base", "A1", "A2", "A3", "A4", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "C6", "C7",
             "D1", "D2", "D3", "D4", "E1"]  # fmt: skip
DEMO_SIGMA = {"dev_bleu": 0.654, "dev_ce": 0.034}
DEMO_RHO = 0.7  # correlation of the two readings' seed noise, in quality terms
UNCLAIMED = [r for r in DEMO_ROWS if r != "base" and r not in {x for v in claim_rows(CLAIMS).values() for x in v}]


@dataclass
class Shape:
    seeds: int = 2
    rows: list = field(default_factory=lambda: list(DEMO_ROWS))
    sigma: dict = field(default_factory=lambda: dict(DEMO_SIGMA))
    rho: float = DEMO_RHO
    spread: dict = field(default_factory=dict)  # row -> factor on its seed sd
    tails: str = "normal"  # or "t3": Student t with 3 df, scaled to the same sd


def table(rng, shape: Shape, effects: dict | None = None) -> dict[str, dict[str, np.ndarray]]:
    """{reading: {row: seed values}}; effects: {row: shift in sd units, + is better}."""
    effects = effects or {}
    cov = np.array([[1.0, shape.rho], [shape.rho, 1.0]])
    chol = np.linalg.cholesky(cov)
    out: dict[str, dict] = {r: {} for r in shape.sigma}
    for row in shape.rows:
        z = rng.standard_normal((shape.seeds, 2))
        if shape.tails == "t3":  # a shared chi-square per seed keeps the readings' correlation
            z = z / np.sqrt(rng.chisquare(3, size=(shape.seeds, 1)) / 3) / np.sqrt(3.0)
        z = z @ chol.T * shape.spread.get(row, 1.0) + effects.get(row, 0.0)
        for k, reading in enumerate(shape.sigma):
            sign = 1 if READINGS[reading].higher_is_better else -1
            out[reading][row] = 20.0 * (reading == "dev_bleu") + 2.0 * (reading == "dev_ce") + sign * shape.sigma[
                reading] * z[:, k]  # fmt: skip
    return out


def _truth(effects: dict, row: str) -> float:
    return effects.get(row, 0.0)


def false_outcome(c, effects: dict, margin_sd: float | None = None) -> bool:
    """Is a decided comparison wrong?  Directional: the true quality difference is 0 or on the other side.  '~':
    agrees (equal within the margin) while the true difference is at least the margin, or contradicts while
    it is within it (margin_sd: the margin in sd units)."""
    if c.outcome not in (Outcome.AGREES, Outcome.CONTRADICTS):
        return False
    d = _truth(effects, c.a) - _truth(effects, c.b)
    if c.relation == "~":
        inside = abs(d) < (margin_sd or 0.0)
        return (c.outcome == Outcome.AGREES) != inside
    paper_side = d > 0 if c.relation == ">" else d < 0
    return (c.outcome == Outcome.AGREES) != paper_side or d == 0


def report_errors(rng, shape: Shape, rule: Rule, effects: dict | None = None, claims=CLAIMS) -> dict:
    """Judge one simulated report: counts of decided and false verdicts (claim-readings and rows against base),
    and of true effects found (comparisons with a true difference, decided on its side)."""
    effects = effects or {}
    values = table(rng, shape, effects)
    j = judge(values, claims, rule, [r for r in UNCLAIMED if r in shape.rows])
    decided = false = found = real = 0
    for res in j.claims:
        margin = _margin_sd(res, shape)
        if res.verdict in (Verdict.HELD, Verdict.CONTRADICTED, Verdict.MIXED):
            decided += 1
            false += any(false_outcome(c, effects, margin) for c in res.comparisons)
        for c in res.comparisons:
            if c.relation != "~" and _truth(effects, c.a) != _truth(effects, c.b):
                real += 1
                found += c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) and not false_outcome(c, effects)
    for comps in j.versus.values():
        for c in comps:
            decided += c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)
            false += false_outcome(c, effects)
    return {"decided": decided, "false": false, "found": found, "real": real, "verdicts": len(j.claims)}


def _margin_sd(res, shape: Shape) -> float | None:
    m = [c.margin for c in res.comparisons if c.relation == "~" and c.margin is not None]
    return m[0] / shape.sigma[res.reading] if m else None


def one_comparison(rng, seeds: int, variance: str, tables: int, spread=1.0, tails="normal", effect=0.0) -> float:
    """Share of tables where row C4 (``spread`` x the others' sd, ``effect`` in sd) is decided against base at
    alpha 0.05, with the seed variances modelled as ``variance`` (moderated or pooled)."""
    hits = 0
    rule = Rule(variance=variance)
    for _ in range(tables):
        shape = Shape(seeds=seeds, sigma={"dev_bleu": 1.0}, spread={"C4": spread}, tails=tails)
        values = table(rng, shape, {"C4": effect})["dev_bleu"]
        c = compare(values, pooled_noise(values, variance), "C4", "<", "base", "dev_bleu", rule=rule)
        decide([c], rule)
        hits += c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)
    return hits / tables

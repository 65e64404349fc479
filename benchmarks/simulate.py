"""Simulated tables with a known truth, for calibrating the verdict engine (the statistics tests and the benchmarks;
measuring only, so it lives here and not in the library).

A table has the demo's shape by default: Table 3's 19 rows (big excluded), n seeds each, two readings (dev BLEU
and dev cross-entropy) whose seed noise correlates (the demo's: -0.7 between BLEU and ln PPL, i.e. +0.7 in
quality) at the demo's pooled seed sd (0.654 BLEU, 0.034 nats).  Effects are given in units of each reading's sd
on the quality scale (+ better), so one number moves both readings alike.  ``Shape(sets=...)`` adds the readings
of the test set and of named evaluation sets (BLEU, chrF, cross-entropy each), every reading of a trial
correlating ``rho`` with every other, and ``report_errors`` then judges the whole printed report: the claims on
dev, test and each set, and the rows no claim covers against base, as the report does (one family).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.data.claims import claim_rows, table3_claims
from analysis.data.metrics import SET_METRICS, for_task, get_reading, set_reading
from analysis.report.evalsets import set_claims
from analysis.stats.comparisons import Outcome, compare
from analysis.stats.family import decide
from analysis.stats.rule import Rule
from analysis.stats.seed_noise import Noise, pooled_noise, table_noise
from analysis.stats.verdicts import Verdict, judge

DEMO_ROWS = ["base", "A1", "A2", "A3", "A4", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "C6", "C7",
             "D1", "D2", "D3", "D4", "E1"]  # fmt: skip
DEMO_SIGMA = {"dev_bleu": 0.654, "dev_ce": 0.034}
DEMO_RHO = 0.7  # correlation of the two readings' seed noise, in quality terms
DEV = for_task("translation").versus  # the readings rows no claim covers are judged on against base


@dataclass
class Shape:
    seeds: int = 2
    rows: list = field(default_factory=lambda: list(DEMO_ROWS))
    sigma: dict = field(default_factory=lambda: dict(DEMO_SIGMA))
    rho: float = DEMO_RHO
    spread: dict = field(default_factory=dict)  # row -> factor on its seed sd
    tails: str = "normal"  # or "t3": Student t with 3 df, scaled to the same sd
    sets: tuple = ()  # evaluation sets judged beside dev ("test", named sets): their BLEU, chrF and cross-entropy

    def __post_init__(self):
        for s in self.sets:  # a set's readings, each at the seed sd of the dev reading it re-judges (chrF at BLEU's)
            for m in SET_METRICS.values():
                self.sigma.setdefault(set_reading(s, m.name), self.sigma.get(m.from_dev, 1.0))

    def claims(self, claims=None) -> list:
        """The claims the report judges: dev's, then each set's (analysis.report.evalsets.set_claims)."""
        claims = table3_claims() if claims is None else claims
        return list(claims) + [c for s in self.sets for c in set_claims(s, claims)]


def table(rng, shape: Shape, effects: dict | None = None) -> dict[str, dict[str, np.ndarray]]:
    """{reading: {row: seed values}}; effects: {row: shift in sd units, + is better}."""
    effects = effects or {}
    m = len(shape.sigma)
    cov = np.full((m, m), shape.rho) + (1 - shape.rho) * np.eye(m)  # every reading of a trial alike
    chol = np.linalg.cholesky(cov)
    out: dict[str, dict] = {r: {} for r in shape.sigma}
    for row in shape.rows:
        z = rng.standard_normal((shape.seeds, m))
        if shape.tails == "t3":  # a shared chi-square per seed keeps the readings' correlation
            z = z / np.sqrt(rng.chisquare(3, size=(shape.seeds, 1)) / 3) / np.sqrt(3.0)
        z = z @ chol.T * shape.spread.get(row, 1.0) + effects.get(row, 0.0)
        for k, reading in enumerate(shape.sigma):
            sign = 1 if get_reading(reading).higher_is_better else -1
            out[reading][row] = (20.0 if sign > 0 else 2.0) + sign * shape.sigma[reading] * z[:, k]
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


def report_noise(values: dict, shape: Shape, model: str = "moderated") -> dict[str, Noise]:
    """Each reading's seed-noise model, table by table as the report judges them (``seed_noise.table_noise``): dev's
    readings together, and each of ``shape.sets``' readings together."""
    tables = [[set_reading(s, m) for m in SET_METRICS] for s in shape.sets]
    of_sets = {r for t in tables for r in t}
    tables.insert(0, [r for r in values if r not in of_sets])
    return {r: nz for t in tables for r, nz in table_noise({r: values[r] for r in t if r in values}, model).items()}


def report_errors(rng, shape: Shape, rule: Rule, effects: dict | None = None, claims=None,
                  values: dict | None = None, per_table: bool = False) -> dict:  # fmt: skip
    """Judge one simulated report (dev's claims, each of ``shape.sets``' claims and the rows no claim covers
    against base, one family as the report decides them) and count what it prints: comparisons decided
    (agrees / contradicts, wherever printed: inside a "within noise" verdict too) and how many of them are false,
    verdicts decided and false, and true effects found (comparisons with a true difference, decided on its
    side).  ``values``: the table, where the caller drew it.  ``per_table``: each set's claims a family of their
    own, dev's with the rows against base (the rule a whole-report family replaced, for comparison)."""
    claims = table3_claims() if claims is None else claims
    effects = effects or {}
    values = table(rng, shape, effects) if values is None else values
    claimed = {x for v in claim_rows(claims).values() for x in v} | {"base"}
    versus = [r for r in shape.rows if r not in claimed]  # the rows no claim covers, against base
    noise = report_noise(values, shape, rule.variance)
    if per_table:
        js = [judge(values, claims, rule, versus, versus_readings=DEV, noise=noise)]
        for s in shape.sets:
            own = set_claims(s, claims)
            js.append(judge({r: values[r] for c in own for r in c.readings}, own, rule, noise=noise))
    else:
        js = [judge(values, shape.claims(claims), rule, versus, versus_readings=DEV, noise=noise)]
    out = dict.fromkeys(("decided", "false", "verdicts", "false_verdicts", "found", "real", "tested"), 0)
    for res in (r for j in js for r in j.claims):
        margin = _margin_sd(res, shape)
        out["verdicts"] += 1
        wrong = [false_outcome(c, effects, margin) for c in res.comparisons]
        if res.verdict in (Verdict.HELD, Verdict.CONTRADICTED, Verdict.MIXED):
            out["false_verdicts"] += any(wrong)
        _count(out, res.comparisons, wrong)
        for c in res.comparisons:
            if c.relation != "~" and _truth(effects, c.a) != _truth(effects, c.b):
                out["real"] += 1
                out["found"] += c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) and not false_outcome(c, effects)
    for comps in (comps for j in js for comps in j.versus.values()):
        out["verdicts"] += len(comps)
        wrong = [false_outcome(c, effects) for c in comps]
        out["false_verdicts"] += sum(wrong)
        _count(out, comps, wrong)
    return out


def row_errors(rng, shape: Shape, rule: Rule, row: str, effects: dict | None = None, claims=None,
               values: dict | None = None) -> dict:  # fmt: skip
    """One simulated whole printed report judged as ``report_errors`` judges it (one family): is a comparison
    involving ``row`` falsely decided anywhere ("any"), on dev's readings ("dev"), on the other sets' ("sets"); is
    any comparison falsely decided ("report"); real comparisons ("real") and those found on their side ("found")."""
    claims = table3_claims() if claims is None else claims
    effects = effects or {}
    values = table(rng, shape, effects) if values is None else values
    claimed = {x for v in claim_rows(claims).values() for x in v} | {"base"}
    versus = [r for r in shape.rows if r not in claimed]
    noise = report_noise(values, shape, rule.variance)
    j = judge(values, shape.claims(claims), rule, versus, versus_readings=DEV, noise=noise)
    comps = [(c, _margin_sd(res, shape)) for res in j.claims for c in res.comparisons]
    comps += [(c, None) for cs in j.versus.values() for c in cs]
    wrong = [c for c, margin in comps if false_outcome(c, effects, margin)]
    mine = [c for c in wrong if row in (c.a, c.b)]
    real = [c for c, _ in comps if c.relation != "~" and _truth(effects, c.a) != _truth(effects, c.b)]
    return {"any": bool(mine), "dev": any(c.reading in DEV for c in mine),
            "sets": any(c.reading not in DEV for c in mine), "report": bool(wrong), "real": len(real),
            "found": sum(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) and not false_outcome(c, effects)
                         for c in real)}  # fmt: skip


def _count(out: dict, comps: list, wrong: list) -> None:
    out["tested"] += sum(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS, Outcome.WITHIN_NOISE) for c in comps)
    out["decided"] += sum(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for c in comps)
    out["false"] += sum(wrong)


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


def late_table(rng, shape: Shape, rho: float = 0.6, before: dict | None = None, after: dict | None = None) -> tuple:
    """(values at a late evaluation point, values at the end) of one simulated sweep: each seed's noise at the end
    correlates ``rho`` with its noise at the point (the same run trained on); ``before`` / ``after``: the true
    effects (sd units, + better) at the point and at the end."""
    z1, z2 = table(rng, shape), table(rng, shape)
    at: dict[str, dict] = {}
    end: dict[str, dict] = {}
    for reading, rows in z1.items():
        sign = 1 if get_reading(reading).higher_is_better else -1
        centre = 20.0 if sign > 0 else 2.0
        at[reading], end[reading] = {}, {}
        for row, v in rows.items():
            n1, n2 = v - centre, z2[reading][row] - centre
            shift = sign * shape.sigma[reading]
            at[reading][row] = centre + shift * (before or {}).get(row, 0.0) + n1
            end[reading][row] = centre + shift * (after or {}).get(row, 0.0) + rho * n1 + (1 - rho**2) ** 0.5 * n2
    return at, end


def unstable_flags(rng, shape: Shape, rule: Rule, rho: float = 0.6, before: dict | None = None,
                   after: dict | None = None, control: bool = True, claims=None) -> set:  # fmt: skip
    """The claim-readings and rows against base (dev readings) one simulated report flags unstable
    (analysis.stats.stability.flagged), its final point judged by ``rule``, one late point (``late_table``)."""
    claims = table3_claims() if claims is None else claims
    from analysis.stats.stability import flagged

    at, end = late_table(rng, shape, rho, before, after)
    claimed = {x for v in claim_rows(claims).values() for x in v} | {"base"}
    versus = [r for r in shape.rows if r not in claimed]
    j = judge(end, list(claims), rule, versus, versus_readings=DEV, noise=report_noise(end, shape, rule.variance))
    tested = [((res.claim, res.reading), c) for res in j.claims for c in res.comparisons]
    tested += [((c.a, r), c) for r, comps in j.versus.items() for c in comps]
    delta = {2 / 3: {r: {row: at[r][row] - end[r][row] for row in end[r]} for r in end}}
    return flagged(delta, tested, rule.alpha, control)[0]

"""The reach of a decision rule at the seeds it is offered: the smallest true effect it decides with 80% power.

A report decides its comparisons together (analysis.stats.verdicts: BH on p-values, or e-BH on e-values, over the whole
printed report), so what one comparison can decide depends on the family's size m, on how many comparisons the
procedure rejects (r: BH's cutoff on p is alpha r / m, e-BH's threshold on e is m / (alpha r)), on the looks
charged (p only) and on the seeds a row has.  ``smallest_effect`` solves, in seed sd, the true difference of two
rows' means that reaches the threshold with ``power``, with the engine's own pieces read on seeded null tables: the
noise model's standard error and df (analysis.stats.seed_noise), the t test's critical value (p-values) or the safe
t-test's (evalues.critical_t) on the noise model's and on the guard's error and df (comparisons.own_error).  Two bounds
are given: r = 1 (the effect alone in its family: the strictest threshold) and r = m / 2 (half the family real: about
the most lenient a report meets).  ``reach_lines`` words it for ``tsweep plan``, ``tsweep run`` and the report's header:
a rule that cannot decide a ``TARGET``-sd effect at its maximum seeds even with half the family real is named, with the
seeds a row it would need.  tests/analysis/test_reach.py measures the power at the solved effect on simulated
comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np
from scipy import optimize

from analysis.data.claims import Claim, as_claims, claim_rows, claims_for
from analysis.data.metrics import for_task
from analysis.stats.comparisons import own_error
from analysis.stats.dist import norm_cdf, norm_sf, t_ppf
from analysis.stats.evalues import critical_t
from analysis.stats.rule import ALPHA
from analysis.stats.seed_noise import pooled_noise, standard_error

POWER = 0.8
TARGET = 3.0  # the effect, in seed sd, a rule is asked to decide (issue 44's power target)
MAX_SEEDS = 64  # seeds a row searched for the one a rule would need


def family_size(claims: Sequence[Claim], rows: Sequence[str], task: str = "translation",
                sets: Sequence[str] = ("test",), base: str = "base") -> int:  # fmt: skip
    """The comparisons the report of these rows and claims prints (its family): every claim's comparisons on each
    of its readings, on dev and (translation) on each of ``sets`` (test; the named sets are scored later, so this
    is a lower bound where any will be), and every row no claim covers against base on the dev readings."""
    from .evalsets import set_claims  # evalsets imports the verdicts this module does

    judged, _ = claims_for(task, list(claims))
    on_sets = [c for s in (sets if for_task(task).evaluation_sets else ()) for c in set_claims(s, judged)]
    size = sum(len(c.comparisons) * len(c.readings) for c in [*judged, *on_sets])
    claimed = {r for v in claim_rows(as_claims(list(claims))).values() for r in v} | {base}
    versus = [r for r in rows if r not in claimed]
    return size + len(versus) * len(for_task(task).versus)


@cache
def smallest_effect(evidence: str, seeds: int, family: int, rejections: int = 1, rows: int = 19,
                    looks: int = 1, factor: int = 1, alpha: float = ALPHA, power: float = POWER) -> float:  # fmt: skip
    """The smallest true difference, in seed sd, that a comparison of two rows at ``seeds`` seeds each decides with
    ``power`` in a family of ``family`` comparisons of which the procedure rejects ``rejections`` (see the module
    doc), with ``rows`` rows in the noise model, ``looks`` charged (p only) and a best-of ``factor`` (its
    candidates); inf where no effect reaches it (the e-value is bounded on few df).

    The engine's noise model decides how far a difference must go: its standard error and df (moderated, a row's
    own spread kept where beyond the prior) and, for e-values, the guard's.  They depend on the seeds' spreads only,
    which are independent of the rows' means, so each of ``DRAWS`` seeded null tables gives the |difference| a
    comparison needs (``_needed``), and the power at a true difference is the mean over them of the normal chance
    that the observed one passes it."""
    if seeds < 2:
        return math.inf
    cutoff = alpha * min(max(rejections, 1), family) / max(family, 1)
    need = _needed(evidence, seeds, rows, cutoff / (looks * factor) if evidence == "p" else factor / cutoff)
    sd = math.sqrt(2 / seeds)  # of the difference of two means, in seed sd
    if not np.isfinite(need).any():
        return math.inf

    def short(delta: float) -> float:
        hit = norm_sf((need - delta) / sd) + norm_cdf((-need - delta) / sd)
        return float(np.mean(np.where(np.isfinite(need), hit, 0.0))) - power

    hi = 1.0
    while short(hi) < 0 and hi < 1e3:
        hi *= 2
    return float(optimize.brentq(short, 0.0, hi, xtol=1e-4)) if short(hi) >= 0 else math.inf


DRAWS = 200  # seeded null tables the noise model is read on


def _needed(evidence: str, seeds: int, rows: int, level: float) -> np.ndarray:
    """Per seeded null table (``_draws``), the |difference| a row against base needs: critical t x standard error on
    the noise model (p: two-sided t at ``level``; e: the safe t-test's critical t for e >= ``level``), for e-values
    the larger of that and the guard's on its own error and df (rounded down to half a df: fewer df need more)."""
    se, dof, own_se, own_dof = _draws(seeds, rows)
    if evidence == "p":
        return t_ppf(1 - level / 2, dof) * se
    n_eff = seeds / 2

    def crit(df: np.ndarray) -> np.ndarray:
        df = np.floor(df * 2) / 2
        known = {d: _critical(level, float(d), n_eff) for d in np.unique(df)}
        return np.array([known[d] for d in df])

    return np.maximum(crit(dof) * se, crit(own_dof) * own_se)


@cache
def _draws(seeds: int, rows: int) -> tuple[np.ndarray, ...]:
    """(se, df, the guard's se, its df) of row r1 against base in each of ``DRAWS`` seeded null tables of ``rows``
    rows at ``seeds`` seeds, seed sd 1: the engine's noise model (seed_noise.pooled_noise, standard_error) and
    guard (comparisons.own_error, each row's own variance floored at the model's)."""
    rng = np.random.default_rng(0)
    names = ["base", *(f"r{k}" for k in range(1, max(rows, 2)))]
    out = []
    for _ in range(DRAWS):
        values = {r: rng.standard_normal(seeds) for r in names}
        noise = pooled_noise(values)
        floor = (noise.spread("r1")[0], noise.spread("base")[0])
        own_se, own_dof, _ = own_error(values["r1"], values["base"], floor)
        out.append((*standard_error(noise, "r1", seeds, "base", seeds), own_se, own_dof))
    return tuple(np.array(x, dtype=float) for x in zip(*out))


@cache
def _critical(e_needed: float, dof: float, n_eff: float) -> float:
    """evalues.critical_t, cached (the df are rounded by the caller: down for the guard's, fewer df needing more)."""
    return critical_t(e_needed, dof, n_eff)


def seeds_needed(evidence: str, family: int, target: float = TARGET, **kw) -> int | None:
    """The fewest seeds a row at which ``smallest_effect`` (same arguments) is at most ``target``; None beyond
    MAX_SEEDS."""
    for n in range(2, MAX_SEEDS + 1):
        if smallest_effect(evidence, n, family, **kw) <= target:
            return n
    return None


def reach_lines(evidence: str, seeds: int, family: int, rows: int, looks: int = 1, sigma: dict | None = None,
                where: str = "", always: bool = True) -> list[str]:  # fmt: skip
    """The reach in words: one line with the smallest effect decided at 80% power (alone in the family, and with
    half of it real), in seed sd and, where ``sigma`` ({label: seed sd}) is given, in the readings' units; and a
    line naming the rule when it cannot decide a TARGET-sd effect even with half the family real, with the seeds a
    row it would need.  ``always`` False: only that second line (the report prints the reach only where it
    falls short)."""
    kw = {"rows": rows, "looks": looks}
    alone = smallest_effect(evidence, seeds, family, 1, **kw)
    half = smallest_effect(evidence, seeds, family, max(family // 2, 1), **kw)
    rule = "e-values (e-BH)" if evidence == "e" else "p-values (BH)"
    charged = f", {looks} looks charged" if evidence == "p" and looks > 1 else ""

    def sd(x: float) -> str:
        units = "".join(f", {x * s:.3g} {lab}" for lab, s in (sigma or {}).items() if math.isfinite(x * s))
        return (f"{x:.3g} sd" + (f" ({units[2:]})" if units else "")) if math.isfinite(x) else "no effect"

    out = []
    if always:
        out.append(f"Reach{where}: decided on {rule} at {seeds} seeds a row{charged}, in a family of {family} "
                   f"comparisons, a true difference of two rows' means is decided with {POWER:.0%} power from "
                   f"{sd(half)} where half the family's comparisons are real, from {sd(alone)} where it is the only "
                   "one (seed sd: the seed-to-seed standard deviation).")  # fmt: skip
    if not half <= TARGET:
        need = seeds_needed(evidence, family, rejections=max(family // 2, 1), **kw)
        more = f"{need} seeds a row would reach {TARGET:g} sd" if need else f"not even {MAX_SEEDS} seeds a row reach it"
        out.append(f"Short of {POWER:.0%} power at {TARGET:g} sd{where}: at {seeds} seeds a row, {rule}{charged} "
                   f"reach {POWER:.0%} power only from {sd(half)}, even with half of the {family} comparisons real; "
                   f"{more}.")  # fmt: skip
    return out


def spec_lines(spec, rows: Sequence[str] | None = None, always: bool = True) -> list[str]:
    """``reach_lines`` for a spec (sweeps.spec.sweep_spec.Spec) before it runs: its evidence (``seeds: {evidence}``),
    its most seeds a row (an adaptive spec's max), the looks a p rule charges (every planned look), its family
    (``rows``: the rows its profile runs, by default every row of the spec; test counted, named sets not).  Nothing
    for a spec without claims."""
    if not spec.claims:
        return []
    ad = spec.adaptive or {}
    evidence = ad.get("evidence", "p")
    seeds = int(ad["max"]) if ad else len(spec.seeds)
    looks = int(ad["max"]) - int(ad["min"]) + 1 if ad and evidence == "p" else 1
    rows = list(rows) if rows is not None else [r.label for r in spec.rows]
    family = family_size(spec.claims, rows, spec.task)
    where = f" (seeds: {ad['min']} to {ad['max']}, evidence {evidence})" if ad else f" (evidence {evidence})"
    return reach_lines(evidence, seeds, family, len(rows), looks, where=where, always=always)

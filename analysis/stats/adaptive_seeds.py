"""Where more seeds could decide: the adaptive loop's question to the verdict engine (``undecided_rows``), answered
by projecting each undecided comparison's standard error to the maximum seeds at the family's threshold."""

from __future__ import annotations

import math

import pandas as pd

from analysis.data.claims import MARGINED, Claim, as_claims
from analysis.data.metrics import get_reading
from analysis.stats.dist import t_ppf

from .comparisons import (
    Comparison,
    Outcome,
    critical,
    e_needed,
    guarded,
    has_guard,
    n_eff,
    own_projected,
    raw_level,
    seed_values,
)
from .evalues import critical_t
from .rule import Rule
from .seed_noise import Noise, standard_error, table_noise
from .verdicts import judge_table


def undecided_rows(df: pd.DataFrame, claims: list[Claim], rule: Rule, max_seeds: int) -> dict[str, str]:
    """Rows where more seeds could decide a verdict: {row: why}.

    A comparison qualifies when it is within noise (or lacks replicates) and, if its observed difference
    were the truth, the test with both rows at max_seeds would be decisive (|d| beyond the critical value at
    the family's threshold, with the projected standard error).  The loop then adds one seed per round to
    each such row; rows already at max_seeds are left out.
    """
    why: dict[str, str] = {}
    claims = as_claims(claims)
    j = judge_table(df, claims, rule)
    values = {r: seed_values(df, r) for r in dict.fromkeys(r for c in claims for r in c.readings)}
    noise = table_noise(values, rule.variance)
    for res in j.claims:
        reading = res.reading
        for c in res.comparisons:
            if c.outcome not in (Outcome.WITHIN_NOISE, Outcome.NO_REPLICATES, Outcome.NO_NOISE):
                continue
            na, nb = len(values[reading].get(c.a, ())), len(values[reading].get(c.b, ()))
            then = (max(na, max_seeds), max(nb, max_seeds))
            if not na or not nb or not _could_decide(c, noise[reading], (na, nb), then, rule):
                continue
            for row, n in ((c.a, na), (c.b, nb)):
                if n < max_seeds and row not in why:
                    why[row] = f"{res.claim} ({get_reading(reading).label}): {c.a} vs {c.b} {c.outcome.value}"
    return why


def _could_decide(c: Comparison, noise: Noise, now: tuple[int, int], then: tuple[int, int], rule: Rule) -> bool:
    """Would the test be decisive with ``then`` seeds, if the observed difference and spreads were the truth?
    The pooled df is projected to grow by the seeds added; the level is the family's threshold (alpha / the
    family's size when nothing was rejected: the strictest)."""
    if noise.df == 0 or not math.isfinite(noise.sigma):
        return True  # no noise estimate yet: replicates are what is missing
    added = (then[0] - now[0]) + (then[1] - now[1])
    own = dict(noise.own)
    for row, k in ((c.a, then[0] - now[0]), (c.b, then[1] - now[1])):
        if row in own:
            own[row] = (own[row][0], own[row][1] + k)
    projected = Noise(noise.sigma, noise.df + added, noise.rows, noise.prior_df, noise.prior_sd, own, noise.floored,
                      noise.model)  # fmt: skip
    se, dof = standard_error(projected, c.a, then[0], c.b, then[1])
    level = raw_level(c)  # the family's threshold over best-of candidates x looks, as the verdict
    if c.relation == "~":
        assert c.margin is not None  # a '~' comparison is made with its margin (compare)
        shown = abs(c.diff) + t_ppf(1 - level, dof) * se < c.margin  # equal within the margin
        return shown or abs(c.diff) - c.margin > t_ppf(1 - level, dof) * se  # or beyond it
    if c.relation in MARGINED:  # one-sided against the margin: decisive when quality + margin is far from 0
        assert c.margin is not None
        sign = (1 if get_reading(c.reading).higher_is_better else -1) * (1 if c.relation == ">=" else -1)
        return abs(sign * c.diff + c.margin) > t_ppf(1 - level, dof) * se
    if not abs(c.diff) > critical(c, dof, *then) * se:
        return False
    if guarded(c) and has_guard(c):  # and the guard's own test on its df at ``then``, at the noise model's spread
        s2 = se**2 / (1 / then[0] + 1 / then[1])
        own_se, dof_then = own_projected(c, *then, var=(s2, s2))
        return bool(dof_then) and abs(c.diff) > critical_t(e_needed(c), dof_then, n_eff(*then)) * own_se
    return True

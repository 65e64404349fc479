"""Which verdicts of a sweep the decision rule changes, and which part of the rule changes each.

The same sweep is judged four times, one change of the rule at a time, from the rule before the report became
one family to today's default:

1. previous: seed noise pooled over the rows, Holm within each claim-reading, every planned adaptive look
   charged. The rule of that time also set apart a row whose spread an F test against the rest's rejected
   (Bonferroni over the rows); that test is not reproduced, so where it would have fired, its effect shows
   under step 3;
2. looks: as 1, with the looks today's rule charges (analysis.stats.rule.charged_looks: every planned look once
   the loop has looked, a wall-clock budget stop included since issue 44; between the two, a budget stop was
   charged only the looks taken);
3. moderated: as 2, with each row's variance moderated (analysis/stats/seed_noise.py);
4. now: as 3, decided as one Benjamini-Hochberg family over the whole printed report: dev's claims, the rows
   against base and, where the sweep's directory is given, the claims on test and each named evaluation set
   (analysis.report.evalsets.report_rule; the default of `tsweep report`).

A claim-reading whose verdict differs between 1 and 4 is listed with the steps where it changed: that is the
part of the rule that changed it. `tsweep report SWEEP --compare-rules` writes the table as rule_changes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.data.adaptive_record import AdaptiveRecord, read_adaptive
from analysis.data.claims import Claim, table3_claims
from analysis.data.sweep_record import require_record
from analysis.stats.rule import Rule, charged_looks
from analysis.stats.trajectory import points, regime

from .evalsets import report_rule
from .tables import judge_report


@dataclass(frozen=True)
class Step:
    name: str
    what: str  # the change from the step before, in words
    rule: Rule


def steps(adaptive: AdaptiveRecord | dict | None, looks_taken: int) -> list[Step]:
    """The four rules, previous to now, for a sweep whose adaptive loop planned ``adaptive.looks``."""
    ad = read_adaptive(adaptive)
    planned = ad.looks if ad else 1
    return [
        Step("previous", f"seed noise pooled over the rows, Holm within each claim-reading, every planned look "
             f"charged ({planned})",
             Rule(looks=planned, family="claim", method="holm", variance="pooled")),
        Step("looks", f"looks charged as today's rule charges them ({looks_taken} of {planned})",
             Rule(looks=looks_taken, family="claim", method="holm", variance="pooled")),
        Step("moderated", "each row's seed variance moderated toward the rows' prior",
             Rule(looks=looks_taken, family="claim", method="holm")),
        Step("now", "one Benjamini-Hochberg family over the whole printed report (dev, test, named sets, rows "
             "against base)",
             Rule(looks=looks_taken)),
    ]  # fmt: skip


def compare(df: pd.DataFrame, adaptive: AdaptiveRecord | dict | None, looks_taken: int, sweep_dir=None,
            claims: list[Claim] | None = None) -> pd.DataFrame:  # fmt: skip
    """One line per claim-reading: its verdict under each step's rule (⚠ where unstable), whether the first and
    the last differ, and the steps where the verdict changed.  ``sweep_dir``: where the trials' evaluation sets
    are read from for the last step's family (without it, dev's claims and the rows against base)."""
    claims = table3_claims() if claims is None else claims
    pts = points(df)
    reg = regime(df, pts=pts)
    plan = steps(adaptive, looks_taken)
    judged = []
    for s in plan:
        rule = report_rule(df, sweep_dir, s.rule, claims) if s.name == "now" and sweep_dir is not None else s.rule
        table = judge_report(df, rule, reg=reg, pts=pts, claims=claims)[0]
        judged.append({(r["claim"], r["reading"]): r["verdict"] + (" ⚠" if r["unstable"] else "")
                       for _, r in table.iterrows()})  # fmt: skip
    lines = []
    for key in judged[0]:
        verdicts = [j.get(key, "") for j in judged]
        why = [plan[i].name for i in range(1, len(plan)) if verdicts[i] != verdicts[i - 1]]
        lines.append({"claim": key[0], "reading": key[1], **{s.name: v for s, v in zip(plan, verdicts)},
                      "changed": verdicts[0] != verdicts[-1], "changed at": ", ".join(why)})  # fmt: skip
    return pd.DataFrame(lines)


def markdown(table: pd.DataFrame, plan: list[Step]) -> str:
    """rule_changes.md: the steps, then every claim-reading's verdicts with the changed ones marked."""
    out = ["# Verdicts under the previous rule and today's", ""]
    out += [f"{i + 1}. **{s.name}**: {s.what}." for i, s in enumerate(plan)]
    out += [
        "",
        f"Today's rule, as the report's header states it: {plan[-1].rule.describe()}. The ⚠ (unstable) "
        "mark is today's definition in every column (an estimate from the last half of the budget outside the "
        "final interval).",
    ]
    changed = int(table["changed"].sum()) if len(table) else 0
    out += ["", f"{changed} of {len(table)} claim-readings read differently under today's rule than the previous.", ""]
    names = [s.name for s in plan]
    out.append("| claim | reading | " + " | ".join(names) + " | changed at |")
    out.append("|---|---|" + "---|" * len(names) + "---|")
    for _, r in table.iterrows():
        mark = "**" if r["changed"] else ""
        cells = [f"{mark}{r[n]}{mark}" for n in names]
        out.append(f"| {r['claim']} | {r['reading']} | " + " | ".join(cells) + f" | {r['changed at'] or '-'} |")
    return "\n".join(out) + "\n"


def write(sweep_dir: str | Path, out_dir: str | Path) -> tuple[Path, pd.DataFrame]:
    """Judge a local sweep directory under each step's rule; rule_changes.md in ``out_dir`` and the table."""
    from analysis.data.collect import collect

    sweep_dir, out_dir = Path(sweep_dir), Path(out_dir)
    state = require_record(sweep_dir, repr(str(sweep_dir)))
    adaptive = state.adaptive
    looks = charged_looks(adaptive)
    stated = list(state.shape().claims)  # the claims the sweep's spec stated
    table = compare(collect(sweep_dir), adaptive, looks, sweep_dir, stated)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "rule_changes.md"
    path.write_text(markdown(table, steps(adaptive, looks)))
    return path, table

"""Table-3-style reproduction table and the claims table from a collected sweep.

Intervals use the seed noise pooled over the sweep's rows (analysis.stats.verdicts); the sentence-level
paired bootstrap is kept as its own column ("sentence-sampling p"): test-set sampling noise of one
model's output, never a verdict on its own.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.data.claims import BLEU_ONLY, UNDERTRAINED_KINDS, Claim, claim_rows, claims_for, table3_claims
from analysis.data.metrics import for_task, get_reading, sweep_task
from analysis.data.paper import load_table3
from analysis.stats.comparisons import Outcome, seed_values
from analysis.stats.paired_bootstrap import combine_pvalues, paired_bootstrap, read_lines
from analysis.stats.rule import Rule
from analysis.stats.scale import NOT_MEASURABLE, ScaleGuard, scale_guard
from analysis.stats.seed_noise import Noise
from analysis.stats.stability import changes, flagged
from analysis.stats.trajectory import frac_label, points, regime, trajectories, trajectory_text, unstable
from analysis.stats.verdicts import Judgement, Verdict, frame_noise, table_readings
from transformer_core import knobs as knob_table
from transformer_core.rundir import Status

PAPER_READINGS = for_task("translation").table  # dev BLEU, dev cross-entropy and test BLEU: the paper's columns
LM_DROPPED: tuple[str, ...] = ("bleu_dev", "bleu_dev_ci", "bleu_test", "bleu_test_ci", "delta_bleu", "p_sentence_test")
LM_DROPPED += ("paper_bleu_dev", "paper_delta_bleu")


def _finished(df: pd.DataFrame, row: str) -> pd.DataFrame:
    return df[(df["row"] == row) & (df["status"] == Status.FINISHED)]


def row_order(df: pd.DataFrame) -> list[str]:
    paper = [r["row"] for r in load_table3()]
    ours = list(dict.fromkeys(df["row"]))
    return [r for r in paper if r in ours] + [r for r in ours if r not in paper]


def significance(df: pd.DataFrame, row: str, other: str, split: str = "test", samples: int = 1000) -> float | None:
    """Sentence-sampling p: paired bootstrap of row against other, per seed both finished, combined (Fisher)."""
    a, b = _finished(df, row), _finished(df, other)
    pvalues = []
    for seed in sorted(set(a["seed"]) & set(b["seed"])):
        wa, wb = Path(a[a["seed"] == seed]["workdir"].iloc[0]), Path(b[b["seed"] == seed]["workdir"].iloc[0])
        ha, hb = read_lines(wa / f"{split}.hyp"), read_lines(wb / f"{split}.hyp")
        refs = read_lines(wa / f"{split}.ref")
        if ha and hb and refs and len(ha) == len(hb) == len(refs):
            pvalues.append(paired_bootstrap(hb, ha, refs, samples))
    return combine_pvalues(pvalues)


def knob_columns(df: pd.DataFrame) -> list[str]:
    """The paper's Table 3 columns, then every other knob of the table that varies across rows."""
    cols = [k for k in knob_table.names(paper=True) if f"paper_{k}" in df]  # the table as it is now
    for k in knob_table.KNOBS:
        if k.name in cols or k.where in ("run",) or k.name in ("seed", "steps", "corpus"):
            continue
        col = f"paper_{k.name}" if f"paper_{k.name}" in df else k.name
        if col in df and df[col].astype(str).nunique(dropna=False) > 1:
            cols.append(k.name)
    return cols


def knob_value(first: pd.Series, name: str):
    """A knob in the paper's units where the trial recorded them, else as run."""
    v = first.get(f"paper_{name}")
    return v if v is not None and v == v else first.get(name)


def reproduction_table(df: pd.DataFrame, samples: int = 1000, noise: dict | None = None,
                       paper_rows: dict | None = None) -> pd.DataFrame:  # fmt: skip
    """One line per row in the paper's order: knobs (paper units), ours (mean, 95% CI, n, delta, p), the paper's.
    A language-model sweep (task lm) has bits per byte and test perplexity instead of BLEU.  ``noise`` is
    {reading: pooled_noise} of the sweep where the caller has it already.  ``paper_rows``: {our row: the paper's
    row} whose numbers it shows (the spec's ``paper:``); None: every row whose label is a row of the paper's."""
    paper = {r["row"]: r for r in load_table3()}
    theirs = (lambda row: row) if paper_rows is None else paper_rows.get
    task = for_task(sweep_task(df))
    lm = task.name == "lm"
    readings = task.table
    if not noise or any(r not in noise for r in readings):
        noise = {**shown_noise(df, readings=readings), **(noise or {})}
    vals = {r: seed_values(df, r) for r in readings}
    base = {r: noise[r].mean_ci(vals[r].get("base", np.array([])), "base") for r in readings}
    pb = paper.get("base", {})
    knobs = knob_columns(df)
    lines = []
    for row in row_order(df):
        sub = df[df["row"] == row]
        first = sub.iloc[0]
        bleu, ce, test = (noise[r].mean_ci(vals[r].get(row, np.array([])), row) for r in PAPER_READINGS)
        fin = _finished(df, row)
        p = significance(df, row, "base", "test", samples) if row != "base" and len(fin) and not lm else None
        pr = paper.get(theirs(row), {})
        statuses = sub["status"].value_counts().to_dict()
        lines.append(
            {
                "group": first["group"],
                "row": row,
                **{k: knob_value(first, k) for k in knobs},
                "steps_run": first.get("steps"),
                "n": ce[2] if lm else bleu[2],  # seeds with the reading the row is judged on
                "seeds": len(sub),
                "status": ", ".join(f"{v} {k}" for k, v in sorted(statuses.items())),
                "ppl_dev": math.exp(ce[0]) if ce[2] else float("nan"),
                "ce_dev": ce[0],
                "ce_dev_ci": ce[1],
                "bleu_dev": bleu[0],
                "bleu_dev_ci": bleu[1],
                "bleu_test": test[0],
                "bleu_test_ci": test[1],
                "delta_bleu": bleu[0] - base["dev_bleu"][0] if row != "base" else 0.0,
                "delta_ce": ce[0] - base["dev_ce"][0] if row != "base" else 0.0,
                "p_sentence_test": p,
                "params_M": (fin["params"].mean() / 1e6) if len(fin) else float("nan"),
                "device_hours": sub["wall_seconds"].fillna(0).sum() / 3600,
                "train_flops": sub["train_flops"].fillna(0).sum(),
                "paper_ppl_dev": pr.get("ppl_dev"),
                "paper_bleu_dev": pr.get("bleu_dev"),
                "paper_params_M": pr.get("params_millions"),
                "paper_delta_bleu": (pr["bleu_dev"] - pb["bleu_dev"]) if pr and pb else None,
                "paper_delta_ce": math.log(pr["ppl_dev"] / pb["ppl_dev"]) if pr and pb else None,
            }
        )
        if lm:  # bits per byte and test perplexity in place of BLEU, after the dev perplexity columns
            own = [r for r in readings if r not in PAPER_READINGS]  # dev and test bits per byte
            bpb = {r: noise[r].mean_ci(vals[r].get(row, np.array([])), row) for r in own}
            extra = {"bpb_dev": bpb["dev_bpb"][0], "bpb_dev_ci": bpb["dev_bpb"][1], "bpb_test": bpb["test_bpb"][0],
                     "bpb_test_ci": bpb["test_bpb"][1], "ppl_test": _mean(fin, "test_ppl")}  # fmt: skip
            lines[-1] = _insert_after({k: v for k, v in lines[-1].items() if k not in LM_DROPPED}, "delta_ce", extra)
    out = pd.DataFrame(lines)
    out.attrs["knobs"] = knobs
    return out


def _insert_after(d: dict, key: str, extra: dict) -> dict:
    items = list(d.items())
    at = [k for k, _ in items].index(key) + 1
    return dict(items[:at] + list(extra.items()) + items[at:])


def _mean(fin: pd.DataFrame, column: str) -> float:
    v = pd.to_numeric(fin[column], errors="coerce") if column in fin else pd.Series(dtype=float)
    return float(v.mean()) if v.notna().any() else float("nan")


def not_measured_record(claim: Claim, rows: list[str], why: str) -> dict:
    """A claims-table line for a claim this sweep cannot judge (e.g. a BLEU-only claim in an LM sweep)."""
    return {"claim": claim.id, "text": claim.text, "reading": get_reading(claim.readings[0]).label,
            "verdict": Verdict.NOT_MEASURED.value, "symbol": Verdict.NOT_MEASURED.symbol, "trajectory": "",
            "unstable": False, "rows": ",".join(rows), "summary": why, "evidence": "", "caveat": ""}  # fmt: skip


def claim_record(res, claim: Claim, rows: list[str], undertrained: bool, path: list | None = None,
                 guard: ScaleGuard | None = None, flag: bool | None = None) -> dict:  # fmt: skip
    """One line of a claims table: verdict, trajectory (when judged over the budget), each comparison's outcome
    and numbers, the difference the table could detect, diverged seeds, caveat.  ``guard`` (analysis.stats.scale): a
    reading at its floor in every row of the claim is not judged (``NOT_MEASURABLE``, no trajectory), and a test
    profile's caveat goes on every line.  ``flag``: unstable as the report's family decided it
    (analysis.stats.stability); None: trajectory.unstable on ``path``."""
    caveats = []
    if undertrained and claim.kind in UNDERTRAINED_KINDS:
        caveats.append("undertrained regime: capacity and regularisation effects may invert")
    elif undertrained and claim.kind == "other":  # a claim that does not say what its rows vary
        caveats.append("undertrained regime: effects measured before training converged may invert")
    floor = guard is not None and guard.at_floor(res.reading, rows)
    if guard is not None and guard.caveat():
        caveats.insert(0, guard.caveat())
    verdict, symbol = (NOT_MEASURABLE, "?") if floor else (res.verdict.value, res.verdict.symbol)
    path = None if floor else path
    return {
        "claim": res.claim,
        "text": claim.text,
        "reading": get_reading(res.reading).label,
        "verdict": verdict,
        "symbol": symbol,
        "trajectory": trajectory_text(path) if path else "",
        "unstable": bool(flag) if flag is not None and path else unstable(path) if path else False,
        "rows": ",".join(rows),
        "summary": res.detail,
        "evidence": "; ".join(c.evidence() for c in res.comparisons),
        "detectable": res.detectable,
        # each comparison's probability of improvement (rliable's P(a > b) over seed pairs), in the evidence's order;
        # empty where no comparison has one (nothing measured)
        "p_better": "; ".join("" if math.isnan(c.prob) else f"{c.prob:.3f}" for c in res.comparisons)
        if any(not math.isnan(c.prob) for c in res.comparisons)
        else "",
        "diverged": sum(res.diverged.values()),
        "caveat": "; ".join(caveats),
    }


CLAIM_COLUMNS = ("claim", "text", "reading", "verdict", "symbol", "trajectory", "unstable", "rows", "summary",
                 "evidence", "detectable", "p_better", "diverged", "caveat")  # fmt: skip


def claims_frame(records: list[dict]) -> pd.DataFrame:
    """A claims table of ``claim_record`` lines; with its columns where a spec states no claims."""
    return pd.DataFrame(records) if records else pd.DataFrame(columns=list(CLAIM_COLUMNS))


def judge_report(df: pd.DataFrame, rule: Rule = Rule(), reg: dict | None = None, pts: dict | None = None,
                 claims: list[Claim] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(claims, rows against base): one line per claim and reading, one per unclaimed row and reading, all decided
    as one family (``rule``), each judged again at every evaluation point the trials share (the trajectory).
    ``claims``: the spec's (sweep.json's record; the paper's by default).  ``reg`` is trajectory.regime(df) and
    ``pts`` trajectory.points(df) when the caller has them already.  A language-model sweep judges the claims on
    perplexity (claims.claims_for); those stated only in BLEU get a "not measured" line."""
    claims = table3_claims() if claims is None else claims
    stated = claims
    claims, apart = claims_for(sweep_task(df), stated)
    vrows = unclaimed_rows(df, stated) if ((df["row"] == "base") & (df["status"] == Status.FINISHED)).any() else []
    pts = points(df) if pts is None else pts
    final, traj, vtraj = trajectories(df, claims, rule, vrows, pts)
    tested = [((r.claim, r.reading), c) for r in final.claims for c in r.comparisons]
    tested += [((c.a, reading), c) for reading, comps in final.versus.items() for c in comps]
    flags, tests = flagged(changes(pts, {c.reading for _, c in tested}), tested, rule.alpha)
    undertrained = bool((reg if reg is not None else regime(df)).get("undertrained"))
    rows_of, by_id, guard = claim_rows(stated), {c.id: c for c in claims}, scale_guard(df)
    table = claims_frame(
        [claim_record(r, by_id[r.claim], rows_of[r.claim], undertrained, traj[(r.claim, r.reading)], guard,
                      (r.claim, r.reading) in flags) for r in final.claims]
        + [not_measured_record(c, rows_of[c.id], BLEU_ONLY) for c in apart]
    )  # fmt: skip
    table.attrs["unstable_tests"] = tests  # the changes the flags are decided over (analysis.stats.stability.flagged)
    return table, _versus_table(df, final, vtraj, guard, flags)


def shown_noise(df: pd.DataFrame, claims: list[Claim] | None = None, readings: tuple = ()) -> dict[str, Noise]:
    """The seed-noise model of each reading the header and the tables show (``readings``; by default the
    reproduction table's, analysis.data.metrics ``Task.table``), as the verdicts use it: those of the table
    ``judge_report`` judges (its claims' readings and the rows against base's) together, the others each alone
    (verdicts.frame_noise)."""
    claims = table3_claims() if claims is None else claims
    judged, _ = claims_for(sweep_task(df), claims)
    vrows = unclaimed_rows(df, claims) if ((df["row"] == "base") & (df["status"] == Status.FINISHED)).any() else []
    shown = readings or for_task(sweep_task(df)).table
    return frame_noise(df, shown, table_readings(df, judged, vrows))


VERSUS_LABEL = {Outcome.AGREES: "better than base", Outcome.CONTRADICTS: "worse than base"}


def unclaimed_rows(df: pd.DataFrame, claims: list[Claim] | None = None) -> list[str]:
    """Rows of the sweep that no claim (of ``claims``, the spec's) covers, in the table's order."""
    claims = table3_claims() if claims is None else claims
    claimed = {r for rows in claim_rows(claims).values() for r in rows} | {"base"}
    return [r for r in row_order(df) if r not in claimed]


def _versus_table(df: pd.DataFrame, final: Judgement, vtraj: dict, guard: ScaleGuard | None = None,
                  flags: frozenset | set = frozenset()) -> pd.DataFrame:  # fmt: skip
    """Every row that no claim covers against base, per reading: outcome, trajectory, stability, evidence.
    A row with diverged seeds says so: all diverged is the outcome "diverged", some diverged is compared on
    the seeds that finished, with the count in the evidence; a row and base both at the reading's floor
    (analysis.stats.scale) are not compared (``NOT_MEASURABLE``)."""
    diverged = df[df["status"] == Status.DIVERGED].groupby("row").size().to_dict()
    seeds = df.groupby("row").size().to_dict()
    out = []
    for reading, comps in final.versus.items():
        for c in comps:
            path, k = vtraj.get((c.a, reading), [(1.0, c)]), diverged.get(c.a, 0)
            outcome = VERSUS_LABEL.get(c.outcome, c.outcome.value)
            if k and c.outcome == Outcome.MISSING:
                outcome = "diverged"
            if guard is not None and c.outcome != Outcome.MISSING and guard.at_floor(reading, [c.a, c.b]):
                outcome = NOT_MEASURABLE
            evidence = c.detail + (f"; {k} of {seeds[c.a]} seeds diverged" if k else "")
            out.append({
                "row": c.a, "reading": get_reading(reading).label, "outcome": outcome,
                "trajectory": " → ".join(
                    f"{frac_label(f)} {VERSUS_LABEL.get(x.outcome, x.outcome.value).replace(' than base', '')}"
                    for f, x in path),
                "unstable": (c.a, reading) in flags and outcome != NOT_MEASURABLE, "diverged": k,
                "diff": c.diff, "ci_low": c.ci[0], "ci_high": c.ci[1], "p_looks": c.p, "p_better": c.prob,
                "evidence": evidence,
            })  # fmt: skip
    return pd.DataFrame(out)

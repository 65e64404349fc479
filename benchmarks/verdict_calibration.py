"""The verdict engine on simulated tables of the demo's shape, the new rule beside the ones before it.

    python benchmarks/verdict_calibration.py [--tables 1000] [--seed 0]
    python benchmarks/verdict_calibration.py --evalues [--tables 300] [--seed 0]   # the e-value section alone

Every cell uses --tables simulated tables (sweeps, for the adaptive loop), at 2 and 3 seeds per row (19 rows,
correlated readings, benchmarks/simulate.py).  "Decided" counts every comparison the report prints as agrees /
contradicts, inside a "within noise" verdict too.  Prints:
  * under the complete null, the whole printed report (dev's claims, test's and one named set's, the rows no
    claim covers against base): the share of reports with at least one false decided comparison, false ones per
    report and per tested comparison; one family (today) against each table its own family (before issue 44);
  * the same on dev's claims and the rows against base alone, BH, Holm and the previous rule;
  * with a mix of real effects (7 rows at 2 and 3 sd on the paper's side): the share of false comparisons among
    decided ones (false discovery rate) and the power per real comparison;
  * one comparison against base at alpha 0.05: a row at 2x / 3x / 5x the others' seed sd (false rate), t(3)
    seed noise (false rate), a 3 sd effect (power), and that power when another row's seeds are identical;
  * the power at the printed 'detectable' difference (nominal 80%), one look and 10 looks in a family;
  * the unstable flag: a constant effect at ~50% power, and an effect that reverses between 2/3 and the end;
  * the real adaptive loop (sweeps.run.adaptive.seed_rounds) under the null, stopped by the data or by a budget of
    1 or 2 trials: each comparison's false rate with every planned look charged and with only the looks taken;
  * the frontier for a row at 3x the others' spread.
``--evalues`` runs only the section on Rule(evidence="e") (anytime-valid e-values decided by e-BH, with the guard
of analysis/evalues.guarded_evalue) beside the p rule on the same draws, whole printed reports through the real
adaptive loop included (``evalue_section``; benchmarks/results/verdict_calibration_evalues.txt); without it the
output is what it was before that option existed.
"Previous" is the rule before this engine: each claim-reading its own family (Holm), one pooled seed variance
(without the F test that set rows apart), every planned look charged, unstable = the verdict changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.stats import seed_noise  # noqa: E402
from analysis.stats.comparisons import compare
from analysis.stats.family import decide
from analysis.stats.rule import Rule
from analysis.stats.seed_noise import pooled_noise
from analysis.stats.trajectory import unstable  # noqa: E402
from benchmarks import simulate as sim  # noqa: E402

NEW = Rule()
HOLM = Rule(method="holm")
OLD = Rule(family="claim", method="holm", variance="pooled")
MIX = {"A1": -3.0, "B1": -3.0, "B2": -3.0, "C1": -3.0, "C3": 3.0, "D1": -3.0, "D3": 3.0}  # paper's side, sd units


def report_rates(rng, seeds: int, rule: Rule, tables: int, effects=None, per_table=False, **shape) -> dict:
    """Over ``tables`` simulated reports: the share with any false decided comparison (fwer), false decided
    comparisons per report and per tested comparison, the mean false share among decided ones (fdr), power."""
    any_false = false = tested = found = real = 0
    fdp = []
    for _ in range(tables):
        r = sim.report_errors(rng, sim.Shape(seeds=seeds, **shape), rule, effects, per_table=per_table)
        any_false += r["false"] > 0
        false += r["false"]
        tested += r["tested"]
        found += r["found"]
        real += r["real"]
        fdp.append(r["false"] / r["decided"] if r["decided"] else 0.0)
    return {"fwer": any_false / tables, "false_per_report": false / tables, "fdr": float(np.mean(fdp)),
            "power": found / real if real else float("nan"), "per_comparison": false / max(tested, 1),
            "tested": tested / tables}  # fmt: skip


def unstable_rates(rng, seeds: int, tables: int, before: float, after: float, rho: float = 0.6) -> tuple:
    """(new flag rate, previous flag rate): row C4 against base at 2/3 and at the end of the budget; each seed's
    noise at the end correlates rho with its noise at 2/3 (the same run trained on); before/after: C4's true
    effect (sd units, + better) at each point."""
    new = old = 0
    rows = sim.DEMO_ROWS
    for _ in range(tables):
        z1 = rng.standard_normal((len(rows), seeds))
        z2 = rho * z1 + np.sqrt(1 - rho**2) * rng.standard_normal((len(rows), seeds))
        path = []
        for f, z, eff in ((0.667, z1, before), (1.0, z2, after)):
            values = {r: z[i] + (eff if r == "C4" else 0.0) for i, r in enumerate(rows)}
            c = compare(values, pooled_noise(values), "C4", ">", "base", "dev_bleu")
            decide([c], NEW)
            path.append((f, c))
        new += unstable(path)
        old += path[0][1].outcome != path[1][1].outcome
    return new / tables, old / tables


def frontier(rng, seeds: int, k: float, reps: int = 40000) -> dict:
    """Rules that inflate a row's variance by its own spread: T = |d| / sqrt(sum max(s_pool^2, k s_i^2) / n), the
    critical value recalibrated to 5% with ordinary rows (19 rows, normal noise): what a 3x row's false rate and
    the power at 3 sd come to.  How far any rule of this kind gets with two or three seeds."""

    def stat(spread=1.0, effect=0.0):
        x = rng.standard_normal((reps, 19, seeds))
        x[:, 1] = x[:, 1] * spread + effect
        m, s2 = x.mean(2), x.var(2, ddof=1)
        pool = s2.mean(1)
        va, vb = np.maximum(pool, k * s2[:, 1]), np.maximum(pool, k * s2[:, 0])
        return np.abs(m[:, 1] - m[:, 0]) / np.sqrt((va + vb) / seeds)

    crit = np.quantile(stat(), 0.95)
    return {"3x": float((stat(3.0) > crit).mean()), "power3": float((stat(effect=3.0) > crit).mean())}


ADAPTIVE_ROWS = [f"R{i}" for i in range(1, 8)]
ADAPTIVE_CLAIMS = [{"id": f"{r}<base", "readings": ("dev_bleu",), "comparisons": [(r, "<", "base")]}
                   for r in ADAPTIVE_ROWS]  # fmt: skip


class _Planned:  # what seed_rounds needs of a planned trial
    def __init__(self, row: str):
        self.row = row


def adaptive_sweep(rng, lo: int = 2, hi: int = 5, budget_trials: float | None = None, effects=None,
                   evidence: str = "p") -> tuple:  # fmt: skip
    """The real loop (sweeps.run.adaptive.seed_rounds, the real undecided_rows) on simulated trial results (base and
    R1..R7 at 20 + effect + N(0, 1), one claim R < base each): each trial costs one unit of the wall-clock budget,
    so a round's cost is the number of rows it adds a seed to, which depends on how many are undecided; the loop
    judges on ``evidence`` (a spec's seeds.evidence).  Returns (the final frame, the adaptive record)."""
    import pandas as pd

    from sweeps.run.adaptive import seed_rounds

    effects = effects or {}
    values = {r: list(20 + effects.get(r, 0) + rng.standard_normal(lo)) for r in ["base"] + ADAPTIVE_ROWS}
    ad = {"min": lo, "max": hi, "looks": hi - lo + 1, "rounds": [], **({"evidence": "e"} if evidence == "e" else {})}

    def frame():
        return pd.DataFrame([{"row": r, "seed": i + 1, "status": "finished", "dev_bleu": v}
                             for r, vs in values.items() for i, v in enumerate(vs)])  # fmt: skip

    def run(new, k):
        for t in new:
            values[t.row].append(20 + effects.get(t.row, 0) + rng.standard_normal())

    def spent() -> float:
        return float(sum(len(v) - lo for v in values.values()))

    seed_rounds(ad, frame, lambda why: [_Planned(r) for r in why if len(values[r]) < hi], run, float, budget_trials,
                spent, lambda s: None, ADAPTIVE_CLAIMS)  # fmt: skip
    return frame(), ad


def adaptive_null(rng, sweeps: int, budget_trials: float | None = None, charge=None, family: str = "claim") -> dict:
    """Null sweeps through the real adaptive loop: the share of comparisons falsely decided and of sweeps with any,
    the looks charged by analysis.stats.rule.charged_looks, or ``charge(ad)`` instead (e.g. the looks taken); each
    comparison decided alone (family "claim": its own error rate, which the charge must keep at alpha) or the
    seven as the report's family."""
    from analysis.stats.comparisons import Outcome
    from analysis.stats.rule import charged_looks
    from analysis.stats.verdicts import judge_table

    decided = anyf = total = 0
    for _ in range(sweeps):
        df, ad = adaptive_sweep(rng, budget_trials=budget_trials)
        looks = charge(ad) if charge else charged_looks(ad)
        j = judge_table(df, ADAPTIVE_CLAIMS, Rule(looks=looks, family=family))
        outs = [c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for r in j.claims for c in r.comparisons]
        decided += sum(outs)
        anyf += any(outs)
        total += len(outs)
    return {"per_comparison": decided / total, "report": anyf / sweeps}


def looks_taken(ad: dict) -> int:
    """The charge before issue 44 for a budget stop: the looks taken (the first and one per round)."""
    return len(ad["rounds"]) + 1 if ad.get("stop") == "budget" else ad["looks"]


def machine_line(command: str) -> str:
    """Where and when these figures were made: machine, CPU flags, date, commit, command."""
    import platform
    import subprocess

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    isa = "avx512_bf16" if "avx512_bf16" in flags else "avx2" if "avx2" in flags else "other"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return (f"# {platform.machine()} {platform.processor() or ''} cpu flags: {isa}; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit {commit or '?'}; {command}")  # fmt: skip


def zero_row_power(rng, seeds: int, tables: int) -> float:
    """Power at 3 sd of C4 against base when row D2's seeds are identical (BLEU 0.0 on each)."""
    hits = 0
    for _ in range(tables):
        values = sim.table(rng, sim.Shape(seeds=seeds, sigma={"dev_bleu": 1.0}), {"C4": -3.0})["dev_bleu"]
        values["D2"] = np.zeros(seeds)
        c = compare(values, pooled_noise(values), "C4", "<", "base", "dev_bleu")
        decide([c], NEW)
        hits += c.outcome.value == "agrees"
    return hits / tables


def detectable_power(rng, seeds: int, rule: Rule, tables: int, calibration: int | None = None) -> tuple[float, float]:
    """(mean printed detectable difference of C4 vs base at ``rule``, in sd, over ``calibration`` null tables; the
    share of ``tables`` decided at that truth)."""
    from analysis.stats.comparisons import detectable

    shape = sim.Shape(seeds=seeds, sigma={"dev_bleu": 1.0})
    ds = []
    for _ in range(calibration or max(tables // 5, 50)):
        v = sim.table(rng, shape)["dev_bleu"]
        c = compare(v, pooled_noise(v), "C4", "<", "base", "dev_bleu", rule=rule)
        decide([c], rule)
        ds.append(detectable(c))
    d = float(np.mean(ds))
    hits = 0
    for _ in range(tables):
        v = sim.table(rng, shape, {"C4": -d})["dev_bleu"]
        c = compare(v, pooled_noise(v), "C4", "<", "base", "dev_bleu", rule=rule)
        decide([c], rule)
        hits += c.outcome.value == "agrees"
    return d, hits / tables


SETS = ("test", "wmt-x")  # the whole printed report: dev, test and one named set


def _null_section(rng, n: int) -> None:
    print(f"\n## complete null, the whole printed report (dev + test + a named set + rows against base; {n} tables)")
    print("   report: P(>=1 false decided comparison printed); per comparison: false / tested")
    for seeds in (2, 3):
        for name, rule, apart in (("new (BH, one family)", NEW, False), ("before (each table)", NEW, True)):
            r = report_rates(rng, seeds, rule, n, per_table=apart, sets=SETS)
            print(f"n={seeds} {name:22s} report {r['fwer']:.3f}  false/report {r['false_per_report']:.3f}  "
                  f"per comparison {r['per_comparison']:.4f}  ({r['tested']:.0f} tested per report)")  # fmt: skip
    print(f"\n## complete null, dev's claims and rows against base only ({n} tables)")
    for seeds in (2, 3):
        for name, rule in (("new (BH, report)", NEW), ("new (Holm, report)", HOLM), ("previous", OLD)):
            r = report_rates(rng, seeds, rule, n)
            print(f"n={seeds} {name:22s} report {r['fwer']:.3f}  false/report {r['false_per_report']:.3f}  "
                  f"per comparison {r['per_comparison']:.4f}")  # fmt: skip


def _mix_section(rng, n: int) -> None:
    for k in (2.0, 3.0):
        print(f"\n## mix of real effects at {k:g} sd (7 rows on the paper's side; dev; {n} tables): FDR, power")
        eff = {r: np.sign(v) * k for r, v in MIX.items()}
        for seeds in (2, 3):
            for name, rule in (("new (BH, report)", NEW), ("new (Holm, report)", HOLM), ("previous", OLD)):
                r = report_rates(rng, seeds, rule, n, eff)
                print(f"n={seeds} {name:22s} FDR {r['fdr']:.3f}  power {r['power']:.3f}")


def _adaptive_section(rng, n: int) -> None:
    print(f"\n## the real adaptive loop under the null (min 2, max 5 seeds, 7 claims each decided alone; {n} sweeps)")
    print("   per comparison falsely decided: every planned look charged (today) / only the looks taken (before)")
    r = adaptive_null(rng, n)
    print(f"no budget (data or max stop): {r['per_comparison']:.4f}")
    for b in (1, 2):
        now, taken = adaptive_null(rng, n, b), adaptive_null(rng, n, b, charge=looks_taken)
        print(f"budget of {b} trial(s): charged {now['per_comparison']:.4f}  looks taken {taken['per_comparison']:.4f}")


# ---------------------------------------------------------------------------------------------- e-values
E = Rule(evidence="e")


def one_stopping(rng, tables: int, lo: int, hi: int, spread: float = 1.0, effect: float = 0.0,
                 rules: dict | None = None) -> dict:  # fmt: skip
    """Row C4 (``spread`` x the others' sd, ``effect`` in sd: below base when negative) against base alone, at
    alpha 0.05, 19 rows of ``lo`` seeds; C4 and base get one more seed per look up to ``hi`` while undecided
    (stopped at the first decision).  {rule: (share decided on the paper's side or, with no effect, at all; mean
    seeds of C4 and base at the stop)} for the e-value rule, the p rule charged every planned look (p x looks) and
    the p rule charged nothing (looking again as if for the first time); ``rules`` ({name: Rule}) instead of
    those three."""
    rules = rules or {"e": E, "p, every look charged": Rule(looks=hi - lo + 1), "p, no charge": NEW}
    hits, seeds = dict.fromkeys(rules, 0), dict.fromkeys(rules, 0)
    shape = sim.Shape(seeds=hi, sigma={"dev_bleu": 1.0}, spread={"C4": spread})
    for _ in range(tables):
        full = sim.table(rng, shape, {"C4": effect})["dev_bleu"]
        for name, rule in rules.items():
            for n in range(lo, hi + 1):
                values = {r: v[: n if r in ("C4", "base") else lo] for r, v in full.items()}
                c = compare(values, pooled_noise(values), "C4", "<", "base", "dev_bleu", rule=rule)
                decide([c], rule)
                if c.outcome.value in (("agrees",) if effect else ("agrees", "contradicts")):
                    hits[name] += 1
                    break
            seeds[name] += n
    return {k: (hits[k] / tables, seeds[k] / tables) for k in rules}


def report_stopping(rng, tables: int, lo: int = 2, hi: int = 5) -> dict:
    """Null reports of the demo's shape, the whole printed report (dev, test, a named set, rows against base):
    every row gets one more seed per look from ``lo`` to ``hi``, stopped at the first look where anything is
    decided (the stopping rule that most favours a false decision).  {rule: [share of reports with a false decided
    comparison at lo seeds, at lo + 1 seeds, at the stop]}."""
    rules = {"e (e-BH)": E, "p (BH), no charge": NEW}
    out = {k: [0, 0, 0] for k in rules}
    for _ in range(tables):
        full = sim.table(rng, sim.Shape(seeds=hi, sets=SETS))
        for name, rule in rules.items():
            for n in range(lo, hi + 1):
                values = {r: {row: v[:n] for row, v in rows.items()} for r, rows in full.items()}
                false = sim.report_errors(rng, sim.Shape(seeds=n, sets=SETS), rule, values=values)["false"] > 0
                if n - lo < 2:
                    out[name][n - lo] += false
                if false:
                    out[name][2] += 1
                    if n - lo >= 1:
                        break
    return {k: [x / tables for x in v] for k, v in out.items()}


def adaptive_null_e(rng, sweeps: int, budget_trials: float | None = None) -> dict:
    """The real adaptive loop (sweeps.run.adaptive.seed_rounds) on e-values (the sweep's seeds.evidence: e), null
    sweeps of ``adaptive_sweep``: the share of comparisons falsely decided each alone (e >= 20) and of sweeps with any
    false decided comparison, the seven decided together by e-BH."""
    from analysis.stats.comparisons import Outcome
    from analysis.stats.verdicts import judge_table

    decided = anyf = total = 0
    for _ in range(sweeps):
        df, _ = adaptive_sweep(rng, budget_trials=budget_trials, evidence="e")
        alone = judge_table(df, ADAPTIVE_CLAIMS, Rule(evidence="e", family="claim"))
        together = judge_table(df, ADAPTIVE_CLAIMS, E)
        decided += sum(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for r in alone.claims for c in r.comparisons)
        anyf += any(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for r in together.claims for c in r.comparisons)
        total += len(ADAPTIVE_CLAIMS)
    return {"per_comparison": decided / total, "report": anyf / sweeps}


def report_loop(rng, values: dict, lo: int, hi: int, evidence: str) -> dict:
    """The real adaptive loop (sweeps.run.adaptive.seed_rounds with the real undecided_rows) over a whole simulated
    report: ``values`` is the table drawn at ``hi`` seeds ({reading: {row: seeds}}); every row starts at ``lo``
    and the loop, on dev's claims with the sweep's ``evidence`` (as a spec's ``seeds: {min, max, evidence}``),
    adds a seed to each row one more could decide, until none or ``hi``.  Returns the table as the loop left it."""

    from sweeps.run.adaptive import seed_rounds

    n = dict.fromkeys(values["dev_bleu"], lo)
    ad = {"min": lo, "max": hi, "looks": hi - lo + 1, "rounds": [], "evidence": evidence}

    def run(new, k):
        for t in new:
            n[t.row] += 1

    seed_rounds(ad, lambda: seed_frame(values, n), lambda why: [_Planned(r) for r in why if n[r] < hi], run, float,
                None, lambda: 0.0, lambda s: None)  # fmt: skip
    return {reading: {r: v[: n[r]] for r, v in rows.items()} for reading, rows in values.items()}


def seed_frame(values: dict, n: dict):
    """The trials the loop reads: each row's first ``n[row]`` seeds of ``values`` ({reading: {row: seeds}}), dev's
    two readings, as finished trials."""
    import pandas as pd

    return pd.DataFrame([{"row": r, "seed": i + 1, "status": "finished", "dev_bleu": values["dev_bleu"][r][i],
                          "dev_ce": values["dev_ce"][r][i]} for r in n for i in range(n[r])])  # fmt: skip


def report_outcome(values: dict, rule: Rule, effects: dict, noisy: str = "C4") -> dict:
    """The whole printed report of a table (dev's claims, test's and a named set's, rows against base: one family,
    as sim.report_errors judges it): any false decided comparison, one involving the row ``noisy``, real
    comparisons and those found, seeds per row."""
    from analysis.data.claims import claim_rows, table3_claims
    from analysis.stats.comparisons import Outcome
    from analysis.stats.verdicts import judge

    shape = sim.Shape(sets=SETS)
    claimed = {x for v in claim_rows(table3_claims()).values() for x in v} | {"base"}
    versus = [r for r in shape.rows if r not in claimed]
    j = judge(values, shape.claims(table3_claims()), rule, versus, versus_readings=sim.DEV)
    comps = [c for r in j.claims for c in r.comparisons] + [c for cs in j.versus.values() for c in cs]
    wrong = [sim.false_outcome(c, effects) for c in comps]
    real = [c for c in comps if c.relation != "~" and effects.get(c.a, 0.0) != effects.get(c.b, 0.0)]
    found = [c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) and not sim.false_outcome(c, effects) for c in real]
    decided = sum(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for c in comps)
    seeds = [len(v) for v in values["dev_bleu"].values()]
    return {"false": any(wrong), "noisy": any(w for c, w in zip(comps, wrong) if noisy in (c.a, c.b)),
            "fdp": sum(wrong) / decided if decided else 0.0, "real": len(real), "found": sum(found),
            "seeds": float(np.mean(seeds))}  # fmt: skip


def report_adaptive(rng, tables: int, effects: dict | None = None, spread: float = 1.0,
                    plans: dict | None = None) -> dict:  # fmt: skip
    """Whole printed reports of the demo's shape (with test and a named set), today's default (p, fixed 3 seeds)
    beside the e-value rule at fixed seeds and through the real adaptive loop, on the same draws.  {rule: {any
    false, the noisy row C4 falsely decided, FDR, power, mean seeds a row}}."""
    effects = effects or {}
    P, cells = Rule(), {}
    plans = plans or {"p, fixed 3 (today)": (P, 3, 3), "e, fixed 3": (E, 3, 3), "e, adaptive 2-4": (E, 2, 4),
                      "e, adaptive 2-6": (E, 2, 6)}  # fmt: skip
    for _ in range(tables):
        most = max(hi for _, _, hi in plans.values())
        full = sim.table(rng, sim.Shape(seeds=most, sets=SETS, spread={"C4": spread}), effects)
        for name, (rule, lo, hi) in plans.items():
            if lo == hi:
                values = {reading: {r: v[:lo] for r, v in rows.items()} for reading, rows in full.items()}
            else:
                values = report_loop(rng, full, lo, hi, rule.evidence)
            out = report_outcome(values, rule, effects)
            acc = cells.setdefault(name, dict.fromkeys(("false", "noisy", "fdp", "real", "found", "seeds"), 0.0))
            for k, v in out.items():
                acc[k] += v
    return {name: {"any false": c["false"] / tables, "C4 false": c["noisy"] / tables, "FDR": c["fdp"] / tables,
                   "power": c["found"] / c["real"] if c["real"] else float("nan"), "seeds": c["seeds"] / tables}
            for name, c in cells.items()}  # fmt: skip


def report_adaptive_section(rng, n: int) -> None:
    """issue 44's targets measured on whole printed reports through the real adaptive loop."""
    print(f"\n### the whole printed report through the real adaptive loop (dev + test + a named set + rows "
          f"against base; the loop adds seeds on dev's claims; {n} tables each; mean seeds a row of 19)")  # fmt: skip
    mix = {r: np.sign(v) * 3.0 for r, v in MIX.items()}
    scenarios = (("null", {}, 1.0), ("C4 at 3x the others' seed sd, no effect", {}, 3.0),
                 ("7 rows at 3 sd on the paper's side", mix, 1.0))  # fmt: skip
    for label, effects, spread in scenarios:
        print(label)
        for name, c in report_adaptive(rng, n, effects, spread).items():
            cells = (f"P(>=1 false decided) {c['any false']:.3f}  C4 falsely decided {c['C4 false']:.3f}"
                     if not effects else f"FDR {c['FDR']:.3f}  power per real comparison {c['power']:.3f}")  # fmt: skip
            print(f"  {name:20s} {cells}  seeds a row {c['seeds']:.2f}")


def evalue_section(rng, n: int) -> None:
    """Rule(evidence="e") beside the p rule: the whole report under adaptive stopping, the real adaptive loop, one
    comparison (null, a 3x row, power at 3 sd) at fixed and adaptive seeds, and the report's power with real
    effects.  Report cells use ``n`` tables, one-comparison cells 4n."""
    print("\n## e-values (Rule(evidence='e'): the safe t-test designed for 3 sd, e-BH) beside p (BH)")
    print(
        f"\n### the whole printed report under the null, adaptive stopping (dev + test + a named set + rows "
        f"against base; every row one more seed per look, 2 to 5, stopped at the first decision; {n} tables)"
    )
    for name, (two, three, stop) in report_stopping(rng, n).items():
        print(f"{name:20s} P(>=1 false decided): fixed 2 seeds {two:.3f}  fixed 3 seeds {three:.3f}  "
              f"stopped at the first decision (2-5) {stop:.3f}")  # fmt: skip
    print(f"\n### the real adaptive loop under the null, e-value rule (min 2, max 5 seeds, 7 claims; {n} sweeps)")
    for b in (None, 1, 2):
        r = adaptive_null_e(rng, n, b)
        print(
            f"{'no budget' if b is None else f'budget of {b} trial(s)':18s} per comparison (each alone) "
            f"{r['per_comparison']:.4f}  sweeps with a false decided comparison (e-BH over 7) {r['report']:.3f}"
        )
    m = 4 * n
    print(f"\n### one comparison (C4 vs base alone, alpha 0.05; C4 and base get a seed per look while undecided; "
          f"{m} tables): decided share, mean seeds a row")  # fmt: skip
    for label, kw in (("null", {}), ("3x spread", {"spread": 3.0}), ("power at 3 sd", {"effect": -3.0})):
        for lo, hi in ((2, 2), (3, 3), (2, 3), (2, 5)):
            cells = {k: v for k, v in one_stopping(rng, m, lo, hi, **kw).items() if lo < hi or k != "p, no charge"}
            text = "  ".join(f"{k} {share:.3f} ({seeds:.2f} seeds)" for k, (share, seeds) in cells.items())
            print(f"{label:14s} seeds {lo}-{hi}: {text}")
    report_adaptive_section(rng, n)
    print(f"\n### real effects at 3 sd (7 rows on the paper's side; dev; {n} tables): FDR, power per real comparison")
    eff = {r: np.sign(v) * 3.0 for r, v in MIX.items()}
    for seeds in (2, 3, 5):
        cells = [f"{k} FDR {r['fdr']:.3f} power {r['power']:.3f}" for k, rule in (("e", E), ("p", NEW))
                 for r in [report_rates(rng, seeds, rule, n, eff)]]  # fmt: skip
        print(f"n={seeds} " + "  ".join(cells))


# ---------------------------------------------------------------------------------------------- a noisy row
NOISY = "D1"  # the row at 3x the others' seed sd (issue 54's audit: D-dropout-helps, on dev and on test)


def share_line(hits: int, n: int) -> str:
    """A share of n with its 95% interval (Wilson, scipy.stats.binomtest)."""
    from scipy.stats import binomtest

    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = ci.low, ci.high
    return f"{100 * hits / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({hits} of {n})"


def noisy_row_section(rng, n: int, rules: dict | None = None) -> None:
    """Whole printed reports at the report's default rule (p, BH over dev's claims, test's claims and the rows no
    claim covers against base, each table's seed noise its own: simulate.report_noise): a row at 3x the others'
    seed sd and no effect anywhere, 2 seeds a row, with the looks a sweep of seeds {min: 2, max: 3} is charged (2)
    and a fixed 2 seeds (1); on the same draws the reports with no noisy row (any false decided, 2 and 3 seeds)
    and, at 2 and 3 seeds, 7 rows at 3 sd (power per real comparison).  ``rules``: {name: (looks -> Rule,
    seed_noise.SHARE_FROM)}, each judged on the same tables: by default the report's (a row's spread shared over
    a table's readings: issue 54 item 3) beside each reading alone (SHARE_FROM 1, the rule before)."""
    rules = rules or {
        "p, BH, spread shared over a table's readings (the report's)": (
            lambda looks: Rule(looks=looks),
            seed_noise.SHARE_FROM,
        ),
        "p, BH, each reading alone (before)": (lambda looks: Rule(looks=looks), 1.0),
    }
    sets = ("test",)
    shape = sim.Shape(seeds=2, sets=sets, spread={NOISY: 3.0})
    family = sim.report_errors(np.random.default_rng(0), sim.Shape(seeds=2, sets=sets), Rule())["tested"]
    print(f"\n## {NOISY} at 3x the others' seed sd, no effect anywhere: the whole printed report (dev + test + rows "
          f"against base: {family} comparisons, p, BH at 0.05), 2 seeds a row; {n} reports")  # fmt: skip
    print(f"   {NOISY} falsely decided anywhere in the report [95% Wilson]; on dev; on test; any false decided")
    for looks in (2, 1):
        cells = {k: dict.fromkeys(("any", "dev", "sets", "report"), 0) for k in rules}
        for _ in range(n):
            values = sim.table(rng, shape)
            for name, (make, share) in rules.items():
                out = _with_share(share, sim.row_errors, rng, shape, make(looks), NOISY, values=values)
                for k in cells[name]:
                    cells[name][k] += out[k]
        for name, c in cells.items():
            print(f"looks charged {looks} ({'seeds {min: 2, max: 3}' if looks == 2 else 'fixed 2 seeds'}), {name}: "
                  f"{share_line(c['any'], n)}; dev {100 * c['dev'] / n:.1f}%; test {100 * c['sets'] / n:.1f}%; "
                  f"any {100 * c['report'] / n:.1f}%")  # fmt: skip
    m = max(n // 3, 1)
    mix = {r: np.sign(v) * 3.0 for r, v in MIX.items()}
    print(f"\n   the same family, 2 looks charged ({m} reports each): null (no noisy row): any false decided; 7 rows "
          f"at 3 sd on the paper's side: power per real comparison, any false decided")  # fmt: skip
    for seeds, effects in ((2, {}), (3, {}), (2, mix), (3, mix)):
        cells = {k: dict.fromkeys(("report", "real", "found"), 0) for k in rules}
        for _ in range(m):
            values = sim.table(rng, sim.Shape(seeds=seeds, sets=sets), effects)
            for name, (make, share) in rules.items():
                out = _with_share(share, sim.row_errors, rng, sim.Shape(seeds=seeds, sets=sets), make(2), NOISY,
                                  effects, values=values)  # fmt: skip
                for k in cells[name]:
                    cells[name][k] += out[k]
        for name, c in cells.items():
            what = f"power {c['found'] / c['real']:.3f}, " if effects else ""
            print(f"{'7 rows at 3 sd' if effects else 'null'}, {seeds} seeds, {name}: {what}any false decided "
                  f"{share_line(c['report'], m)}")  # fmt: skip


def _with_share(share: float, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with seed_noise.SHARE_FROM set to ``share`` (1: each reading's noise alone)."""
    before = seed_noise.SHARE_FROM
    seed_noise.SHARE_FROM = share
    try:
        return fn(*args, **kwargs)
    finally:
        seed_noise.SHARE_FROM = before


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evalues", action="store_true", help="only the e-value section (Rule(evidence='e'))")
    ap.add_argument("--noisy-row", action="store_true", help="only the section on a row at 3x the others' seed sd")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    n = a.tables
    t0 = time.time()
    if a.noisy_row:
        print(machine_line(f"python benchmarks/verdict_calibration.py --noisy-row --tables {n} --seed {a.seed}"))
        noisy_row_section(rng, n)
        print(f"\n{time.time() - t0:.0f} s")
        return
    if a.evalues:
        print(machine_line(f"python benchmarks/verdict_calibration.py --evalues --tables {n} --seed {a.seed}"))
        print(f"report cells: {n} tables; one-comparison cells: {4 * n}; demo shape: {len(sim.DEMO_ROWS)} rows")
        evalue_section(rng, n)
        print(f"\n{time.time() - t0:.0f} s")
        return
    print(machine_line(f"python benchmarks/verdict_calibration.py --tables {n} --seed {a.seed}"))
    print(f"tables per cell: {n}; demo shape: {len(sim.DEMO_ROWS)} rows, sigma {sim.DEMO_SIGMA}, rho {sim.DEMO_RHO}")
    _null_section(rng, n)
    _mix_section(rng, n)
    print(f"\n## one comparison against base at alpha 0.05 (decided share; {n} tables)")
    for seeds in (2, 3):
        for var in ("moderated", "pooled"):
            cells = [f"{lab} {sim.one_comparison(rng, seeds, var, n, **kw):.3f}" for lab, kw in (
                ("null", {}), ("2x", {"spread": 2.0}), ("3x", {"spread": 3.0}), ("5x", {"spread": 5.0}),
                ("t(3)", {"tails": "t3"}), ("power 3sd", {"effect": -3.0}))]  # fmt: skip
            print(f"n={seeds} {var:9s} " + "  ".join(cells))
        print(f"n={seeds} moderated power 3sd with another row's seeds identical: {zero_row_power(rng, seeds, n):.3f}")
    print(f"\n## power at the printed 'detectable' difference (nominal 80%; {n} tables)")
    for seeds in (2, 3):
        cells = []
        for lab, rule in (("1 look", NEW), ("10 looks, threshold alpha/30", Rule(looks=10, cutoff=0.05 / 30))):
            d, power = detectable_power(rng, seeds, rule, n)
            cells.append(f"{lab}: {d:.2f} sd, power {power:.3f}")
        print(f"n={seeds} " + "; ".join(cells))
    print(f"\n## unstable flag per comparison (new: estimate outside the final interval; previous: the verdict "
          f"changed; {n} tables)")  # fmt: skip
    for seeds in (2, 3):
        const = unstable_rates(rng, seeds, n, 2.0 * np.sqrt(2 / seeds) + 0.1, 2.0 * np.sqrt(2 / seeds) + 0.1)
        flip = unstable_rates(rng, seeds, n, 2.5, -2.5)
        print(f"n={seeds} constant effect ~50% power: new {const[0]:.3f} previous {const[1]:.3f}; "
              f"reversing +2.5 -> -2.5 sd: new {flip[0]:.3f} previous {flip[1]:.3f}")  # fmt: skip
    _adaptive_section(rng, n)
    print("\n## the frontier: a row's variance inflated to k x its own, recalibrated to 5% for ordinary rows")
    for seeds in (2, 3):
        cells = [f"k={k:g}: 3x {r['3x']:.3f} power {r['power3']:.3f}" for k in (1, 4, 16)
                 for r in [frontier(rng, seeds, k)]]  # fmt: skip
        print(f"n={seeds} " + "; ".join(cells))
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

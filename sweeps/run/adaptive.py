"""Adaptive seeds: compute goes where a claim's verdict is still undecided.

``seeds: {min: m, max: M}`` in a spec: every row first runs seeds 1..m; then, in rounds, one more seed
is added to each row of a claim comparison that is within noise and that one more seed could decide
(analysis.stats.adaptive_seeds.undecided_rows).  At most M - m rounds, so a comparison is looked at no more than
L = M - m + 1 times, and every look during the loop tests at alpha / L.  The loop stops when nothing is
undecided, at M, or when the wall-clock budget would be exceeded by the next round (estimated from measured
trial times).  The report charges every planned look (alpha / L: Bonferroni over the sequence, valid however
the loop stopped) once the loop has looked, a budget stop included: the next round's cost is the number of
rows still undecided, so the data choose that stop too (analysis.stats.rule.charged_looks; charging only the
looks taken would not keep alpha, docs/verdicts.md); a session
interrupted, or out of budget, during the minimum seeds, before the loop's first look, is charged that one
look.  The budget
bounds the minimum seeds too: when it runs out there, Tune stops the running trials (they keep their
checkpoints) and the rows left incomplete say so in the report; a larger ``--budget`` with ``--resume`` goes
on.  The budget counts every session of the sweep (sweep.json's ``spent_seconds``).  Each session replaces
the stop record (``stop``, a StopReason; ``stopped``, in words; ``unreached``) of the one before it, when it starts
and when it ends; the record's module is analysis.data.adaptive_record.

Every round is a Tune run of its own (runner.run_trials); a finished trial is never dispatched again,
so ``--resume`` after a kill mid-round completes that round and goes on.
"""

from __future__ import annotations

import signal
import time
from typing import Callable, Optional

from analysis.data.adaptive_record import StopReason, new_record, record_stop
from analysis.data.claims import Claim, table3_claims
from analysis.data.collect import collect
from analysis.stats.adaptive_seeds import undecided_rows
from analysis.stats.rule import sweep_rule
from sweeps.plan.budget_plan import BudgetPlan, plan_for, run_throughput
from sweeps.plan.estimate import model_rates
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Spec, Trial, expand_row

from .interrupts import INTERRUPTS
from .runner import (
    BudgetSpent,
    SweepContext,
    SweepInterrupted,
    as_interrupted,
    close_sweep,
    fit_to_memory,
    open_sweep,
    run_trials,
    why,
)


def looks(adaptive: dict) -> int:
    return adaptive["max"] - adaptive["min"] + 1


def next_trials(ctx: SweepContext, why: dict[str, str]) -> list[Trial]:
    """One more seed for each row in ``why``: the next seed after the highest the row has planned."""
    profile = get_profile(ctx.profile_name)
    planned: dict[str, list[int]] = {}
    for t in ctx.planned():
        planned.setdefault(t.row, []).append(t.seed)
    out = []
    for row in why:
        if row not in planned or len(planned[row]) >= ctx.state["adaptive"]["max"]:  # unknown row, or at max
            continue
        out += expand_row(ctx.spec, ctx.spec.row(row), profile, [max(planned[row]) + 1])
    return out


def _collect(ctx: SweepContext):
    """The sweep's trials as a frame (a URI sweep is read from a pulled view, as the report reads it)."""
    return collect(ctx.store.view() if ctx.store else ctx.sweep_dir)


def _round_seconds(ctx: SweepContext, n: int) -> float:
    """Estimated wall time of a round of n trials from the finished trials' measured times."""
    df = _collect(ctx)
    walls = df.loc[df["status"] == "finished", "wall_seconds"]
    per = float(walls.dropna().mean()) if walls.notna().any() else 0.0
    conc = max(1, min(ctx.spec.max_concurrent, n))
    return per * -(-n // conc)


def adaptive_rounds(ctx: SweepContext, budget: Optional[float], echo: Callable[[str], None] = print) -> str:
    """Run the minimum seeds, then rounds until decided, at max, or out of budget; returns why it stopped."""
    spec = ctx.spec
    if spec.adaptive is None:
        raise TypeError(f"spec {spec.name!r} has fixed seeds: no adaptive rounds")
    ad = ctx.state.setdefault("adaptive", new_record(spec.adaptive, looks(spec.adaptive)))
    ad.setdefault("spent_seconds", 0.0)
    # the stop record is the current session's: "not recorded" until it ends (and if it is killed first, which
    # the report charges every planned look)
    started_at = time.strftime("%Y-%m-%d %H:%M")
    record_stop(ad, StopReason.NOT_RECORDED, f"not recorded: the session started {started_at} did not close")
    ctx.write_state()
    started, spent0 = time.time(), ad["spent_seconds"]
    left = None if budget is None else budget - spent0
    if budget is not None and budget - spent0 <= 0:
        return _budget_spent(ctx, budget, "before the minimum seeds were complete")
    try:  # the minimum (and a resumed round), stopped where the budget runs out
        run_trials(ctx, dispatch_order(ctx, left, echo), round_name="round-0", echo=echo, time_budget=left)
    except BudgetSpent:
        if budget is None:  # raised only under a time budget
            raise
        return _budget_spent(ctx, budget, "during the minimum seeds")
    finally:  # an interrupted or failed session's time counts too (written when the sweep closes)
        ad["spent_seconds"] = spent0 + time.time() - started
    ad.pop("unreached", None)  # an earlier session's: every claim's rows now have their minimum seeds

    def spent() -> float:
        ad["spent_seconds"] = spent0 + time.time() - started
        return ad["spent_seconds"]

    def run(new: list[Trial], k: int) -> None:
        ctx.write_state()
        try:
            run_trials(ctx, new, round_name=f"round-{k}", echo=echo)
        finally:
            spent()

    return seed_rounds(ad, lambda: _collect(ctx), lambda why: next_trials(ctx, why), run,
                       lambda n: _round_seconds(ctx, n), budget, spent, echo, ctx.spec.claims)  # fmt: skip


def seed_rounds(ad: dict, frame: Callable, next_for: Callable, run: Callable, round_seconds: Callable,
                budget: Optional[float], spent: Callable[[], float], echo: Callable[[str], None] = print,
                claims: list[Claim] | None = None) -> str:  # fmt: skip
    """The rounds after the minimum seeds: judge (frame() is the sweep's trials), add one seed to each row whose
    verdict one more seed could decide (next_for(why) gives the trials, run(trials, k) runs round k), until the
    data decide, max is reached or the next round would exceed the budget.  Records why in ad["stop"] (a
    StopReason: data, max or budget; every planned look is charged for each: analysis.stats.rule.charged_looks) and
    returns the reason in words."""
    claims = table3_claims() if claims is None else claims
    while True:
        spent()
        if len(ad["rounds"]) >= ad["max"] - ad["min"]:
            record_stop(ad, StopReason.MAX)
            return f"max seeds ({ad['max']}) reached"
        # the sweep's rule, as its report will read it (seeds.evidence): p charges every planned look, e none
        why = undecided_rows(frame(), claims, sweep_rule(ad), ad["max"])
        new = next_for(why)
        if not new:
            record_stop(ad, StopReason.DATA)
            return data_stop_words(frame(), claims, sweep_rule(ad), ad["max"])
        if budget is not None and spent() + round_seconds(len(new)) > budget:
            record_stop(ad, StopReason.BUDGET)
            return f"wall-clock budget ({budget / 60:.0f} min) would be exceeded by the next round"
        k = len(ad["rounds"]) + 1
        ad["rounds"].append({"round": k, "added": {t.row: why[t.row] for t in new}, "started": time.time()})
        echo(f"round {k}: one more seed for {', '.join(t.row for t in new)} (undecided verdicts)")
        run(new, k)


def _budget_plan(ctx: SweepContext, left: float, echo: Optional[Callable[[str], None]] = None) -> BudgetPlan:
    trials = ctx.planned()
    source = run_throughput(ctx.spec, ctx.profile_name, trials)
    if echo and source:
        echo(f"trial time estimates at {model_rates(source)} FLOP/s per trial: {source.source}")
    return plan_for(ctx.spec, trials, _collect(ctx), source, left)


def data_stop_words(df, claims: list[Claim], rule, max_seeds: int) -> str:
    """Which stop by the data it was, in words: every comparison of every claim decided, or the comparisons still
    undecided (counted, the first three named) none of which one more seed could decide (undecided_rows: at
    ``max_seeds`` a row their observed difference would stay within noise, or their rows have that many)."""
    from analysis.data.claims import as_claims
    from analysis.data.metrics import get_reading
    from analysis.stats.comparisons import Outcome
    from analysis.stats.verdicts import judge_table

    undecided = (Outcome.WITHIN_NOISE, Outcome.NO_REPLICATES, Outcome.NO_NOISE)
    judged = judge_table(df, as_claims(claims), rule).claims
    left = [f"{r.claim} ({get_reading(r.reading).label}): {c.a} vs {c.b}" for r in judged for c in r.comparisons
            if c.outcome in undecided]  # fmt: skip
    if not left:
        return "every claim decided"
    named = "; ".join(left[:3]) + ("; ..." if len(left) > 3 else "")
    return (f"no undecided comparison that one more seed could decide: {len(left)} undecided ({named}) would stay "
            f"within noise at {max_seeds} seeds a row, or their rows have them")  # fmt: skip


def dispatch_order(ctx: SweepContext, left: Optional[float], echo: Callable[[str], None] = print) -> list[Trial]:
    """The minimum seeds' trials in the order they are started: the plan's own where there is no budget or
    every trial is expected to end within it, else claim by claim (budget_order), from the plan's estimates
    corrected by the trials this sweep has measured.  Tune starts a round's trials in the order given."""
    trials = ctx.planned()
    if left is None:
        return trials
    plan = _budget_plan(ctx, left, echo)
    if plan.fits:
        return trials
    echo(f"the budget left ({left / 60:.0f} min) is not expected to finish every trial: rows run claim by claim")
    for line in plan.lines(ctx.state["adaptive"].get("spent_seconds", 0.0)):
        echo(line)
    return plan.ordered


def _record_stop(ctx: SweepContext, stop: StopReason, spent: float) -> tuple[str, str]:
    """Record a stop that left claims incomplete: ``stop`` (budget spent or interrupted) and the claims not complete,
    each with the budget (``spent`` so far, every session's) that would finish it.  Returns "N of M trials
    finished" and the "; CLAIM needs --budget B" tail of the stop's sentence."""
    ad = ctx.state["adaptive"]
    record_stop(ad, stop)
    ad["unreached"] = _budget_plan(ctx, 0.0).unreached(spent)
    done, total = ctx.finished_count()
    need = "".join(f"; {c} needs --budget {b}" for c, b in ad["unreached"].items())
    return f"{done} of {total} trials finished", need


def _budget_spent(ctx: SweepContext, budget: float, when: str) -> str:
    finished, need = _record_stop(ctx, StopReason.BUDGET_SPENT, budget)
    return (
        f"wall-clock budget ({budget / 60:.0f} min) spent {when}: {finished}; the rest are not in the table (their "
        f"rows are incomplete); a larger --budget with --resume goes on{need}"
    )


def _interrupted(ctx: SweepContext, exc: SweepInterrupted) -> str:
    """The stop record of a session ended by a signal (or by trials that ended without a result)."""
    ad = ctx.state["adaptive"]
    finished, need = _record_stop(ctx, StopReason.INTERRUPTED, ad.get("spent_seconds", 0.0))
    how = f"by {signal.Signals(exc.signum).name}" if exc.signum else f"with {exc.missing} trials ended without a result"
    during = f"round {len(ad['rounds'])}" if ad["rounds"] else "the minimum seeds"
    return f"interrupted {how} during {during}: {finished}; --resume goes on{need}"


def run_adaptive(spec: Spec, profile_name: str, out, address=None, resume=False, num_cpus=None,
                 budget: Optional[float] = None, echo: Callable[[str], None] = print,
                 verbose: bool = False) -> dict:  # fmt: skip
    """An adaptive sweep end to end (open, rounds, close), like runner.run_sweep."""
    ctx = open_sweep(spec, profile_name, out, address, resume, num_cpus)
    ctx.verbose = verbose
    ctx.spec = fit_to_memory(ctx, echo, address)  # as many trials at once as the machine's memory holds
    try:
        stopped = adaptive_rounds(ctx, budget if budget is not None else spec.budget, echo)
        ctx.state["adaptive"]["stopped"] = stopped  # its StopReason recorded where the loop stopped
        ctx.write_state()
        echo(f"adaptive seeds stopped: {stopped}")
    except (SweepInterrupted, KeyboardInterrupt) as exc:  # KeyboardInterrupt: a second signal outside a Tune run
        exc = as_interrupted(ctx, exc)
        INTERRUPTS.closing = True  # more signals are only counted while the stop is recorded
        try:
            stopped = _interrupted(ctx, exc)
        except Exception as err:  # noqa: BLE001 - the sweep must still close
            stopped = f"interrupted ({err})"
        record_stop(ctx.state["adaptive"], StopReason.INTERRUPTED, stopped)
        close_sweep(ctx, "KILLED")
        raise exc from None
    except BaseException as exc:
        ctx.state["error"] = why(exc)  # sweep.json and the report's stop line say why
        record_stop(ctx.state["adaptive"], StopReason.FAILED, f"failed: {ctx.state['error']}")
        close_sweep(ctx, "FAILED")
        raise
    close_sweep(ctx, "FINISHED")
    return ctx.summary

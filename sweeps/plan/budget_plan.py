"""The budget's plan for a sweep's trials: their time estimates, the claim-by-claim order (budget_order) and what
a budget is expected to reach, for `tsweep plan --budget`, for the dispatch of an adaptive sweep's minimum
seeds, and for the report's "not measured: budget" (with the --budget that would finish each claim).

A trial's estimate is estimate.trial_seconds of its FLOPs at a throughput (a measured step time of the base
row on this machine where one is cached, sweeps/plan/machine_bench.py), times the part of its steps still to
run (a stopped trial resumes from its newest checkpoint), corrected by the trials this sweep has measured.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Optional, Union

import pandas as pd

from analysis.data.claims import Claim, claim_rows, claims_for, table3_claims
from sweeps.spec.sweep_spec import Spec, Trial
from transformer_core import rundir
from transformer_core.errors import UserError

from . import budget_order as bo
from . import estimate

log = logging.getLogger(__name__)
# a trial's rate: FLOP/s per device, a Throughput (its measured models rate each trial), or None (not known)
Rate = Union[estimate.Throughput, float, None]
UNIT_FLOPS = 1e12  # the FLOP/s that sets the cost scale where no throughput is known: the order is the same


def trial_estimates(spec: Spec, trials: list[Trial], rate: Rate) -> dict[str, float]:
    """{trial id: estimated seconds} of whole trials (evaluation included, estimate.trial_seconds, with the
    split sizes of each trial's corpus) at ``rate``: FLOP/s per device, or a Throughput whose measured models
    rate each trial by its model (estimate.rate_for)."""
    devices = estimate.devices_per_trial(spec.resources)
    out = {}
    for t in trials:
        cfg = t.config
        params, flops = estimate.trial_flops(cfg)
        fps = estimate.rate_for(rate, cfg, params)[0] if isinstance(rate, estimate.Throughput) else rate
        out[t.trial_id] = estimate.trial_seconds(flops, cfg.train, (fps or UNIT_FLOPS) * devices, cfg.data)
    return out


def measured_seconds(df: pd.DataFrame) -> dict[str, float]:
    """{trial id: seconds} of the finished trials: their training and evaluation, or the session where longer."""
    out = {}
    for _, r in df[df["status"] == rundir.Status.FINISHED].iterrows():
        s = max((float(r.get(k) or 0) for k in ("wall_seconds", "session_seconds") if r.get(k) == r.get(k)), default=0)
        if s > 0:
            out[r["trial_id"]] = s
    return out


def left_fraction(df: pd.DataFrame, trials: list[Trial]) -> dict[str, float]:
    """{trial id: part of its steps still to run}: 0 when done, from its newest checkpoint when stopped."""
    rows = {r["trial_id"]: r for _, r in df.iterrows()} if len(df) else {}
    out = {}
    for t in trials:
        r = rows.get(t.trial_id)
        if r is not None and r["status"] in rundir.DONE:
            out[t.trial_id] = 0.0
            continue
        ckpts = rundir.checkpoints(Path(r["workdir"])) if r is not None else []
        done = rundir.checkpoint_step(ckpts[-1]) if ckpts else 0
        out[t.trial_id] = max(0.0, 1.0 - done / max(1, int(t.values.get("steps") or 1)))
    return out


def sweep_claims(trials: list[Trial], claims: list[Claim] | None = None) -> dict[str, list[str]]:
    """{claim: rows} of the claims (the spec's) that a sweep of these trials judges (those its task can judge)."""
    claims = table3_claims() if claims is None else claims
    task = str(trials[0].values.get("task", "translation")) if trials else "translation"
    return claim_rows(claims_for(task, claims)[0])


class BudgetPlan:
    """The claim order of ``trials`` with their remaining estimated seconds (``left`` of each, corrected by
    the measured ones), and what ``slots`` parallel slots reach in ``budget_left`` seconds."""

    def __init__(self, trials: list[Trial], seconds: dict[str, float], slots: int, budget_left: float,
                 claims: list[Claim] | None = None):  # fmt: skip
        claims = table3_claims() if claims is None else claims
        self.trials, self.seconds, self.slots = trials, seconds, slots
        self.claims = sweep_claims(trials, claims)
        rows = list(dict.fromkeys(t.row for t in trials))
        cost = {r: sum(seconds[t.trial_id] for t in trials if t.row == r) for r in rows}
        self.steps = bo.order_claims(self.claims, cost)
        position = {r: i for i, r in enumerate(bo.row_order(self.steps, rows))}
        self.ordered = sorted(trials, key=lambda t: (position[t.row], t.seed))
        todo = [(t.trial_id, t.row, seconds[t.trial_id]) for t in self.ordered if seconds[t.trial_id] > 0]
        self.projection = bo.project(self.steps, self.claims, todo, slots, budget_left)
        paper = [(t.trial_id, seconds[t.trial_id]) for t in trials if seconds[t.trial_id] > 0]
        self.paper_order_seconds = max(bo.schedule(paper, slots).values(), default=0.0)
        self.budget_left = budget_left
        self.timed = True  # False: the costs are FLOPs at an assumed rate (no throughput, nothing measured)

    @property
    def fits(self) -> bool:
        """Whether every trial, in the plan's own order, ends within the budget (unknown without times: no)."""
        return self.timed and self.paper_order_seconds <= self.budget_left

    def lines(self, spent: float = 0.0) -> list[str]:
        """What the budget decides, claim by claim, in words (times from the sweep's start, ``spent`` before)."""
        p, words = self.projection, bo.budget_words
        if not self.timed:
            return [f"claims in the order the budget runs them: {'; '.join(', '.join(s.claims) for s in self.steps)}"
                    " (no throughput known, so no times)"]  # fmt: skip
        out = [f"claims in the order the budget runs them ({self.slots} trial(s) at once), each complete by:"]
        for s in self.steps:
            when = max((p.rows.get(r, 0.0) for c in s.claims for r in self.claims[c]), default=0.0) + spent
            mark = "" if when - spent <= p.left else "   beyond the budget"
            rows = ", ".join(s.rows) if s.rows else "none left to run"
            out.append(f"  {_minutes(when):>8}  {', '.join(s.claims)} (rows {rows}){mark}")
        total = len(p.decided) + len(p.unreached)
        out.append(f"expected to decide {len(p.decided)} of {total} claims within the budget ({words(spent + p.left)})")
        if p.rows_not_reached:
            needed = max([spent + t for t in p.rows.values()], default=spent)
            out.append(
                f"rows it will not reach: {', '.join(p.rows_not_reached)}; the whole plan in this order needs"
                f" --budget {words(needed)} (make demo DEMO_BUDGET={words(needed)})"
            )
        return out

    def unreached(self, spent: float) -> dict[str, str]:
        """{claim: the budget (every session's, ``spent`` so far) expected to finish it} for the claims not
        complete within the budget left."""
        need = (lambda t: bo.budget_words(spent + t)) if self.timed else (lambda t: "unknown (no throughput known)")
        return {c: need(t) for c, t in self.projection.unreached.items()}


def _minutes(seconds: float) -> str:
    return "now" if seconds <= 0 else f"{seconds / 60:.0f} min"


def plan_for(spec: Spec, trials: list[Trial], df: Optional[pd.DataFrame], rate: Rate,
             budget_left: float) -> BudgetPlan:  # fmt: skip
    """The BudgetPlan of ``trials`` given what the sweep's frame ``df`` (None: nothing run yet) has measured, at
    ``rate`` (trial_estimates)."""
    est = trial_estimates(spec, trials, rate)
    if df is not None and len(df):
        est = bo.corrected_seconds(est, measured_seconds(df), {t.trial_id: t.row for t in trials})
        left = left_fraction(df, trials)
        est = {tid: s * left[tid] for tid, s in est.items()}
    slots = max(1, spec.max_concurrent)
    plan = BudgetPlan(trials, est, slots, budget_left if budget_left is not None else math.inf, spec.claims)
    plan.timed = rate is not None or bool(df is not None and len(df) and measured_seconds(df))
    return plan


def run_throughput(spec: Spec, profile: str, trials: list[Trial]) -> Optional[estimate.Throughput]:
    """The throughput a sweep's dispatch plans with: budget_source's (this machine's step time of the base row,
    cached or measured now), else None where it has none or cannot measure (the order needs only relative
    costs; its times are then in FLOPs, not minutes)."""
    from transformer_core.data import default_data_dir

    try:
        return budget_source(spec, profile, trials, default_data_dir())
    except UserError as exc:  # an unreadable measurement file, a measurement that failed
        log.warning("%s; the budget's order is planned from FLOPs alone", exc)
        return None


def budget_source(spec: Spec, profile: str, trials: list[Trial], data_dir, device_flops=None, device=None,
                  mfu=estimate.DEFAULT_MFU, remeasure=False) -> Optional[estimate.Throughput]:  # fmt: skip
    """The throughput `tsweep plan --budget` plans with: --device-flops or --gpu where given, else the base
    row's step time on this machine (cached, or measured now where the profile runs here: a CPU profile, or
    any with a CUDA device; ``remeasure``: measured again, as when the machine was busy), else the stored figures
    of estimate.resolve_throughput."""
    import torch

    from .machine_bench import step_throughput

    if device_flops is not None or device:
        return estimate.resolve_throughput(profile, device_flops, device, mfu, data_dir)
    base = next((t for t in trials if t.row == "base"), trials[0] if trials else None)
    here = base is not None and (torch.cuda.is_available() or bool(base.values.get("threads")))
    found = step_throughput(spec, profile, base.values, data_dir, remeasure=remeasure) if base and here else None
    return found or estimate.resolve_throughput(profile, data_dir=data_dir)


def budget_lines(spec: Spec, trials: list[Trial], source: Optional[estimate.Throughput], budget: float) -> list[str]:
    """`tsweep plan --budget`: what the budget is expected to decide on this machine, before anything runs."""
    if source is None:
        return ["no time estimate, so no budget plan: give --device-flops F or --gpu NAME"]
    plan = plan_for(spec, trials, None, source, budget)
    head = f"budget {bo.budget_words(budget)}: "
    if plan.fits:
        return [head + f"every trial is expected to end within it ({_minutes(plan.paper_order_seconds)}), plan order"]
    return [head + "not every trial is expected to end within it, so rows run claim by claim", *plan.lines()]

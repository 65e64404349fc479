"""Confirmation of a search's winner (``search.confirm: {top: k, seeds: n}``): after the search, the k best
configurations (by the mean of the first objective over their search seeds) run again with n fresh seeds, as one
grid round of the same sweep (group confirm, their sample's label as the row).  The search report judges them
(analysis.stats.search_verdicts): the winner against the best of the rest, beyond seed noise or not, and its confirmed
mean beside the search's optimistic maximum.

The fresh seeds follow the search's own (seeds: [1] gives 2..n+1), shared by the confirmed configurations, so
seed k of each sees the same data order.  A resumed sweep plans the same round again: the configurations chosen
and the trials that already have a result are not run again.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from analysis.data.collect import collect
from analysis.data.samples import sample_label
from analysis.report.search_report import objectives
from analysis.stats.search import configurations, search_trials
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Confirm, Scheduler, Spec, Trial, sample_trials
from sweeps.state.live import knob_text
from sweeps.state.records import Summary
from sweeps.state.search_state import fits, space_distributions

ROUND = "confirm"


def _confirm(spec: Spec) -> Confirm:
    """search.confirm, for the code of the confirmation round (which runs only where the spec has one)."""
    confirm = spec.searched().confirm
    if confirm is None:
        raise TypeError(f"spec {spec.name!r} has no search.confirm")
    return confirm


def fresh_seeds(spec: Spec) -> list[int]:
    n = _confirm(spec).seeds
    return list(range(max(spec.seeds) + 1, max(spec.seeds) + 1 + n))


def best_samples(spec: Spec, sweep_dir, state: dict) -> list[dict]:
    """The sampled knobs of the ``top`` configurations with a score, best first."""
    space = space_distributions(spec)

    def point(x) -> bool:
        return isinstance(x, dict) and set(x) == set(space) and all(fits(space[k], v) for k, v in x.items())

    # the searcher's own trials (a confirmation trial has no sampled values), at points of the spec's space: a
    # trial.json edited or planted in trials/ does not choose what the confirmation round trains
    searched = search_trials(collect(sweep_dir))
    searched = searched[searched["sampled"].map(point)]
    if not len(searched):
        return []
    configs = configurations(searched, objectives(state)).dropna(subset=["rank"]).sort_values("rank", kind="stable")
    sampled = searched.drop_duplicates("sample").set_index("sample")["sampled"]
    return [sampled[s] for s in configs["sample"].head(_confirm(spec).top)]


def confirm_trials(spec: Spec, profile_name: str, sweep_dir, state: dict) -> list[Trial]:
    """The confirmation round's trials: the best configurations at the fresh seeds (none without confirm)."""
    if not (spec.search and spec.search.confirm):
        return []
    profile, seeds = get_profile(profile_name), fresh_seeds(spec)
    return [t for s in best_samples(spec, sweep_dir, state) for t in sample_trials(spec, profile, s, seeds, "confirm")]


def run_confirmation(ctx, run_trials: Callable[..., Summary], echo: Callable[[str], None] = print) -> Summary:
    """The confirmation round of an open search sweep (runner.SweepContext), through the runner's ``run_trials``
    as a grid round; returns its summary (empty when the spec asks for none or nothing finished)."""
    trials = confirm_trials(ctx.spec, ctx.profile_name, ctx.sweep_dir, ctx.state)
    if not trials:
        return {}
    top = len({t.row for t in trials})
    named = {sample_label(s): s for s in best_samples(ctx.spec, ctx.sweep_dir, ctx.state)}
    which = "; ".join(
        f"{row} ({knob_text(named[row])})" if row in named else row for row in dict.fromkeys(t.row for t in trials)
    )
    echo(f"confirming the {top} best configurations with fresh seeds {fresh_seeds(ctx.spec)}: {len(trials)} trials: "
         f"{which}")  # fmt: skip
    # a grid round of the same sweep (its state, plan and summary), every trial to its full budget: no scheduler
    grid = dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, search=None, scheduler=Scheduler()))
    return run_trials(grid, trials, round_name=ROUND, echo=echo)

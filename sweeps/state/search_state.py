"""What a search sweep's next Tune run must do, rebuilt from data: the Optuna study in the sweep's optuna.db
(SQLite, no pickles), the trials' result.json and tune_summary.json.

Tune's own ``Tuner.restore`` would unpickle ``tune/tuner.pkl`` and the searcher's state from the sweep
location, so anyone who can write there could run code as the user.  A resumed search instead starts a fresh
Tune run whose OptunaSearch re-opens the study by name (``load_if_exists``), so that the sampler sees every
earlier trial:

- every trial the study holds whose sweep trial (its sampled knobs, expanded like a row) has a finished or
  diverged result, or that the scheduler stopped early, is done and is not sampled again;
- every other one (interrupted, failed, or its result.json lost) is enqueued again with the same knobs, so
  it runs in its own workdir and resumes from its checkpoint; a trial the study left RUNNING (its driver was
  stopped) is told FAIL first, so the study does not wait on it;
- the rest of ``search.samples`` are new samples, drawn with the spec's seed plus the number of trials the study
  holds (a resumed sampler must not repeat the first session's draws).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from analysis.data.study_file import StudyFileError, read_study
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Spec, Trial, sample_trials, search_trial
from transformer_core.errors import UserError

from .records import Summary, TrialResult

log = logging.getLogger(__name__)
DB = "optuna.db"
WARM_START = "warm_start"  # the user attribute of a study trial taken from an earlier sweep (warm_start.py)


@dataclass
class SearchPlan:
    """One Tune run of a search: ``points`` enqueued first, ``samples`` Tune trials in all, the sampler's seed."""

    samples: int
    seed: int
    points: list[dict] = field(default_factory=list)
    done: set[str] = field(default_factory=set)  # sweep trial ids with a result (or stopped early) before the run
    queued: int = 0  # points the study holds enqueued from an earlier run (asked before anything new)


def storage_url(sweep_dir: Path) -> str:
    return f"sqlite:///{Path(sweep_dir) / DB}"


def space_distributions(spec: Spec) -> dict:
    """The spec's search space as the Optuna distributions OptunaSearch gives the study (tune_adapter's
    domains, converted as OptunaSearch converts them), without importing Ray."""
    from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, BaseDistribution] = {}
    for key, d in spec.searched().space.items():
        if d["type"] == "choice":
            out[key] = CategoricalDistribution(d["values"])
        elif d["type"] == "int":
            out[key] = IntDistribution(d["low"], d["high"])
        else:
            out[key] = FloatDistribution(d["low"], d["high"], log=d["type"] == "loguniform")
    return out


def fits(dist, value) -> bool:
    """Whether ``value`` is a point of ``dist`` (a choice among its choices, a number within its range)."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    return isinstance(value, (int, float)) and not isinstance(value, bool) and dist.low <= value <= dist.high


def _describe(dist) -> str:
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if dist is None:
        return "absent"
    if isinstance(dist, CategoricalDistribution):
        return f"choice {list(dist.choices)}"
    kind = "int" if isinstance(dist, IntDistribution) else "loguniform" if dist.log else "uniform"
    return f"{kind} [{dist.low:g}, {dist.high:g}]"


def space_changes(spec: Spec, study) -> list[str]:
    """How the spec's search space differs from the one the study's trials were sampled from (``warmup: choice
    [5, 10] -> choice [5, 20]``); a point enqueued for a resume that lies outside the space is one too."""
    from optuna.trial import TrialState

    space, outside = space_distributions(spec), []
    before: dict[str, object] = {}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            params = dict(t.system_attrs.get("fixed_params") or {})
            outside += [f"{k}={v!r}" for k, v in params.items() if k not in space or not fits(space[k], v)]
        for key, dist in t.distributions.items():
            before.setdefault(key, dist)
    changes = [f"{k}: {_describe(before.get(k))} -> {_describe(space.get(k))}"
               for k in dict.fromkeys([*before, *space]) if before and before.get(k) != space.get(k)]  # fmt: skip
    if outside and not changes:
        changes.append(f"enqueued {', '.join(dict.fromkeys(outside))} lie outside it")
    return changes


def check_study(spec: Spec, sweep_dir: Path, where: Optional[str] = None) -> bool:
    """Refuse (one line) a sweep's optuna.db that is not its own Optuna study, or whose samples were drawn from
    another search space than the spec's; read on a private copy, nothing written.  Returns whether the study
    already holds a warm start's trials."""
    db = Path(sweep_dir) / DB
    if db.is_symlink():  # the study is written: never through a link (to another sweep's study, say)
        raise UserError(f"{where or sweep_dir}: optuna.db is a link (to {os.readlink(db)!r}); a sweep's study is "
                        "a regular file inside it: replace the link by the file, or remove it")  # fmt: skip
    if not db.exists():
        return False
    try:
        with read_study(db, spec.name, missing_ok=True) as study:
            changes = space_changes(spec, study) if study else []
            warm = bool(study) and any(t.user_attrs.get(WARM_START) for t in study.get_trials(deepcopy=False))
    except StudyFileError as exc:
        raise UserError(f"{exc}; restore it from a copy, or move it away to resume the search with a fresh study")
    if changes:
        shown = "; ".join(changes[:4]) + (f" and {len(changes) - 4} more" if len(changes) > 4 else "")
        raise UserError(
            f"search.space has changed since the sweep in {where or sweep_dir} sampled it ({shown}): its samples "
            "and new ones would come from two spaces; resume with the space it was run with, or give another --out"
        )
    return warm


def open_study(spec: Spec, sweep_dir: Path):
    """The sweep's study (created if there is none yet), as OptunaSearch opens it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    modes = [o["mode"] for o in spec.searched().objectives or [{"mode": spec.mode}]]  # two: multi-objective
    return optuna.create_study(
        storage=storage_url(sweep_dir),
        study_name=spec.name,
        directions=["minimize" if m == "min" else "maximize" for m in modes],
        load_if_exists=True,
    )


def sampled_trial(spec: Spec, profile_name: str, params: dict) -> Optional[Trial]:
    """The sweep trial of a study trial's knobs (None where they are not a point of this spec's space)."""
    keys = tuple(spec.searched().space)
    if set(params) != set(keys):
        return None
    try:
        return search_trial(spec, get_profile(profile_name), {k: params[k] for k in keys})
    except Exception as exc:  # a study edited by hand, or a space changed since: not a trial of this sweep
        log.warning("study trial with knobs %s is not a trial of this search: %s", params, exc)
        return None


def plan_search(spec: Spec, profile_name: str, sweep_dir: Path, result: Callable[[str, str], Optional[TrialResult]],
                summary: Summary) -> SearchPlan:  # fmt: skip
    """The next run of the search at ``sweep_dir``: ``result(trial_id, config_hash)`` says whether a trial is
    done, ``summary`` (tune_summary.json) which ones a scheduler stopped."""
    from optuna.trial import TrialState

    check_study(spec, sweep_dir)  # no Tune run writes it now: a study file of this sweep and this space
    study = open_study(spec, sweep_dir)
    trials = study.get_trials(deepcopy=False)
    done: set[str] = set()
    todo: dict[str, dict] = {}
    queued: set[str] = set()
    for t in trials:
        params = t.params if t.state != TrialState.WAITING else dict(t.system_attrs.get("fixed_params") or {})
        trial = None if t.user_attrs.get(WARM_START) else sampled_trial(spec, profile_name, params)
        if trial is None:  # not a point of this space, or an earlier sweep's (warm start): nothing to run
            continue
        tid = trial.trial_id
        seeds = sample_trials(spec, get_profile(profile_name), {k: params[k] for k in spec.searched().space})
        if t.state == TrialState.WAITING:  # enqueued by an earlier run, never asked: it is asked first
            queued.add(tid)
        elif all(result(x.trial_id, x.config_hash) for x in seeds) or (summary.get(tid) or {}).get("stopped_early"):
            done.add(tid)
        else:
            todo.setdefault(tid, {k: params[k] for k in spec.searched().space})
        if t.state == TrialState.RUNNING:  # its driver stopped without telling the study
            study.tell(t.number, state=TrialState.FAIL)
    left = max(0, spec.searched().samples - len(done))
    points = [p for tid, p in todo.items() if tid not in done and tid not in queued][: max(0, left - len(queued))]
    return SearchPlan(left, spec.searched().seed + len(trials), points, done, len(queued - done))


def search_trials(spec: Spec, profile_name: str, sweep_dir: Path) -> dict[str, Trial]:
    """Every sweep trial the study has sampled so far, by trial id."""
    if not (Path(sweep_dir) / DB).exists():
        return {}
    out = {}
    for t in open_study(spec, sweep_dir).get_trials(deepcopy=False):
        trial = sampled_trial(spec, profile_name, t.params) if t.params and not t.user_attrs.get(WARM_START) else None
        if trial is not None:
            out[trial.trial_id] = trial
    return out


def planned_total(spec: Spec) -> int:
    """Every trial a search plans: search.samples x the spec's seeds, and search.confirm.top x search.confirm.seeds."""
    search = spec.searched()
    return search.samples * len(spec.seeds) + (search.confirm.top * search.confirm.seeds if search.confirm else 0)


def seed_trials(spec: Spec, profile_name: str, sweep_dir: Path) -> list[Trial]:
    """Every seed's trial of every configuration the study has sampled so far (search_trials: the first seed's)."""
    if not (Path(sweep_dir) / DB).exists():
        return []
    profile, keys, out = get_profile(profile_name), tuple(spec.searched().space), {}
    for t in open_study(spec, sweep_dir).get_trials(deepcopy=False):
        if t.params and not t.user_attrs.get(WARM_START) and sampled_trial(spec, profile_name, t.params) is not None:
            out.update({x.trial_id: x for x in sample_trials(spec, profile, {k: t.params[k] for k in keys})})
    return list(out.values())

"""Warm start of a search (``search.warm_start: DIR``): a new sweep's Optuna study is seeded with the finished
trials of an earlier search sweep, so that its sampler starts from what that search learnt.

The earlier trials enter the new study (optuna.db) once, before its first Tune run, as finished trials with
their knobs and objective values and the user attribute ``warm_start`` (the earlier sweep): a resumed sweep
neither adds them again nor runs them (they have no trial directory of this sweep, and the report counts only
this sweep's trials).  Only trials whose knobs are points of this spec's space are taken, and only from a
search that optimised the same objectives.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Callable, Iterator

from analysis.data.study_file import StudyFileError, read_study
from analysis.data.sweep_record import parse_record
from sweeps.spec.sweep_spec import Spec
from sweeps.state.search_state import WARM_START, fits, open_study, space_distributions
from transformer_core.errors import UserError

log = logging.getLogger(__name__)
ATTR = WARM_START  # the study trials taken from an earlier sweep


def _objectives(spec_or_state) -> list[tuple[str, str]]:
    if isinstance(spec_or_state, Spec):
        objs = spec_or_state.searched().objectives or [{"metric": spec_or_state.metric, "mode": spec_or_state.mode}]
    else:
        objs = spec_or_state.get("objectives") or [
            {"metric": spec_or_state.get("metric"), "mode": spec_or_state.get("mode")}
        ]
    return [(o["metric"], o["mode"]) for o in objs]


MAX_STATE_BYTES = 64 << 20  # a sweep.json is a few KB to a few MB


@contextlib.contextmanager
def earlier_study(source: str | Path, spec: Spec) -> Iterator:
    """The earlier sweep's study, checked: a search sweep directory with an optuna.db and the same objectives.
    It is read from a private copy (analysis.data.study_file): nothing is written into the earlier sweep."""
    src = Path(source).expanduser()
    db, state_file = src / "optuna.db", src / "sweep.json"
    if not db.is_file() or not state_file.is_file():
        raise UserError(f"search.warm_start: {str(source)!r} is not a search sweep directory (no optuna.db and "
                        "sweep.json): give the --out of an earlier `tsweep run` of a search")  # fmt: skip
    try:
        if state_file.stat().st_size > MAX_STATE_BYTES:
            raise ValueError(f"larger than {MAX_STATE_BYTES:,} bytes")
        state = parse_record(state_file.read_text(encoding="utf-8"), repr(str(source)))  # the one reader
        _objectives(state)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, UserError):
        raise UserError(f"search.warm_start: {str(state_file)!r} is unreadable or not a search's state") from None
    if _objectives(state) != _objectives(spec):
        raise UserError(f"search.warm_start: {str(source)!r} optimised {_objectives(state)}, this search "
                        f"{_objectives(spec)}: a warm start needs the same objectives")  # fmt: skip
    name = state.name
    try:
        with read_study(db, name) as study:
            yield study
    except StudyFileError as exc:
        raise UserError(f"search.warm_start: {exc}: give the --out of an earlier search sweep") from None


def distributions(spec: Spec) -> dict:
    """This spec's search space as the Optuna distributions OptunaSearch gives it."""
    return space_distributions(spec)


def warm_start(spec: Spec, study, source: str | Path) -> int:
    """Add the earlier search's finished trials that fit this space to ``study`` (once); returns how many."""
    import optuna
    from optuna.trial import TrialState

    if any(t.user_attrs.get(ATTR) for t in study.get_trials(deepcopy=False)):
        return 0  # seeded when the sweep began
    space = distributions(spec)
    added = skipped = 0
    with earlier_study(source, spec) as earlier:
        finished = earlier.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    for t in finished:
        params = {k: t.params.get(k) for k in space}
        if set(t.params) != set(space) or not all(fits(space[k], v) for k, v in params.items()):
            skipped += 1
            continue
        study.add_trial(optuna.trial.create_trial(params=params, distributions=space, values=t.values,
                                                  user_attrs={ATTR: str(source)}))  # fmt: skip
        added += 1
    log.info("warm start from %s: %d finished trials added, %d outside this space left out", source, added, skipped)
    return added


def check_source(spec: Spec) -> None:
    """Before anything runs: the spec's ``search.warm_start`` is an earlier search sweep this one can start from
    (one line where it is not)."""
    source = spec.search.warm_start if spec.search else None
    if source:
        with earlier_study(source, spec):
            pass


def start_from_earlier(spec: Spec, sweep_dir: Path, echo: Callable[[str], None] = print) -> None:
    """Before a search's first Tune run: its study seeded from ``search.warm_start`` when the spec names one."""
    source = spec.search.warm_start if spec.search else None
    if source:
        added = warm_start(spec, open_study(spec, sweep_dir), source)
        if added:
            echo(f"warm start: {added} finished trials of {source} seed the study")

"""A sweep directory's state and where a sweep may write: what ``tsweep run`` checks before it writes anything.

- ``read_state`` / ``read_sweep_state``: sweep.json typed (analysis.data.sweep_record), or one line saying why
  it cannot be read.
- ``check_state``: whether the sweep at --out may be (re)run by this spec and profile, and at the same budget.
- ``locate``, ``check_out_dir``, ``check_uri_out``: the --out location, refused where it holds something else.
- ``check_inside``: every path a sweep writes stays inside its directory (names: ``transformer_core.rundir.SAFE_NAME``).

State files (sweep.json, tune_summary.json, trial.json) are written with ``transformer_core.rundir.write_json``
(temp file, fsync, rename): a full disk or a kill leaves the previous version, never a truncated one.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Optional

from analysis.data.sweep_record import SweepState, parse_record, read_record, unreadable
from sweeps.spec.profiles import same_profile
from transformer_core.errors import UserError
from transformer_core.run_config import RUN_ONLY, DataConfig, TrainConfig

from .storage import Storage, open_storage

LOCK_NAME = "sweep.lock"  # the driver's lock file (sweeps.state.lock), the one file an --out may hold besides a sweep
DRIVER_FILES = ("sweep.json", "tune_summary.json", "mlflow.db", "optuna.db", "driver.log", LOCK_NAME)
_OUT_ALLOWED = "allowed a new or empty directory, or the directory of an earlier run of this spec"


def read_state(store: Optional[Storage], sweep_dir: Path, where: str) -> Optional[SweepState]:
    """sweep.json of the sweep, typed and checked (analysis.data.sweep_record; None where there is none); one line
    when it cannot be read."""
    if not store:
        return read_record(sweep_dir, where)
    try:
        text = store.read_text("sweep.json") if store.exists("sweep.json") else None
    except OSError as exc:
        raise unreadable(where, exc) from None
    return None if text is None else parse_record(text, where)


def read_sweep_state(location: str | Path) -> SweepState:
    """sweep.json of a sweep directory or URI, or one line saying why it cannot be read."""
    store = open_storage(str(location))
    state = read_state(store, Path(location), str(location))
    if state is None:
        raise UserError(f"{str(location)!r} is not a sweep directory (no sweep.json): give the --out of 'tsweep run'")
    return state


def check_state(
    record: Optional[SweepState], name: str, profile: str, resume: bool, where: str, rules: Optional[dict] = None
) -> dict:
    """The state of the sweep at --out as sweep.json holds it, if it may be (re)run by this spec and profile
    (``{}``: a new sweep): the record a resumed session starts from.
    ``rules``: the profile's rules now; a sweep planned under other rules of the same profile (the profile was
    recalibrated since) is refused, since its trials and the new ones would be measured at two budgets."""
    if record is None:
        if resume:
            raise UserError(f"nothing to resume in {where}: it holds no sweep.json (start it without --resume)")
        return {}
    state = record.raw
    if state["name"] != name:
        raise UserError(f"--out {where} holds sweep {state['name']!r}, not {name!r}: give another --out")
    if not resume:
        raise UserError(
            f"{where} already holds sweep {state['name']!r}: resume it with --resume, or give another --out"
        )
    if not same_profile(state.get("profile"), profile):  # an alias and the profile's own name are one profile
        raise UserError(
            f"{where} was run with profile {state.get('profile')!r}, not {profile!r}: resume with the same profile"
        )
    before = state.get("profile_rules")
    if rules is not None and before is not None:
        changed = _changed_rules(_measured_rules(before), _measured_rules(rules))
        if changed:
            raise UserError(
                f"{where} was planned with profile {profile!r} as it was then, and the profile has changed since "
                f"({changed}): its trials and new ones would be measured at two budgets; give another --out "
                "(or move this one away), or resume it with the code that planned it"
            )
    if state.get("adaptive"):  # the loop goes on from it: a damaged record is one line now, before Ray starts
        record.adaptive  # noqa: B018 - read for its check
    return state


def seed_record(seeds: list, adaptive: Optional[dict]) -> dict:
    """What sweep.json's ``seed_plan`` keeps of the spec's seeds: its adaptive {min, max, evidence}, else its list."""
    return {"adaptive": dict(adaptive)} if adaptive else {"seeds": list(seeds)}


def _seeds_text(record: dict) -> str:
    ad = record.get("adaptive")
    if isinstance(ad, dict):
        return "{" + ", ".join(f"{k}: {ad[k]}" for k in ("min", "max", "evidence") if k in ad) + "}"
    return str(record.get("seeds"))


def check_seeds(state: dict, seeds: list, adaptive: Optional[dict], where: str) -> None:
    """Refuse, in one line, a resume whose spec changes the seeds the sweep was run with (recorded in ``seed_plan``;
    a sweep recorded before that by its adaptive record's min, max and evidence): a resume keeps its plan, so the
    change would be silently ignored."""
    now = seed_record(seeds, adaptive)
    before = state.get("seed_plan")
    if not isinstance(before, dict) and isinstance(state.get("adaptive"), dict):
        ad = state["adaptive"]
        before = {"adaptive": {k: ad[k] for k in ("min", "max", "evidence") if k in ad}}
    if isinstance(before, dict) and before != now:
        raise UserError(f"{where} was run with seeds {_seeds_text(before)}, not {_seeds_text(now)}: a resume keeps "
                        "the seeds it was planned with; resume with those, or give another --out")  # fmt: skip


def _measured_rules(rules: dict) -> dict:
    """What of a profile's rules decides what its trials measure: not run-only settings (threads), not the
    wording of an exclusion, and a recipe or data setting at its default the same as one left out (a key
    added to the profiles later, such as beam_stop, does not refuse sweeps planned before it)."""

    def kept(values: Optional[dict], cls) -> dict:
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        return {
            k: v for k, v in (values or {}).items() if k not in RUN_ONLY and not (k in defaults and v == defaults[k])
        }

    out = {k: rules.get(k) for k in ("width", "depth_divisor", "steps_factor")}
    out["train"] = kept(rules.get("train"), TrainConfig)
    out["data"] = kept(rules.get("data"), DataConfig)
    out["exclude"] = sorted(rules.get("exclude") or {})
    return json.loads(json.dumps(out))  # as sweep.json holds it: tuples as lists


def _changed_rules(before: dict, now: dict) -> str:
    """'steps_factor 0.006 -> 0.024, train.tokens_per_batch 2048 -> 512' (at most four, then a count); '' if none."""

    def walk(a: dict, b: dict, prefix: str) -> list[str]:
        out = []
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if isinstance(x, dict) and isinstance(y, dict):
                out += walk(x, y, f"{prefix}{key}.")
            elif x != y:
                out.append(f"{prefix}{key} {json.dumps(x)} -> {json.dumps(y)}")
        return out

    out = walk(before, now, "")
    return ", ".join(out[:4]) + (f" and {len(out) - 4} more" if len(out) > 4 else "")


def check_uri_out(store: Storage, where: str) -> None:
    """check_out_dir for a URI: refuse a non-empty location that holds no sweep."""
    from pyarrow import fs

    try:
        infos = store.fs.get_file_info(fs.FileSelector(store.root, allow_not_found=True))
    except OSError:
        return  # check_writable says what is wrong with the location
    names = {i.path.rstrip("/").rsplit("/", 1)[-1] for i in infos}
    if names - {LOCK_NAME} and "sweep.json" not in names:
        raise UserError(
            f"--out {where} is not empty and holds no sweep (no sweep.json): allowed a new or empty location, "
            "or the location of an earlier run of this spec"
        )


def locate(sweep_dir: str | Path, address: Optional[str], tracking_uri: Optional[str]) -> tuple:
    """(Storage or None, the location as messages name it, the driver's own directory), all checked; writes nothing."""
    store = open_storage(str(sweep_dir))
    if store and address and not tracking_uri:
        raise UserError(
            "a sweep stored at a URI on a cluster needs an MLflow server every node reaches: set "
            "tracking.uri in the spec (the default SQLite file would live on this machine only)"
        )
    if store:  # a URI: the driver's own files live in local scratch and are pushed there
        check_uri_out(store, store.uri)
        return store, store.uri, store.scratch / "driver"
    path = Path(sweep_dir).resolve()
    check_out_dir(path, str(sweep_dir))
    return None, str(path), path


def check_out_dir(path: Path, where: str) -> None:
    """Refuse an --out that is a file, the filesystem root, or a non-empty directory holding no sweep."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--out {where} is an existing file: {_OUT_ALLOWED}")
    if path == Path(path.anchor):
        raise UserError(f"--out {where} is the filesystem root: {_OUT_ALLOWED}")
    if path.is_dir() and not (path / "sweep.json").exists():
        if any(p.name != LOCK_NAME for p in path.iterdir()):
            raise UserError(
                f"--out {where} is a non-empty directory that holds no sweep (no sweep.json): {_OUT_ALLOWED}"
            )
    for name in DRIVER_FILES:  # the driver writes these: a link would carry its writes to another sweep's file
        if (path / name).exists() and not (path / name).is_symlink() and not (path / name).is_file():
            raise UserError(f"--out {where}: {name} is not a regular file (a FIFO, a directory, a device): "
                            "remove it, or give another --out")  # fmt: skip
        if (path / name).is_symlink():
            raise UserError(f"--out {where}: {name} is a link (to {os.readlink(path / name)!r}); a sweep's "
                            "own files are regular files inside it: replace the link by the file, or remove "
                            "it")  # fmt: skip


def check_inside(sweep_dir: str | Path, path: Path) -> Path:
    """``path`` resolved, refused unless it lies inside ``sweep_dir``."""
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(Path(sweep_dir).resolve()):
        raise UserError(f"{str(path)!r} resolves outside the sweep directory {str(sweep_dir)!r}: refused")
    return resolved

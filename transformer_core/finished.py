"""A finished run directory read without torch: its RunConfig and result, and its evaluations (evals/).

What `tsweep evaluate` and `tsweep translate` check before any model is loaded, so that a refused command line
and the driver of a sweep's evaluation do not import torch (the workers that score do)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from . import rundir
from .errors import UserError
from .run_config import RunConfig
from .rundir import Status

if TYPE_CHECKING:
    from .data.eval_set import EvalSet

log = logging.getLogger(__name__)


def eval_paths(run_dir, name: str) -> tuple[Path, Path]:
    """(evals/NAME.json, evals/NAME.hyp) of a run."""
    directory = Path(run_dir) / rundir.EVALS
    return directory / f"{name}.json", directory / f"{name}.hyp"


class RunNotUsable(UserError):
    """A run directory without a finished result, or whose checkpoints or vocabulary are gone."""

    exit_code = 2


def read_run(run_dir) -> tuple[RunConfig, dict]:
    """The RunConfig and the finished result of a run directory; one line when it has none."""
    run_dir = Path(run_dir)
    paths = {name: run_dir / name for name in (rundir.CONFIG, rundir.RESULT)}
    for name, path in paths.items():
        if not path.is_file():
            raise RunNotUsable(f"{str(run_dir)!r} is not a finished run: no {name} (give a `tsweep train` --workdir)")
    raw = {name: _read_json(path, run_dir) for name, path in paths.items()}
    try:
        config = RunConfig.from_dict(raw[rundir.CONFIG])
    except (ValueError, TypeError, KeyError) as exc:
        raise RunNotUsable(f"{str(run_dir)!r}: config.json is unreadable ({exc})") from None
    result = raw[rundir.RESULT]
    if not isinstance(result, dict):  # [] or "x": not a result, whatever it holds
        raise RunNotUsable(f"{str(run_dir)!r}: result.json is unreadable (a JSON {_json_kind(result)}, not an "
                           "object): allowed the result.json `tsweep train` writes; train the run again")  # fmt: skip
    if config.data.task == "lm":
        raise RunNotUsable(
            f"run {str(run_dir)!r} is a language model (task lm): it does not translate; its dev and test "
            "perplexity and bits per byte are in result.json"
        )
    if result.get("status") != Status.FINISHED.value or not result.get("averaged_checkpoints"):
        raise RunNotUsable(f"run {str(run_dir)!r} has not finished (status {result.get('status')!r}): nothing to use")
    return config, result


def _read_json(path: Path, run_dir: Path):
    """The JSON value of a run's file; one line naming the file where it cannot be read or is not JSON (a
    truncated file, or one nested too deeply: ``rundir.loads``)."""
    try:
        return rundir.loads(path.read_text())
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RunNotUsable(f"{str(run_dir)!r}: {path.name} is unreadable ({why})") from None


def _json_kind(value) -> str:
    """The JSON name of a decoded value's type: array, string, number, ..."""
    kinds = ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number"))
    return next((name for t, name in kinds if isinstance(value, t)), "null")


def done_evaluation(run_dir, es: EvalSet) -> Optional[dict]:
    """The run's evals/NAME.json if it scored this very set with the checkpoints that produced test BLEU."""
    path, _ = eval_paths(run_dir, es.name)
    try:
        done = rundir.loads(path.read_text())
        result = rundir.loads((Path(run_dir) / rundir.RESULT).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(done, dict) or not isinstance(result, dict):  # not a record (``[]``): scored again
        return None
    same = done.get("fingerprint") == es.fingerprint and done.get("config_hash") == result.get("config_hash")
    if same and done.get("averaged_checkpoints") == result.get("averaged_checkpoints"):
        return done
    if done.get("fingerprint") != es.fingerprint:
        log.warning(
            "%s: %s was scored on another set (fingerprint %r): scoring again",
            run_dir,
            es.name,
            done.get("fingerprint"),
        )
    return None

"""What the sweep layer reads and writes as JSON about trials and rounds, typed: a trial's result.json as the sweep
reads it (``TrialResult``), a trial's line of tune_summary.json (``SummaryEntry``) and a round's line of sweep.json
(``RoundRecord``).

TypedDicts, not dataclasses: each is a JSON object on disk, read with ``json.loads`` and written with
``write_json`` as it is (the trainer's result.json keeps every key it has, the faults the driver adds included), and
a result travels back from a Ray worker as the dict it is.  Typing them costs nothing at run time and changes no
byte; mypy checks the keys the sweep layer names and the types it reads them as.  ``total=False``: which keys a
record has depends on its task and state (a diverged trial has no test scores, a translation trial no bits per byte).
"""

from __future__ import annotations

from typing import Any, Optional, TypedDict


class TrialResult(TypedDict, total=False):
    """A trial's result.json, the keys the sweep layer reads (the trainer writes more: its hardware, timings, the
    averaged checkpoints; they pass through untouched).  The metrics are analysis.data.metrics' (a test holds the two to
    agree); ``status`` is a rundir.Status value."""

    status: str  # finished or diverged (a result), worker (a data-parallel rank > 0: rank 0 writes the result)
    config_hash: str  # the RunConfig this result is of: a result of another config is not this trial's
    task: str  # lm: a language model (no BLEU); absent: translation (before trials recorded their task)
    steps: int
    params: int
    wall_seconds: float
    train_flops: float
    dev_bleu: float
    dev_ppl: float
    dev_bpb: float
    test_bleu: float
    test_ppl: float
    test_bpb: float
    dev_chrf: float
    test_chrf: float
    faults: list[str]  # the driver's record of the trial's failed workers (sweeps.run.trial adds it)
    rank: int  # a data-parallel worker's


class SummaryEntry(TypedDict, total=False):
    """A trial's final state in tune_summary.json (``{trial id: entry}``, over all rounds of the sweep): what
    Tune said of it (tune_adapter.summarise), or of a trial not run again its result."""

    error: Optional[str]  # the trial's error in one line, None without one
    status: Optional[str]  # its result's status; None: it reported no result
    dev_bleu: Optional[float]
    reports: Optional[int]  # how many reports it made to Tune (training iterations)
    config: Optional[dict[str, Any]]  # its Tune config ({trial_index: i}, or a search's sampled knobs)
    stopped_early: bool  # a scheduler ended it before its result (only where it did)


Summary = dict[str, SummaryEntry]  # trial id -> its final state: tune_summary.json


class RoundRecord(TypedDict):
    """A round of the sweep in sweep.json's ``rounds``: its name, the Tune experiment directory it ran in (each run
    its own, never reused), when it started and how many trials (or samples) it ran."""

    name: str
    tune: str
    started: float
    trials: int

"""Evaluation sets beyond dev: test and every set `tsweep evaluate` scored, judged like dev.

For each set the report gets a Table-3 column group (BLEU and chrF per row, mean ± half-width of the 95%
interval from the seed noise pooled over the sweep's rows, as in the main table; for dev and test only chrF,
their BLEU being in the main table) and a claims table (test and the named sets; dev's is the main one): the
paper's claims (analysis.data.claims) judged by analysis.stats.verdicts on that set's readings, so a reader sees
whether a verdict holds out of domain.  Every set's claims are decided in the report's one family with dev's
claims and the rows against base (``report_rule``): the report's error rate is the whole printed report's.
A claim's dev BLEU reading becomes the set's BLEU and chrF, its dev
cross-entropy the set's cross-entropy (ln PPL, the trial's own vocabulary); '~' margins carry over from
the dev readings (chrF only where a claim states a "chrf" margin).

What is read, per finished trial: result.json (test_bleu, test_chrf, test_ppl, dev_chrf) and
evals/NAME.json (``tsweep evaluate``).  A set's readings are the frame's columns ``SET:bleu``,
``SET:chrf`` and ``SET:ce``, readings of the same names (analysis.data.metrics.get_reading makes them from
SET_METRICS when asked for: nothing is registered while a report runs).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.data.claims import MARGINED, Claim, as_claims, claim_rows, claims_for, table3_claims
from analysis.data.files import read_text
from analysis.data.metrics import SET_METRICS, for_task, set_reading, sweep_task
from analysis.data.text import printable
from analysis.stats.comparisons import seed_values
from analysis.stats.family import family_rule
from analysis.stats.rule import Rule
from analysis.stats.scale import scale_guard
from analysis.stats.seed_noise import table_noise
from analysis.stats.trajectory import regime
from analysis.stats.verdicts import Judgement, judge_table
from transformer_core.formatting import MISSING
from transformer_core.rundir import EVALS, RESULT, SAFE_NAME, Status, loads

from .tables import claim_record, claims_frame, row_order, unclaimed_rows

log = logging.getLogger(__name__)
FROM_DEV = {dev: tuple(m.name for m in SET_METRICS.values() if m.from_dev == dev)
            for dev in dict.fromkeys(m.from_dev for m in SET_METRICS.values())}  # fmt: skip  # dev reading -> set's


@dataclass
class EvalSetsReport:
    names: list[str]  # "test", then the named sets in order of first appearance
    columns: pd.DataFrame  # one line per row: "row", then "<metric> <set>" strings (mean ± CI): merge on "row"
    numbers: pd.DataFrame  # the same as numbers: "<set>:<metric>", "<set>:<metric>_ci", "<set>:n"
    claims: dict[str, pd.DataFrame] = field(default_factory=dict)  # per set, the columns of tables.judge_claims
    notes: list[str] = field(default_factory=list)  # one line per named set: origin, size, fingerprint, unseen chars


def _read(path: Path) -> dict:
    try:  # a regular file of a bounded size: a FIFO or /dev/zero planted among the sets neither blocks nor fills
        value = loads(read_text(path))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _value(x) -> float:
    """A reading as a number (NaN where it is missing or not a number)."""
    return float(x) if _num(x) else np.nan


def _clean(rec: dict) -> dict:
    """An evals/NAME.json as the report reads it: readings that are numbers, text with control characters
    escaped, unseen characters as counts (a record edited by hand changes nothing else)."""
    out = {k: printable(v) if isinstance(v, str) else v for k, v in rec.items() if k not in SET_METRICS or _num(v)}
    unknown = rec.get("unknown_chars")
    ok = isinstance(unknown, dict) and all(_num(n) for n in unknown.values())
    out["unknown_chars"] = unknown if ok else {}
    return out


def _log(x) -> float:
    try:
        return math.log(float(x))
    except (TypeError, ValueError):
        return float("nan")


def with_set_columns(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str], dict]:
    """The frame plus one column per set and metric; the named sets in order; {set: its evals records}."""
    out = df.assign(**{c: np.nan for c in ("test:bleu", "test:chrf", "test:ce", "dev:chrf")})
    records: dict[str, dict[str, dict]] = {}
    for tid, wd, status in zip(df["trial_id"], df["workdir"], df["status"]):
        if status != Status.FINISHED.value:
            continue
        result = _read(Path(wd) / RESULT)
        out.loc[out["trial_id"] == tid, ["test:bleu", "test:chrf", "test:ce", "dev:chrf"]] = [
            _value(result.get("test_bleu")),
            _value(result.get("test_chrf")),
            _log(result.get("test_ppl")),
            _value(result.get("dev_chrf")),
        ]
        for path in sorted((Path(wd) / EVALS).glob("*.json")):
            if not SAFE_NAME.match(path.stem):  # a set's name is a plain name (`tsweep evaluate --name`)
                continue
            rec = _read(path)
            if isinstance(rec.get("fingerprint"), str) and rec.get("config_hash") == result.get("config_hash"):
                records.setdefault(path.stem, {})[tid] = _clean(rec)
    names = []
    for name, per_trial in records.items():
        usual, _ = Counter(r["fingerprint"] for r in per_trial.values()).most_common(1)[0]
        other = sorted(t for t, r in per_trial.items() if r["fingerprint"] != usual)
        if other:  # one name, two sets: only the set most trials were scored on is reported under it
            log.warning("set %s: trials %s were scored on another set (fingerprint): left out", name, ", ".join(other))
        per_trial = {t: r for t, r in per_trial.items() if r["fingerprint"] == usual}
        records[name] = per_trial
        out = out.assign(**{f"{name}:{m}": np.nan for m in SET_METRICS})
        for tid, rec in per_trial.items():
            out.loc[out["trial_id"] == tid, [f"{name}:bleu", f"{name}:chrf", f"{name}:ce"]] = [
                _value(rec.get("bleu")),
                _value(rec.get("chrf")),
                _log(rec.get("ppl")),
            ]
        names.append(name)
    return out, names, records


def _fmt(mean: float, half: float | None, digits: int = 2) -> str:
    """'mean ± half'; the mean alone where there is no interval (None: one seed and no pooled noise)."""
    if not math.isfinite(mean):
        return MISSING
    return f"{mean:.{digits}f}" + (f" ± {half:.{digits}f}" if half is not None and math.isfinite(half) else "")


def column_group(df: pd.DataFrame, sets: list[tuple[str, tuple[str, ...]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(display strings, numbers) per row for each (set, metrics): mean ± CI with the pooled seed noise."""
    values = {(s, m): seed_values(df, set_reading(s, m)) for s, metrics in sets for m in metrics}
    noise = {}  # each set's readings as one table, as its verdicts use them (seed_noise.table_noise)
    for s, metrics in sets:
        noise.update({(s, m): nz for m, nz in table_noise({m: values[(s, m)] for m in metrics}).items()})
    shown, numbers = [], []
    for row in row_order(df):
        text: dict[str, str] = {"row": row}
        num: dict[str, Any] = {"row": row}
        for (s, m), per_row in values.items():
            mean, half, n = noise[(s, m)].mean_ci(per_row.get(row, np.array([])), row)
            text[f"{SET_METRICS[m].label} {s}"] = _fmt(mean, half)
            num.update({f"{s}:{m}": mean, f"{s}:{m}_ci": half, f"{s}:n": n})
        shown.append(text)
        numbers.append(num)
    return pd.DataFrame(shown), pd.DataFrame(numbers)


def set_claims(name: str, claims: list[Claim] | None = None) -> list[Claim]:
    """The claims with their dev readings replaced by the set's (margins carried over; see the module doc)."""
    claims = table3_claims() if claims is None else claims
    out = []
    for c in as_claims(claims):
        equal = any(rel in MARGINED for _, rel, _ in c.comparisons)
        readings, margins = [], {}
        for dev in c.readings:
            for metric in FROM_DEV.get(dev, ()):
                m = c.margin_for(metric if metric == "chrf" else dev)
                if equal and m is None:
                    continue  # an equivalence needs a margin stated before the results: none for this metric
                readings.append(set_reading(name, metric))
                margins[set_reading(name, metric)] = m
        if readings:
            out.append(replace(c, readings=tuple(readings), margin=tuple(margins.items())))
    return out


def claims_table(df: pd.DataFrame, name: str, rule: Rule = Rule(), reg: dict | None = None,
                 stated: list[Claim] | None = None) -> pd.DataFrame:  # fmt: skip
    """The claims (``stated``: the spec's) judged on one set (final values only: no trajectory), like
    tables.judge_report; decided at ``rule``'s cutoff, the whole report's family (``report_rule``), where it has
    one."""
    stated = table3_claims() if stated is None else stated
    claims = set_claims(name, stated)
    by_id, rows_of = {c.id: c for c in claims}, claim_rows(claims)
    undertrained = bool((reg if reg is not None else regime(df)).get("undertrained"))
    guard = scale_guard(df)
    return claims_frame(
        [
            claim_record(r, by_id[r.claim], rows_of[r.claim], undertrained, guard=guard)
            for r in judge_table(df, claims, rule).claims
        ]  # fmt: skip
    )


def _printed(j: Judgement) -> list:
    return [c for r in j.claims for c in r.comparisons] + [c for comps in j.versus.values() for c in comps]


def report_rule(df: pd.DataFrame, sweep_dir=None, rule: Rule = Rule(), stated: list[Claim] | None = None) -> Rule:
    """``rule`` with the cutoff of the whole printed report's family: every comparison of the claims on dev, of
    the rows no claim covers against base, and of the claims on test and on each named set (the tables the
    report prints), taken before any is decided.  Each table decided at that cutoff is the procedure (BH or Holm)
    over their union: one family, whose error rate the header states.  ``family="claim"`` is returned as it is."""
    stated = table3_claims() if stated is None else stated
    if rule.family != "report":
        return rule
    if sweep_dir is not None:
        df = df.assign(workdir=[str(Path(sweep_dir) / w) if not Path(w).is_absolute() else w for w in df["workdir"]])
    undecided = replace(rule, cutoff=1.0)  # every p kept on its side: the family's procedure comes after
    claims, _ = claims_for(sweep_task(df), stated)
    vrows = unclaimed_rows(df, stated) if ((df["row"] == "base") & (df["status"] == Status.FINISHED)).any() else []
    comps = _printed(judge_table(df, claims, undecided, vrows))
    if for_task(sweep_task(df)).evaluation_sets:  # evaluation_sets: test and the named sets
        full, names, _ = with_set_columns(df)
        for name in ["test", *names]:
            comps += _printed(judge_table(full, set_claims(name, stated), undecided))
    return family_rule(comps, rule)


def _note(name: str, per_trial: dict, finished: int) -> str:
    first = next(iter(per_trial.values()))
    unseen = max(sum((r.get("unknown_chars") or {}).values()) for r in per_trial.values())
    return (
        f"**{name}** ({first.get('set')}): {first.get('sentences')} sentences, fingerprint {first.get('fingerprint')}; "
        f"scored by {len(per_trial)} of {finished} finished trials; {unseen} characters unseen in training "
        f"(mapped to the unknown piece); sacrebleu `{first.get('sacrebleu_signature')}`, "
        f"chrF `{first.get('chrf_signature')}`"
    )


def evaluation_sets(df: pd.DataFrame, sweep_dir=None, rule: Rule = Rule(), reg: dict | None = None,
                    stated: list[Claim] | None = None) -> EvalSetsReport:  # fmt: skip
    """The extra Table-3 column group (chrF on dev and test; BLEU and chrF on every named set) and one
    claims table per set (test and the named sets; dev's is the main claims table).  ``sweep_dir`` is where
    relative workdirs in ``df`` are resolved."""
    stated = table3_claims() if stated is None else stated
    if sweep_dir is not None:
        df = df.assign(workdir=[str(Path(sweep_dir) / w) if not Path(w).is_absolute() else w for w in df["workdir"]])
    full, names, records = with_set_columns(df)
    sets: list[tuple[str, tuple[str, ...]]] = [("dev", ("chrf",)), ("test", ("chrf",))] + [
        (n, ("bleu", "chrf")) for n in names
    ]  # the main table has dev and test BLEU
    shown, numbers = column_group(full, sets)
    finished = int((df["status"] == Status.FINISHED.value).sum())
    return EvalSetsReport(
        ["test", *names],
        shown,
        numbers,
        {s: claims_table(full, s, rule, reg, stated) for s in ["test", *names]},
        [_note(n, records[n], finished) for n in names],
    )

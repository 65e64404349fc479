"""What a search sweep found, as tables: one row per sampled configuration, the best so far, the expected
best of n random samples (Dodge et al. 2019) and parameter importance (Optuna's fANOVA and PED-ANOVA).

A configuration is a search sample (analysis.data.samples): its seeds are replicates of it alone, and its score
is the mean over its finished seeds (what a searcher told of seeds sees).  Everything here is a plain
function of the collected frame (analysis.data.collect), so it is tested on synthetic frames.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.data.samples import CONFIRM_GROUP
from analysis.data.study_file import StudyFileError, read_study
from transformer_core.rundir import Status

# a configuration's cost, summed over its seeds: device-seconds of training and evaluation, training FLOPs (6 N D);
# named apart from the per-trial columns, which a second objective may be (its mean over seeds, as the searcher saw)
COST = {"cost_seconds": "wall_seconds", "cost_flops": "train_flops"}


@dataclass(frozen=True)
class Objective:
    """One objective of the search: a column of the collected frame and its direction."""

    metric: str
    mode: str  # "max" or "min"

    @property
    def sign(self) -> float:
        return 1.0 if self.mode == "max" else -1.0

    def better(self, a: float, b: float) -> bool:
        return self.sign * a > self.sign * b


def search_trials(df: pd.DataFrame) -> pd.DataFrame:
    """The trials the searcher ran (not the confirmation runs), in the order they started."""
    out = df[df["sample"].notna() & (df["group"] != CONFIRM_GROUP)]
    return out.sort_values(["started", "trial_id"], na_position="last", kind="stable")


def searched_params(df: pd.DataFrame) -> list[str]:
    """The sampled knobs, in the order the spec names them (the first trial's sampled dict)."""
    keys: dict[str, None] = {}
    for sampled in df["sampled"].dropna():
        keys.update(dict.fromkeys(sampled))
    return list(keys)


def configurations(df: pd.DataFrame, objectives: list[Objective]) -> pd.DataFrame:
    """One row per sampled configuration, in the order the samples started: its sampled values, seeds
    finished / run, the mean and seed sd of each objective over its finished seeds, its cost (summed over
    its seeds) and its state; ``rank`` 1 is the best mean on the first objective."""
    trials = search_trials(df)
    params = searched_params(trials)
    rows = []
    for sample, sub in trials.groupby("sample", sort=False):
        fin = sub[sub["status"] == Status.FINISHED]
        rec = {"sample": sample, **{p: sub["sampled"].iloc[0].get(p) for p in params}}
        rec.update(seeds_finished=len(fin), seeds=len(sub), started=sub["started"].min())
        for o in objectives:
            vals = fin[o.metric].dropna().astype(float)
            rec[o.metric] = vals.mean() if len(vals) else math.nan
            rec[f"{o.metric}_sd"] = vals.std(ddof=1) if len(vals) > 1 else math.nan
        for name, column in COST.items():
            rec[name] = sub[column].fillna(0).astype(float).sum()
        states = list(dict.fromkeys(sub["status"]))
        rec["state"] = states[0] if len(states) == 1 else ", ".join(f"{(sub['status'] == s).sum()} {s}" for s in states)
        rows.append(rec)
    columns = ["sample", *params, "seeds_finished", "seeds", "started"]
    columns += [f"{o.metric}{sd}" for o in objectives for sd in ("", "_sd")] + [*COST, "state"]
    out = pd.DataFrame(rows, columns=columns)  # the columns also where nothing was sampled yet
    first = objectives[0]
    out["rank"] = (first.sign * -out[first.metric].astype(float)).rank(method="min", na_option="keep").astype("Int64")
    out.attrs["params"] = params
    return out


def best_so_far(configs: pd.DataFrame, objective: Objective) -> pd.DataFrame:
    """The best configuration mean after each sample (in the order they started) against samples and against
    cumulative compute (device-seconds, FLOPs); a sample without a finished seed keeps the best as it was."""
    score = configs[objective.metric].astype(float)
    keyed = (objective.sign * score).fillna(-np.inf).cummax()
    best = objective.sign * keyed.replace(-np.inf, np.nan)
    return pd.DataFrame(
        {
            "samples": np.arange(1, len(configs) + 1),
            "sample": configs["sample"],
            "score": score,
            "best": best,
            "device_seconds": configs["cost_seconds"].cumsum(),
            "train_flops": configs["cost_flops"].cumsum(),
        }
    )


def expected_max(scores, n: int) -> tuple[float, float]:
    """Expected maximum of n draws with replacement from the empirical distribution of ``scores``, and its
    standard deviation (Dodge et al. 2019, "Show your work": expected validation performance).

    With v_(1) <= ... <= v_(N) the sorted scores, P(max of n = v_(i)) = (i/N)^n - ((i-1)/N)^n, so
    E[max] = sum_i v_(i) [(i/N)^n - ((i-1)/N)^n]."""
    v = np.sort(np.asarray(scores, dtype=float))
    if not len(v) or n < 1:
        raise ValueError("expected_max needs at least one score and n >= 1")
    i = np.arange(1, len(v) + 1) / len(v)
    p = i**n - (i - 1 / len(v)) ** n
    mean = float(np.sum(v * p))
    var = float(np.sum(v * v * p)) - mean * mean
    return mean, math.sqrt(max(var, 0.0))


def expected_best(configs: pd.DataFrame, objective: Objective) -> pd.DataFrame:
    """E[best of n random samples] for n = 1..N over the configurations with a score (for a minimised
    objective the expected minimum), with its sd: would more samples have helped?"""
    scores = objective.sign * configs[objective.metric].dropna().astype(float).to_numpy()
    rows = []
    for n in range(1, len(scores) + 1):
        mean, sd = expected_max(scores, n)
        rows.append({"n": n, "expected_best": objective.sign * mean, "sd": sd})
    return pd.DataFrame(rows, columns=["n", "expected_best", "sd"])


def _distribution(values: list, declared):
    """The Optuna distribution of one parameter: the study's own where it recorded one, else inferred from the
    values (numbers: a float or int range over what was sampled; anything else: categorical)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if declared is not None:
        return declared
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numbers and len(set(values)) > 2:
        lo, hi = min(values), max(values)
        if all(isinstance(v, int) for v in values):
            return IntDistribution(int(lo), int(hi))
        return FloatDistribution(float(lo), float(hi), log=lo > 0 and hi / lo > 10)
    return CategoricalDistribution(sorted(set(values), key=str))


def _study(configs: pd.DataFrame, params: list[str], distributions: dict, objective: Objective):
    """An in-memory Optuna study with one finished trial per configuration (its mean), for the evaluators."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="maximize" if objective.mode == "max" else "minimize")
    for _, c in configs.iterrows():
        study.add_trial(
            optuna.trial.create_trial(
                params={p: c[p] for p in params},
                distributions={p: distributions[p] for p in params},
                value=float(c[objective.metric]),
            )
        )
    return study


EVALUATORS = ("fANOVA", "PED-ANOVA")


def _evaluator(name: str, n: int, seed: int):
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    if name == "fANOVA":
        return FanovaImportanceEvaluator(seed=seed)
    return PedAnovaImportanceEvaluator(target_quantile=_ped_quantile(n))


def _ped_quantile(n: int) -> float:
    """PED-ANOVA's target quantile over n configurations: the top holds at least 5 samples where there are 10 or
    more (Optuna's advice), else half."""
    return min(0.5, max(0.1, 5 / n))


def method(name: str, n: int, seed: int) -> str:
    """How an evaluator of ``importance`` computes on ``n`` configurations: Optuna's class with its arguments."""
    if name == "fANOVA":
        how = f"optuna.importance.FanovaImportanceEvaluator(seed={seed})"
    else:
        how = f"optuna.importance.PedAnovaImportanceEvaluator(target_quantile={_ped_quantile(n):.3g})"
    return f"{how} on the {n} configuration means, normalised to sum to 1"


def importance(configs: pd.DataFrame, objective: Objective, distributions: dict | None = None,
               resamples: int = 30, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """Each searched parameter's importance by fANOVA and PED-ANOVA (Optuna's evaluators) over the
    configurations with a score, and its spread over ``resamples`` bootstrap resamples of them (median and
    10-90% range).  Parameters that took a single value are left out; an evaluator that cannot run on these
    samples gives NaN with the reason in ``note``; ``method`` names each evaluator's class and arguments (method)."""
    import optuna

    scored = configs.dropna(subset=[objective.metric])
    params = [p for p in configs.attrs.get("params", []) if scored[p].astype(str).nunique() > 1]
    columns = ["evaluator", "param", "importance", "median", "lo", "hi", "resamples", "note", "method"]
    if len(scored) < 3 or not params:
        return pd.DataFrame(columns=columns)
    declared = distributions or {}
    dists = {p: _distribution(list(scored[p]), declared.get(p)) for p in params}
    rng = np.random.default_rng(seed)
    rows = []
    for name in EVALUATORS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature and few-trials warnings: the note says it
            try:
                full = optuna.importance.get_param_importances(
                    _study(scored, params, dists, objective), evaluator=_evaluator(name, len(scored), seed),
                    normalize=True)  # fmt: skip
                note = ""
            except Exception as exc:  # an evaluator refusing these samples is a finding, not a crash
                full, note = {}, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            boots: dict[str, list[float]] = {p: [] for p in params}
            for k in range(resamples if full else 0):
                pick = scored.iloc[rng.integers(0, len(scored), len(scored))]
                try:
                    imp = optuna.importance.get_param_importances(
                        _study(pick, params, dists, objective), evaluator=_evaluator(name, len(pick), seed + k + 1),
                        normalize=True)  # fmt: skip
                except Exception:  # noqa: S112 - a resample with one distinct value of a parameter, say
                    continue
                for p in params:
                    boots[p].append(imp.get(p, 0.0))
        for p in params:
            b = np.array(boots[p])
            rows.append({"evaluator": name, "param": p, "importance": full.get(p, math.nan),
                         "median": float(np.median(b)) if len(b) else math.nan,
                         "lo": float(np.quantile(b, 0.1)) if len(b) else math.nan,
                         "hi": float(np.quantile(b, 0.9)) if len(b) else math.nan,
                         "resamples": len(b), "note": note, "method": method(name, len(scored), seed)})  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def study_distributions(optuna_db, study_name: str) -> dict:
    """The distributions the searcher declared, from the sweep's optuna.db (empty when there is none)."""
    if not optuna_db.exists():
        return {}
    out = {}
    try:  # read from a private copy: a report writes nothing into the study
        with read_study(optuna_db, study_name, missing_ok=True) as study:
            for t in study.get_trials(deepcopy=False) if study else ():
                out.update(t.distributions)
    except StudyFileError:  # another study name, an unreadable file: inferred from the values instead
        return {}
    return out


DASHBOARD = "optuna-dashboard"  # the importance rows of the evaluator optuna-dashboard runs (dashboard_importance)


def dashboard_importance(optuna_db, study_name: str) -> pd.DataFrame:
    """Each parameter's importance as optuna-dashboard computes its "Hyperparameter Importance" (0.21): Optuna's
    PedAnovaImportanceEvaluator at its defaults (target_quantile 0.1: the best tenth of the trials against all of
    them) over the study's completed trials, its first objective, read from a private copy of the study.  Empty
    where the study cannot be read or has fewer than two completed trials."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    columns = ["evaluator", "param", "importance", "median", "lo", "hi", "resamples", "note", "method"]
    if not optuna_db.exists():
        return pd.DataFrame(columns=columns)
    try:
        with read_study(optuna_db, study_name, missing_ok=True) as study:
            if study is None:
                return pd.DataFrame(columns=columns)
            done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
            if len(done) < 2:
                return pd.DataFrame(columns=columns)
            sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(
                    study, target=lambda t: sign * t.values[0], evaluator=PedAnovaImportanceEvaluator()
                )
    except StudyFileError:
        return pd.DataFrame(columns=columns)
    except Exception as exc:  # noqa: BLE001 - the evaluator refusing these trials: the row says why
        return pd.DataFrame([{"evaluator": DASHBOARD, "param": "", "importance": math.nan, "median": math.nan,
                              "lo": math.nan, "hi": math.nan, "resamples": 0,
                              "note": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                              "method": ""}], columns=columns)  # fmt: skip
    how = (f"optuna.importance.PedAnovaImportanceEvaluator() at its defaults (target_quantile 0.1) on the study's "
           f"{len(done)} completed trials, as optuna-dashboard computes its Hyperparameter Importance")  # fmt: skip
    rows = [{"evaluator": DASHBOARD, "param": p, "importance": float(v), "median": math.nan, "lo": math.nan,
             "hi": math.nan, "resamples": 0, "note": "", "method": how} for p, v in imp.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)

"""Sweep specs: YAML in the paper's units, validated, expanded into trials at a profile's scale.

Every error is a SpecError whose message starts with the field path
(``rows.A[0].h``), says what is wrong and what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from analysis.data.claims import Claim, claim_document, parse_claims
from analysis.data.metrics import default_mode
from analysis.data.metrics import objectives as task_objectives
from analysis.data.paper import parse_paper
from analysis.data.samples import SEARCH_GROUP, sample_label
from transformer_core import knobs
from transformer_core.config import paper_values
from transformer_core.data.monolingual import lm_language
from transformer_core.data.prepare import check_direction
from transformer_core.errors import ConfigError, UserError, did_you_mean
from transformer_core.knobs import KnobValue, RunValues
from transformer_core.lm_task import check as check_lm
from transformer_core.memory import check_memory
from transformer_core.run_config import MAX_SEED, MAX_VOCAB, MIN_VOCAB, TASKS, TRAIN_KEYS, RunConfig, make_run_config
from transformer_core.rundir import SAFE_ALLOWED, SAFE_NAME, TrialRecord

from .bounds import check_plan_size, read_document
from .profiles import Profile, get_profile


class SpecError(UserError):
    exit_code = 2


TOP_KEYS = (
    "name",
    "title",
    "description",
    "base",
    "corpus",
    "task",
    "seeds",
    "rows",
    "search",
    "scheduler",
    "resources",
    "max_concurrent",
    "metric",
    "mode",
    "tracking",
    "output",
    "train",
    "budget",
    "paper",
    "claims",
)


# The knobs a spec may set, read from the knob table when a spec is read (a row added to it is a knob here too)
def paper_keys() -> tuple[str, ...]:
    """In the paper's units, scaled by the profile (the knob table says which)."""
    return knobs.scaled_by_profile()


def run_keys() -> tuple[str, ...]:
    """Taken as written (run units)."""
    return tuple(k for k in knobs.row_knobs() if k not in paper_keys())


def row_keys() -> tuple[str, ...]:
    """What a row (and search.space) may set."""
    return paper_keys() + run_keys()


def base_keys() -> tuple[str, ...]:
    return ("preset",) + row_keys()


METRICS = task_objectives("translation")  # what a spec may optimise (analysis.data.metrics); task lm: objectives("lm")
SEARCH_TYPES = ("uniform", "loguniform", "int", "choice")
SCHEDULERS = ("none", "asha")


def _unknown(path: str, key: str, allowed) -> SpecError:
    return SpecError(f"{path}: unknown key {key!r}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")


def _mapping(value, path: str, allowed) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{path}: expected a mapping of {', '.join(allowed)}, got {type(value).__name__}")
    for key in value:
        if key not in allowed:
            raise _unknown(path, key, allowed)
    return value


def finite(value) -> bool:
    """A number a float holds (a whole number of 400 digits does not: float() of it overflows), NaN and infinities
    not among them."""
    try:
        return math.isfinite(float(value))
    except (OverflowError, TypeError, ValueError):
        return False


def _number(value, path: str, lo=None, integer=False, hi=None) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and finite(value)
    if isinstance(value, bool) or not ok or (lo is not None and value < lo) or (hi is not None and value > hi):
        kind = "an integer" if integer else "a finite number" if isinstance(value, float) else "a number"
        bounds = f" in [{lo}, {hi}]" if hi is not None else (f" >= {lo}" if lo is not None else "")
        raise SpecError(f"{path}: {value!r} is invalid; allowed {kind}{bounds}")
    return value


# A row's knobs as the spec writes them (paper units for the knobs a profile scales, run units for the rest): read
# only; a dict underneath, as YAML gave it (its order is the order the knobs reach the trial's values, and the spec
# crosses Ray whole, so no read-only proxy, which would not pickle)
Overrides = Mapping[str, KnobValue]


@dataclass(frozen=True)
class Row:
    group: str
    label: str
    overrides: Overrides


@dataclass(frozen=True)
class Trial:
    group: Optional[str]  # None only as read back from a record that has none (TrialRecord.group)
    row: str
    seed: int
    paper: dict[str, KnobValue]  # the row's knobs in the paper's units
    values: RunValues  # flat run keys at the profile's scale
    config_hash: str
    profile: dict[str, Any]  # the profile's rules (Profile.rules: JSON, as sweep.json keeps them)
    # the trial's RunConfig, built once where the trial is planned (expand_row, or from_record on a resume);
    # config_hash is its content hash
    config: RunConfig = field(compare=False, repr=False)

    @property
    def trial_id(self) -> str:
        return f"{self.row}-s{self.seed}-{self.config_hash[:8]}"

    def record(self, sweep_dir: str | Path = "", tracking: Optional[dict] = None, preset: str = "base",
               search: Optional[dict[str, KnobValue]] = None) -> TrialRecord:  # fmt: skip
        """This trial as the payload a worker runs and keeps as trial.json (one definition: rundir)."""
        return TrialRecord(self.trial_id, self.group, self.row, self.seed, self.values, self.config_hash,
                           self.paper, self.profile, preset, str(sweep_dir), tracking, search)  # fmt: skip

    @classmethod
    def from_record(cls, r: TrialRecord, profile: dict[str, Any]) -> "Trial":
        """A planned trial as sweep.json's plan keeps it (its config built again from its values and preset)."""
        return cls(
            r.group, r.row, r.seed, r.paper, r.values, r.config_hash, profile, make_run_config(r.values, r.preset)
        )


@dataclass(frozen=True)
class Resources:
    """What one trial asks of the cluster (the spec's resources: section)."""

    cpus: float = 1
    gpus: float = 0
    workers: int = 1


@dataclass(frozen=True)
class Corpus:
    """The spec's corpus: section: the corpus's name, its vocabulary size and direction where the spec gives them."""

    name: str = "bible-en-de"
    vocab: Optional[int] = None  # None: the profile's, else 8000
    direction: Optional[str] = None  # translation: A-B; task lm: the language modelled


@dataclass(frozen=True)
class Confirm:
    """search.confirm: the best `top` configurations re-run with `seeds` fresh seeds after the search."""

    top: int = 2
    seeds: int = 3


@dataclass(frozen=True)
class Search:
    """The spec's search: section, validated.  space: knob -> its distribution ({type, low, high} or
    {type: choice, values}); objectives: two {metric, mode} (a Pareto front), else None (the spec's metric)."""

    samples: int
    space: dict[str, dict[str, Any]]
    seed: int = 0
    confirm: Optional[Confirm] = None
    objectives: Optional[list[dict[str, str]]] = None
    warm_start: Optional[str] = None  # the directory of an earlier search sweep


@dataclass(frozen=True)
class Scheduler:
    """The spec's scheduler: section.  ``none``: every trial trains to its last step; ``asha``: Tune's
    ASHAScheduler stops the worse trials at its rungs (``grace_period``, times ``reduction_factor`` each rung, up to
    ``max_t``), counted in the trial's reports to Tune (one per evaluation).  The numbers keep the type the spec gave
    them (an int stays an int), as Tune was given them before."""

    type: str = "none"  # one of SCHEDULERS
    grace_period: int = 1
    reduction_factor: float = 2
    max_t: int = 100


@dataclass
class Spec:
    name: str
    base: dict
    corpus: Corpus
    seeds: list
    rows: list[Row]
    search: Optional[Search] = None
    scheduler: Scheduler = field(default_factory=Scheduler)
    resources: Resources = field(default_factory=Resources)
    max_concurrent: int = 2
    metric: str = "dev_bleu"
    mode: str = "max"
    tracking: dict = field(default_factory=dict)
    output: Optional[str] = None
    train: dict = field(default_factory=dict)
    description: str = ""
    source: Optional[str] = None
    adaptive: Optional[dict] = None  # {"min": m, "max": M}: seeds added where a verdict is undecided
    budget: Optional[float] = None  # wall-clock seconds for adaptive rounds
    task: str = "translation"  # or lm: a decoder-only language model on one side of the corpus (N: its layers)
    title: str = ""  # the report's title (default: the spec's name)
    claims: list[Claim] = field(default_factory=list)  # stated before any result; judged by the report
    paper: dict = field(default_factory=dict)  # our row -> the paper's Table 3 row whose numbers it shows

    def report_record(self) -> dict:
        """What the report takes from the spec (sweep.json "report"): title, description, claims, paper rows."""
        return {"title": self.title, "description": self.description, "paper": dict(self.paper),
                "claims": [claim_document(c) for c in self.claims]}  # fmt: skip

    def searched(self) -> Search:
        """The search section, for code that runs only for a search spec (a programming error otherwise)."""
        if self.search is None:
            raise TypeError(f"spec {self.name!r} has no search section")
        return self.search

    def row(self, label: str) -> Row:
        return next(r for r in self.rows if r.label == label)

    def trials(self, profile: Profile) -> list[Trial]:
        """The trials of the spec's rows at ``profile`` (a search: its base row's, every value the search may
        sample checked first, check_space)."""
        if self.search:
            check_space(self, profile)
        return [t for row in self.rows if row.label not in profile.exclude for t in expand_row(self, row, profile)]


def expand_row(
    spec: Spec, row: Row, profile: Profile, seeds: Optional[list] = None, rescale: Optional[float] = None
) -> list[Trial]:
    """The trials of one row (at the spec's seeds, or the seeds given) at a profile: the only place a row's
    knobs become run values (the paper-unit ones through Profile.scale_paper); search samples come through here
    too (search_trial).

    rescale (search_trial, for a sampled batch size): steps, warmup and eval_every are multiplied by it."""
    base = dict(spec.base)
    preset = base.pop("preset", "base")
    knobs = {**base, **row.overrides}
    in_run_units, in_paper_units = run_keys(), paper_keys()
    run_knobs = {k: v for k, v in knobs.items() if k in in_run_units}
    try:
        paper = paper_values(preset, {k: v for k, v in knobs.items() if k in in_paper_units})
        scaled = profile.scale_paper(paper)
    except ConfigError as exc:
        raise SpecError(f"rows.{row.group}.{row.label}: at profile {profile.name!r}: {exc}") from None
    values = {
        **scaled,
        **profile.train,
        **spec.train,
        **run_knobs,
        "corpus": spec.corpus.name,
        "vocab": profile.data.get("vocab", 8000 if spec.corpus.vocab is None else spec.corpus.vocab),
        **({"task": spec.task} if spec.task != "translation" else {}),  # translation trials keep their values
        **({"direction": spec.corpus.direction} if spec.corpus.direction is not None else {}),
    }
    if rescale:
        for key in ("steps", "warmup", "eval_every"):
            if isinstance(values.get(key), int):
                values[key] = max(1, round(values[key] * rescale))
    trials: list[Trial] = []
    for seed in spec.seeds if seeds is None else seeds:
        v = {**values, "seed": seed}
        try:
            cfg = make_run_config(v, preset)
            if spec.task == "lm":
                check_lm(cfg)
            if not trials:  # the seeds of a row differ in nothing that takes memory
                check_memory(cfg)
        except ConfigError as exc:
            raise SpecError(f"rows.{row.group}.{row.label}: at profile {profile.name!r}: {exc}") from None
        trials.append(Trial(row.group, row.label, seed, paper, v, cfg.content_hash(), profile.rules(), cfg))
    return trials


def search_trial(spec: Spec, profile: Profile, sampled: dict[str, KnobValue]) -> Trial:
    """A search suggestion (paper units for paper knobs, e.g. d_model or train_steps) as the base row with the
    sampled knobs, scaled by the profile exactly like a row of the spec; a row of its own (labelled by its
    sampled values: analysis.data.samples), its own config hash and trial id.  Its first seed (sample_trials: all)."""
    return sample_trials(spec, profile, sampled)[0]


def sample_trials(spec: Spec, profile: Profile, sampled: dict[str, KnobValue], seeds: Optional[list] = None,
                  group: str = SEARCH_GROUP) -> list[Trial]:  # fmt: skip
    """The trials of one search sample: one per seed of the spec (``seeds: N``), or per seed given (``group``
    confirm: a best configuration re-run with fresh seeds after the search)."""
    base = spec.row("base")
    row = Row(group, sample_label(sampled), {**base.overrides, **sampled})  # each sample a row of its own
    rescale = None
    if "tokens_per_batch" in sampled and "train_steps" not in sampled:
        # a sampled batch size keeps the trial's target tokens: steps, warmup and eval_every (in steps of the batch
        # the spec would otherwise run, a sampled warmup too) scale by old / new batch; the schedule keeps its
        # shape, and under rsqrt the peak rate goes as warmup^-0.5 (search lr_scale beside it)
        tokens = sampled["tokens_per_batch"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise SpecError(f"rows.{group}.{row.label}: at profile {profile.name!r}: tokens_per_batch={tokens!r} is "
                            "invalid: allowed an integer >= 1")  # fmt: skip
        unsampled = expand_row(spec, base, profile, spec.seeds[:1])[0]
        batch = unsampled.config.train.tokens_per_batch  # the profile's, else the default
        rescale = float(batch) / float(tokens)
    return expand_row(spec, row, profile, spec.seeds if seeds is None else seeds, rescale=rescale)


def check_space(spec: Spec, profile: Profile) -> None:
    """Each value a search may sample (every choice, the ends of a range) checked as a row of the base with that
    one knob is checked at ``profile``: a SpecError naming the value's place in search.space, before any trial."""
    assert spec.search is not None
    for key, dist in spec.search.space.items():
        path = f"search.space.{key}"
        if dist["type"] == "choice":
            candidates = [(f"{path}.values[{i}]", v) for i, v in enumerate(dist["values"])]
        else:
            candidates = [(f"{path}.low", dist["low"]), (f"{path}.high", dist["high"])]
            if dist["type"] != "int":  # a draw between the ends is a fraction: a knob that takes integers refuses it
                low, high = float(dist["low"]), float(dist["high"])
                mid = math.sqrt(low * high) if dist["type"] == "loguniform" else (low + high) / 2
                why = f"a {dist['type']} draw is a fraction; a knob of whole numbers takes type int or choice"
                candidates.append((f"{path} ({why})", mid))
        for where, value in candidates:
            try:
                sample_trials(spec, profile, {key: value}, spec.seeds[:1])
            except SpecError as exc:
                reason = str(exc).split(f"at profile {profile.name!r}: ", 1)[-1]
                raise SpecError(f"{where}: {value!r} is invalid at profile {profile.name!r} ({reason})") from None


def parse_budget(value, path: str = "budget") -> Optional[float]:
    """'90m', '2h', '45s', '1h30m' or a number of minutes -> seconds."""
    if value is None:
        return None
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value > 0
        and finite(value)
        and finite(float(value) * 60)
    ):
        return float(value) * 60
    text = str(value).strip().lower()
    m = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or not m or not any(m.groups()):
        raise SpecError(f"{path}: {value!r} is invalid; allowed a duration such as 60m, 2h, 1h30m or 900s")
    h, mins, secs = (float(x) if x else 0.0 for x in m.groups())
    seconds = h * 3600 + mins * 60 + secs
    if seconds <= 0 or not math.isfinite(seconds):  # "1000...0h": float() of 400 digits is infinity
        raise SpecError(f"{path}: {value!r} is invalid; allowed a positive duration")
    return seconds


def _parse_seeds(raw) -> tuple[list, Optional[dict]]:
    """A list of seeds, or {min: m, max: M} (adaptive: seeds 1..m first, up to M where a verdict needs them)."""
    if isinstance(raw, dict):
        raw = _mapping(raw, "seeds", ("min", "max", "evidence"))
        lo = _number(raw.get("min", 2), "seeds.min", 1, integer=True, hi=MAX_SEED)
        hi = _number(raw.get("max", lo), "seeds.max", 1, integer=True, hi=MAX_SEED)
        if hi < lo:
            raise SpecError(f"seeds.max: {hi} is invalid; allowed an integer >= seeds.min ({lo})")
        # what the loop and the report decide on (analysis.stats.rule.sweep_rule)
        evidence = raw.get("evidence", "p")
        if evidence not in ("p", "e"):
            raise SpecError(f"seeds.evidence: {evidence!r} is invalid; allowed p (p-values, every planned look "
                            "charged) or e (e-values, valid however the rounds stop)")  # fmt: skip
        return list(range(1, lo + 1)), {"min": lo, "max": hi, **({"evidence": "e"} if evidence == "e" else {})}
    if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 1000:  # seeds: N is seeds 1..N
        return list(range(1, raw + 1)), None
    if not isinstance(raw, list) or not raw:
        raise SpecError(
            f"seeds: {raw!r} is invalid; allowed a number of seeds, a non-empty list of integers or {{min: 2, max: 5}}"
        )
    for i, s in enumerate(raw):
        _number(s, f"seeds[{i}]", 0, integer=True, hi=MAX_SEED)
    if len(set(raw)) != len(raw):
        raise SpecError(f"seeds: {raw} repeats a seed; every seed must be different")
    return raw, None


MAX_NAME = 100  # a trial's directory is LABEL-sSEED-HASH: well inside a file system's 255 bytes


def _safe_name(value, path: str) -> None:
    """Names that become paths (the sweep name, row labels): no separators, no '..', no hidden files, no name
    longer than a file system takes."""
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise SpecError(f"{path}: {value!r} is invalid; allowed {SAFE_ALLOWED}")
    if len(value) > MAX_NAME:
        raise SpecError(f"{path}: {value[:20]!r}... ({len(value)} characters) is too long; allowed at most {MAX_NAME}")


def _parse_rows(raw, base_label: str = "base") -> list[Row]:
    rows = [Row("base", base_label, {})]
    if raw is None:
        return rows
    if not isinstance(raw, dict):
        raise SpecError("rows: expected a mapping of group name to a list of rows")
    labels = {base_label}
    for group, items in raw.items():
        if not isinstance(items, list) or not items:
            raise SpecError(
                f"rows.{group}: expected a non-empty list of rows (each a mapping of knobs, with an optional label)"
            )
        for i, item in enumerate(items):
            path = f"rows.{group}[{i}]"
            item = _mapping(item, path, ("label",) + row_keys())
            label = str(item.get("label", f"{group}{i + 1}"))
            _safe_name(label, f"{path}.label")
            if label in labels:
                raise SpecError(f"{path}.label: {label!r} is used twice; row labels must be unique")
            labels.add(label)
            knobs = {k: v for k, v in item.items() if k != "label"}
            if not knobs:
                raise SpecError(f"{path}: a row needs at least one knob override ({', '.join(row_keys())})")
            rows.append(Row(str(group), label, knobs))
    return rows


def _parse_search(raw, metrics: tuple = METRICS) -> Optional[Search]:
    if raw is None:
        return None
    raw = _mapping(raw, "search", ("samples", "space", "seed", "confirm", "objectives", "warm_start"))
    samples = _number(raw.get("samples", 4), "search.samples", 1, integer=True)
    space = _mapping(raw.get("space"), "search.space", row_keys())  # paper units for paper knobs, as in rows
    if not space:
        raise SpecError(
            "search.space: give at least one knob to search, e.g. lr_scale: {type: loguniform, low: 0.5, high: 2}"
        )
    for key, dist in space.items():
        path = f"search.space.{key}"
        dist = _mapping(dist, path, ("type", "low", "high", "values"))
        if dist.get("type") not in SEARCH_TYPES:
            raise SpecError(f"{path}.type: {dist.get('type')!r} is invalid; allowed {', '.join(SEARCH_TYPES)}")
        if dist["type"] == "choice":
            if not isinstance(dist.get("values"), list) or not dist["values"]:
                raise SpecError(f"{path}.values: a choice needs a non-empty list of values")
            for i, v in enumerate(dist["values"]):
                if not isinstance(v, (str, int, float)) or (isinstance(v, float) and not math.isfinite(v)):
                    raise SpecError(f"{path}.values[{i}]: {v!r} is invalid; allowed one knob value (a number, a "
                                    "word or true/false), not a list, a mapping or null")  # fmt: skip
        else:
            lo = _number(dist.get("low"), f"{path}.low", integer=dist["type"] == "int")
            hi = _number(dist.get("high"), f"{path}.high", integer=dist["type"] == "int")
            if not lo < hi:
                raise SpecError(f"{path}: low ({lo}) must be below high ({hi})")
            if dist["type"] == "loguniform" and lo <= 0:
                raise SpecError(f"{path}.low: {lo} is invalid for loguniform; allowed a number > 0")
    seed = _number(raw.get("seed", 0), "search.seed", 0, integer=True, hi=MAX_SEED)  # the sampler's RNG takes 32 bits
    return Search(samples, space, seed, **_search_options(raw, metrics))


COSTS = ("params", "wall_seconds", "train_flops")  # a second objective may be a cost (minimised)


def _search_options(raw: dict, metrics: tuple) -> dict:
    """search.confirm {top, seeds}: the best configurations re-run with fresh seeds after the search;
    search.objectives {metric: mode, ...}: two objectives (a Pareto front); search.warm_start: an earlier sweep."""
    out: dict[str, Any] = {}
    if raw.get("confirm") is not None:
        c = _mapping(raw["confirm"], "search.confirm", ("top", "seeds"))
        out["confirm"] = Confirm(
            top=_number(c.get("top", 2), "search.confirm.top", 1, integer=True, hi=1000),
            seeds=_number(c.get("seeds", 3), "search.confirm.seeds", 1, integer=True, hi=1000),
        )
    if raw.get("objectives") is not None:
        objs = _mapping(raw["objectives"], "search.objectives", metrics + COSTS)
        if len(objs) != 2 or any(m not in ("max", "min") for m in objs.values()):
            raise SpecError(
                f"search.objectives: {objs!r} is invalid; allowed two metrics, each max or min, "
                "e.g. {dev_bleu: max, params: min}"
            )
        out["objectives"] = [{"metric": k, "mode": v} for k, v in objs.items()]
    if raw.get("warm_start") is not None:
        if not isinstance(raw["warm_start"], str) or not raw["warm_start"].strip():
            raise SpecError(
                f"search.warm_start: {raw['warm_start']!r} is invalid; allowed the directory of an earlier search sweep"
            )
        out["warm_start"] = raw["warm_start"]
    return out


def _check_sqlite_uri(uri) -> None:
    """Refuse a ``tracking.uri`` of ``sqlite:///`` with a relative path: MLflow would resolve it from each process's
    own directory (the driver's, every trial's), so the trials would write empty stores inside the sweep."""
    prefix = "sqlite:///"
    if isinstance(uri, str) and uri.startswith(prefix) and not uri[len(prefix) :].startswith("/"):
        where = Path(uri[len(prefix) :].split("?", 1)[0]).absolute()
        raise SpecError(f"tracking.uri: {uri!r} names a relative path, which every process would open from its own "
                        f"directory; allowed an absolute one (sqlite:///{where} from here: four slashes), or no "
                        "tracking.uri for the sweep's own mlflow.db")  # fmt: skip


def _parse_scheduler(raw) -> Scheduler:
    if raw is None:
        return Scheduler()
    if isinstance(raw, str):
        raw = {"type": raw}
    raw = _mapping(raw, "scheduler", ("type", "grace_period", "reduction_factor", "max_t"))
    if raw.get("type") not in SCHEDULERS:
        raise SpecError(f"scheduler.type: {raw.get('type')!r} is invalid; allowed {', '.join(SCHEDULERS)}")
    for key, lo in (("grace_period", 1), ("max_t", 1)):
        if key in raw:
            _number(raw[key], f"scheduler.{key}", lo, integer=True)
    if "reduction_factor" in raw:
        _number(raw["reduction_factor"], "scheduler.reduction_factor", 1.01)
    return Scheduler() if raw["type"] == "none" else Scheduler(**raw)


def parse_spec(doc: Any, source: Optional[str] = None) -> Spec:
    doc = _mapping(doc, "spec", TOP_KEYS)
    check_plan_size(doc)  # before any row is expanded
    name = doc.get("name")
    _safe_name(name, "name")
    base = _mapping(doc.get("base") or {"preset": "base"}, "base", base_keys())
    if base.get("preset", "base") not in ("base", "big"):
        raise SpecError(f"base.preset: {base.get('preset')!r} is invalid; allowed base, big")
    corpus = doc.get("corpus", {"name": "bible-en-de"})
    if isinstance(corpus, str):
        corpus = {"name": corpus}
    corpus = _mapping(corpus, "corpus", ("name", "vocab", "direction"))
    from transformer_core.data.prepare import parse_corpus_name
    from transformer_core.data.recipes import get_recipe

    try:
        for part in parse_corpus_name(str(corpus.get("name", "bible-en-de")))[0].split("+"):
            get_recipe(part)
    except UserError as exc:
        raise SpecError(f"corpus.name: {exc}") from None
    if "direction" in corpus:  # translation: A-B of the corpus's languages; task lm: the one language modelled
        recipe, options = parse_corpus_name(str(corpus.get("name", "bible-en-de")))
        try:
            if doc.get("task") == "lm":
                lm_language(str(corpus.get("name", "bible-en-de")), corpus["direction"])
            else:
                check_direction(recipe, corpus["direction"], options)
        except UserError as exc:
            raise SpecError(f"corpus.direction: {exc}") from None
    if "vocab" in corpus:
        _number(corpus["vocab"], "corpus.vocab", MIN_VOCAB, integer=True, hi=MAX_VOCAB)
    seeds, adaptive = _parse_seeds(doc.get("seeds", [1]))
    if adaptive and doc.get("search") is not None:
        raise SpecError("seeds: adaptive seeds ({min, max}) judge claims across rows; a search has none: give a list")
    raw_resources = {"cpus": 1, "gpus": 0, "workers": 1,
                     **_mapping(doc.get("resources"), "resources", ("cpus", "gpus", "workers"))}  # fmt: skip
    resources = Resources(
        cpus=_number(raw_resources["cpus"], "resources.cpus", 0.01),
        gpus=_number(raw_resources["gpus"], "resources.gpus", 0),
        workers=_number(raw_resources["workers"], "resources.workers", 1, integer=True),
    )
    task = doc.get("task", "translation")
    if task not in TASKS:
        raise SpecError(f"task: {task!r} is invalid; allowed {', '.join(TASKS)}")
    metrics = task_objectives(task)
    metric = doc.get("metric", metrics[0])
    if metric not in metrics:
        at = " with task lm" if task == "lm" else ""
        raise SpecError(f"metric: {metric!r} is invalid{at}; allowed {', '.join(metrics)}")
    mode = doc.get("mode", default_mode(metric))
    if mode not in ("max", "min"):
        raise SpecError(f"mode: {mode!r} is invalid; allowed max, min")
    train = _mapping(doc.get("train"), "train", TRAIN_KEYS)
    tracking = _mapping(doc.get("tracking"), "tracking", ("uri", "experiment"))
    for key, allowed in (("uri", "an MLflow tracking URI"), ("experiment", "an experiment name")):
        value = tracking.get(key)
        if value is not None and not isinstance(value, str):  # "" is none: the sweep's own store
            raise SpecError(f"tracking.{key}: {value!r} is invalid; allowed {allowed} (text), or no tracking.{key}")
    _check_sqlite_uri(tracking.get("uri"))
    output = doc.get("output")
    if output is not None and (not isinstance(output, str) or not output.strip()):
        raise SpecError(
            f"output: {output!r} is invalid; allowed a directory path or a URI such as s3://bucket/sweeps/name"
        )
    objectives = ((doc.get("search") or {}).get("objectives") or {}) if isinstance(doc.get("search"), dict) else {}
    if isinstance(objectives, dict) and objectives:  # two objectives: the first is the search's metric
        if doc.get("metric", next(iter(objectives))) != next(iter(objectives)):
            raise SpecError(f"metric: {metric!r} is not the first of search.objectives; give one or the other")
        metric, mode = next(iter(objectives.items()))
        if (doc.get("scheduler") or "none") not in ("none", {"type": "none"}):
            raise SpecError("scheduler: early stopping compares one metric; a search with two objectives runs none")
    rows = _parse_rows(doc.get("rows"))
    labels = [r.label for r in rows]
    if doc.get("search") is not None and len(rows) > 1:
        raise SpecError("search: a search tunes the base configuration; remove 'rows' (or 'search')")
    if doc.get("claims") is not None and doc.get("search") is not None:
        raise SpecError("claims: a search samples its rows; claims compare a spec's named rows: give rows, "
                        "or leave claims out")  # fmt: skip
    try:
        claims = parse_claims(doc.get("claims"), labels, task)
        paper = parse_paper(doc.get("paper"), labels)
    except UserError as exc:
        raise SpecError(str(exc)) from None
    if adaptive and not claims:
        raise SpecError("seeds: adaptive seeds ({min, max}) add seeds where a claim is undecided, and this spec "
                        "states none: give claims (a list, or claims: table3), or a list of seeds")  # fmt: skip
    title = doc.get("title", "")
    if not isinstance(title, str):
        raise SpecError(f"title: {title!r} is invalid; allowed the report's title in words")
    spec = Spec(
        name=name,
        base=base,
        corpus=Corpus(**{"name": "bible-en-de", **corpus}),
        seeds=seeds,
        rows=rows,
        search=_parse_search(doc.get("search"), metrics),
        scheduler=_parse_scheduler(doc.get("scheduler")),
        resources=resources,
        max_concurrent=_number(doc.get("max_concurrent", 2), "max_concurrent", 1, integer=True),
        metric=metric,
        mode=mode,
        tracking=tracking,
        output=output,
        train=train,
        description=str(doc.get("description", "")),
        source=source,
        adaptive=adaptive,
        budget=parse_budget(doc.get("budget")),
        task=task,
        title=title.strip(),
        claims=claims,
        paper=paper,
    )
    return spec


def load_spec(path: str | Path) -> Spec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec file {str(path)!r} does not exist or is not a file")
    return parse_spec(read_document(p), str(p))  # bounded: bytes, nesting, aliases expanded


def plan(spec: Spec, profile_name: str) -> list[Trial]:
    """Validate everything (every trial's config at this profile) without running anything."""
    return spec.trials(get_profile(profile_name))

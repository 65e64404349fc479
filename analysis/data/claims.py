"""Claims as data: what a sweep's spec states before any result is seen, judged by analysis.stats.verdicts.

Each claim is a ``Claim``: comparisons of the spec's rows in terms of quality, the readings it is judged on and, for an
"about equal", the margin (see ``Claim`` for each field).  A spec states them in its ``claims:`` section
(``parse_claims``: one-line errors, "did you mean"); the paper's eight conclusions from Table 3 are such a section of
sweeps/specs/table3.yaml (``table3_claims()``), which other specs name with ``claims: table3``.  The paper's claims are
judged on dev BLEU (the paper's) and dev cross-entropy (ln PPL, where seed noise is far smaller), except for label
smoothing, which moves perplexity by design and is judged on the reading it names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path

from transformer_core.errors import UserError, did_you_mean
from transformer_core.rundir import KEY_ALLOWED, KEY_NAME, SAFE_NAME

from .adaptive_record import AdaptiveRecord, read_adaptive
from .metrics import CLAIM_READINGS, QUALITY, for_task


@dataclass(frozen=True)
class Claim:
    """One conclusion of the paper, stated as comparisons of rows before any result is seen.

    ``id``: the claim's name in the report and its CSV files (e.g. ``D-dropout-helps``).
    ``comparisons``: ``(row_a, relation, row_b)`` in terms of quality, whatever the reading: ``<`` row_a is worse
    than row_b, ``>`` better, ``~`` about equal within ``margin``, ``>=`` no worse than row_b by more than ``margin``
    (non-inferiority), ``<=`` no better by more than it.  ``row_b`` may be ``best:R1,R2,...``: whichever
    of those rows scored best on the reading (tested with a correction for having picked it).
    ``readings``: the readings it is judged on, names analysis.data.metrics.get_reading knows (an evaluation set's
    are ``SET:bleu``, ``SET:chrf``, ``SET:ce``).
    ``text``: the claim in words, as the report prints it.
    ``kind``: what the rows vary (attention, capacity, regularisation, positional); capacity and regularisation
    claims, whose direction is expected to invert in an undertrained regime, carry the report's regime caveat.
    ``margin``: for ``~``, ``>=`` and ``<=`` only, the largest difference still "about equal" (or "no worse"), in the
    reading's units: one number for every reading or ``{reading: margin}`` (held as a tuple of pairs; ``margin_for``
    reads it); None without them.
    """

    id: str
    comparisons: tuple[tuple[str, str, str], ...]
    readings: tuple[str, ...] = QUALITY
    text: str = ""
    kind: str = ""
    margin: float | tuple[tuple[str, float | None], ...] | None = None

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: normalised once here
        set_(self, "comparisons", tuple(tuple(c) for c in self.comparisons))
        set_(self, "readings", tuple(self.readings))
        if isinstance(self.margin, Mapping):
            set_(self, "margin", tuple(self.margin.items()))

    def margin_for(self, reading: str) -> float | None:
        """The margin ('~', '>=', '<=') on ``reading`` (None where the claim states none)."""
        if isinstance(self.margin, tuple):
            return dict(self.margin).get(reading)
        return self.margin

    def __getitem__(self, name: str):
        """Read a field by name, as from the mappings claims can also be given as (``Claim.of``)."""
        if name not in _FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    @classmethod
    def of(cls, claim: Claim | Mapping) -> Claim:
        """A Claim from a Claim or from a mapping of its fields (``id`` and ``comparisons`` at least)."""
        if isinstance(claim, Claim):
            return claim
        return cls(**{k: claim[k] for k in _FIELDS if k in claim and (k != "margin" or claim[k] is not None)})


_FIELDS = tuple(f.name for f in fields(Claim))


def as_claims(claims: Iterable[Claim | Mapping]) -> list[Claim]:
    """Claims given as Claims or as mappings of their fields, as Claims."""
    return [Claim.of(c) for c in claims]


UNDERTRAINED_KINDS = ("capacity", "regularisation")
KINDS = ("attention", "capacity", "regularisation", "positional", "other")
RELATIONS = {
    "<": "worse than",
    ">": "better than",
    "~": "about equal to",
    ">=": "no worse than",
    "<=": "no better than",
}
MARGINED = ("~", ">=", "<=")  # the relations judged against a margin: equivalence, non-inferiority and its mirror
CLAIM_KEYS = ("id", "text", "compare", "readings", "margin", "kind")
NAMED_CLAIMS = {"table3": "the paper's eight conclusions from Table 3, as sweeps/specs/table3.yaml states them"}
_COMPARISON = re.compile(r"^\s*([^\s<>~=]+)\s*(>=|<=|[<>~])\s*([^<>~=]+?)\s*$")
TABLE3_SPEC = Path(__file__).resolve().parents[2] / "sweeps" / "specs" / "table3.yaml"


def _comparison(text, path: str, rows: list[str]) -> tuple[str, str, str]:
    """``A < B``, ``A > B``, ``A ~ B``, ``A >= B``, ``A <= B`` or ``A < best of R1, R2, ...`` (quality: ``<`` A is
    worse than B; ``>=`` A is no worse than B by more than the margin) as the engine's (a, relation, b), every row
    checked against the spec's rows."""
    m = _COMPARISON.match(text) if isinstance(text, str) else None
    if not m:
        raise UserError(f"{path}: {text!r} is invalid; allowed 'ROW < ROW' (worse), 'ROW > ROW' (better), "
                        "'ROW ~ ROW' (about equal), 'ROW >= ROW' (no worse), 'ROW <= ROW' (no better), the last "
                        "three with a margin, or 'ROW < best of ROW, ROW, ...'")  # fmt: skip
    a, relation, right = m.groups()
    best = re.match(r"^best\s+of\s+(.+)$", right)
    names = [n.strip() for n in best.group(1).split(",")] if best else [right]
    for name in (a, *names):
        if name not in rows:
            raise UserError(f"{path}: row {name!r} is not a row of this spec{did_you_mean(name, rows)}; "
                            f"allowed {', '.join(rows)}")  # fmt: skip
    if best and (len(set(names)) < 2 or len(set(names)) != len(names)):
        raise UserError(f"{path}: 'best of' needs two or more different rows, got {', '.join(names)}")
    if a in names:
        raise UserError(f"{path}: row {a!r} is compared with itself; compare it with another row")
    if best and relation in MARGINED:
        raise UserError(f"{path}: {relation!r} compares two rows; 'best of' takes '<' or '>'")
    return a, relation, f"best:{','.join(names)}" if best else right


def _margin(raw, path: str, readings: tuple[str, ...], equal: str):
    """The claim's margin; ``equal``: its first relation judged against one ('~', '>=', '<='), "" where none is."""
    if raw is None:
        if equal:
            each = ", ".join(readings)
            what = "the largest difference still about equal" if equal == "~" else "the largest loss still no worse"
            raise UserError(f"{path}: a '{equal}' comparison needs a margin, {what}, in each reading's units: a "
                            f"number, or one per reading ({each})")  # fmt: skip
        return None
    if not equal:
        raise UserError(f"{path}: a margin is for '~', '>=' and '<=' comparisons only; this claim has none")

    def positive(v, where: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
            raise UserError(f"{where}: {v!r} is invalid; allowed a number > 0 in the reading's units")
        return float(v)

    if not isinstance(raw, Mapping):
        return positive(raw, path)
    allowed = (*readings, "chrf") if "dev_bleu" in readings else readings  # chrF: test and named sets' equivalence
    for key in raw:
        if key not in allowed:
            raise UserError(f"{path}: {key!r} is not a reading of this claim{did_you_mean(key, allowed)}; "
                            f"allowed {', '.join(allowed)}")  # fmt: skip
    missing = [r for r in readings if r not in raw]
    if missing:
        raise UserError(f"{path}: no margin for {', '.join(missing)}; give one for every reading of the claim")
    return {k: positive(v, f"{path}.{k}") for k, v in raw.items()}


def _once_each(comps: tuple, given: list, path: str) -> None:
    """Each pair of rows compared once in a claim: a repeated comparison would count twice in the report's family,
    and two contradicting ones (``P0 < base``, ``P0 > base``) would make a real effect read as mixed."""
    seen: dict = {}
    for i, (a, _, b) in enumerate(comps):
        key = (a, b) if b.startswith("best:") else tuple(sorted((a, b)))
        if key in seen:
            raise UserError(f"{path}.compare[{i}]: {given[i]!r} compares the rows of compare[{seen[key]}] "
                            f"({given[seen[key]]!r}) again; allowed each pair of rows once per claim")  # fmt: skip
        seen[key] = i


def parse_claim(raw, path: str, rows: list[str], task: str = "translation") -> Claim:
    """One claim of a spec's ``claims:`` list, checked against the spec's rows and task (one-line errors)."""
    if not isinstance(raw, Mapping):
        raise UserError(f"{path}: expected a mapping of {', '.join(CLAIM_KEYS)}, got {type(raw).__name__}")
    for key in raw:
        if key not in CLAIM_KEYS:
            hint = did_you_mean(key, CLAIM_KEYS)
            raise UserError(f"{path}: unknown key {key!r}{hint}; allowed {', '.join(CLAIM_KEYS)}")
    cid = raw.get("id")
    if not isinstance(cid, str) or not KEY_NAME.match(cid):
        raise UserError(f"{path}.id: {cid!r} is invalid; allowed {KEY_ALLOWED}, e.g. D-dropout-helps")
    compare = raw.get("compare")
    compare = [compare] if isinstance(compare, str) else compare
    if not isinstance(compare, list) or not compare:
        raise UserError(f"{path}.compare: {compare!r} is invalid; allowed a comparison such as 'P0 < base' or a "
                        "list of them")  # fmt: skip
    comps = tuple(_comparison(c, f"{path}.compare[{i}]", rows) for i, c in enumerate(compare))
    _once_each(comps, compare, path)
    allowed = for_task(task).readings
    readings = raw.get("readings", list(for_task(task).default_readings))
    readings = [readings] if isinstance(readings, str) else readings
    if not isinstance(readings, list) or not readings:
        raise UserError(f"{path}.readings: {readings!r} is invalid; allowed a list of {', '.join(allowed)}")
    for r in readings:
        if r not in allowed:
            at = " with task lm" if task == "lm" else ""
            raise UserError(f"{path}.readings: {r!r} is not a reading{at}{did_you_mean(r, allowed)}; "
                            f"allowed {', '.join(allowed)}")  # fmt: skip
    if len(set(readings)) != len(readings):
        raise UserError(f"{path}.readings: {readings} repeats a reading")
    kind = raw.get("kind", "other")
    if kind not in KINDS:
        caveat = " and ".join(UNDERTRAINED_KINDS)
        raise UserError(f"{path}.kind: {kind!r} is invalid{did_you_mean(kind, KINDS)}; allowed {', '.join(KINDS)} "
                        f"({caveat} claims carry the undertrained-regime caveat)")  # fmt: skip
    equal = next((rel for _, rel, _ in comps if rel in MARGINED), "")  # the first relation with a margin
    margin = _margin(raw.get("margin"), f"{path}.margin", tuple(readings), equal)
    text = raw.get("text")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise UserError(f"{path}.text: {text!r} is invalid; allowed the claim in words")
    text = text.strip() if text else "; ".join(f"{a} {RELATIONS[rel]} {_said(b)}" for a, rel, b in comps)
    return Claim(cid, comps, tuple(readings), text, kind, margin)


def _said(b: str) -> str:
    return f"the best of {b[5:].replace(',', ', ')}" if b.startswith("best:") else b


def parse_claims(raw, rows: list[str], task: str = "translation", path: str = "claims") -> list[Claim]:
    """A spec's ``claims:``: a list of claims (``parse_claim``), or the name of a shipped set (``table3``: the
    paper's, each judged where the spec has its rows).  None: the spec states no claims."""
    if raw is None:
        return []
    if isinstance(raw, str):
        if raw not in NAMED_CLAIMS:
            named = ", ".join(f"{k} ({v})" for k, v in NAMED_CLAIMS.items())
            hint = did_you_mean(raw, NAMED_CLAIMS)
            raise UserError(f"{path}: {raw!r} is not a named set of claims{hint}; allowed a list of claims or "
                            f"{named}")  # fmt: skip
        return table3_claims()
    if not isinstance(raw, list):
        raise UserError(f"{path}: expected a list of claims (each with id and compare) or the name table3, got "
                        f"{type(raw).__name__}")  # fmt: skip
    out = [parse_claim(c, f"{path}[{i}]", rows, task) for i, c in enumerate(raw)]
    ids = [c.id for c in out]
    for i, cid in enumerate(ids):
        if cid in ids[:i]:
            raise UserError(f"{path}[{i}].id: {cid!r} is used twice; claim ids must be unique")
    return out


def claim_document(claim: Claim) -> dict:
    """A claim as plain data (sweep.json's record of what the spec stated): ``Claim.of`` reads it back."""
    margin = dict(claim.margin) if isinstance(claim.margin, tuple) else claim.margin
    return {"id": claim.id, "text": claim.text, "kind": claim.kind, "readings": list(claim.readings),
            "comparisons": [list(c) for c in claim.comparisons], "margin": margin}  # fmt: skip


def recorded_claims(raw, where: str) -> list[Claim]:
    """The claims sweep.json recorded (``claim_document`` each), each checked as the spec's claims are (an id,
    one or more comparisons of named rows, readings the report knows, the margin its relations need), or one line
    naming the first field of the wrong shape (a record edited by hand)."""
    try:
        if not isinstance(raw, list):
            raise _Shape("report.claims", raw, "a list of claims")
        out = [_recorded(doc, f"report.claims[{i}]") for i, doc in enumerate(raw)]
        ids = [c.id for c in out]
        for i, cid in enumerate(ids):
            if cid in ids[:i]:
                raise _Shape(f"report.claims[{i}].id", cid, "an id no other claim has")
        return out
    except _Shape as exc:
        raise UserError(
            f"sweep.json in {where} records claims of the wrong shape (edited by hand?): {exc}; restore it "
            "from a copy, or resume the sweep with its spec to record them again"
        ) from None


class _Shape(Exception):
    """A field of a recorded claim that is not what ``claim_document`` writes: its path, its value, what is allowed
    (or, with ``path`` alone, the spec's own one-line rule)."""

    def __init__(self, path: str, value=None, allowed: str = ""):
        shown = repr(value)
        shown = shown[:80] + "..." if len(shown) > 80 else shown
        super().__init__(f"{path} is {shown}, allowed {allowed}" if allowed else path)


RECORDED_READINGS = CLAIM_READINGS


def _recorded_row(name, path: str) -> str:
    if not isinstance(name, str) or not SAFE_NAME.match(name):
        raise _Shape(path, name, "a row's label")
    return name


def _recorded_comparison(c, path: str) -> tuple[str, str, str]:
    """One (a, relation, b) of a recorded claim: b a row or ``best:R1,R2,...`` (two or more other rows)."""
    if not isinstance(c, list) or len(c) != 3:
        raise _Shape(path, c, "[ROW, RELATION, ROW]")
    a, relation, b = c
    _recorded_row(a, f"{path}[0]")
    if relation not in RELATIONS:
        raise _Shape(f"{path}[1]", relation, f"one of {', '.join(RELATIONS)}")
    names = b[5:].split(",") if isinstance(b, str) and b.startswith("best:") else [b]
    for name in names:
        _recorded_row(name, f"{path}[2]")
    if a in names or (len(names) > 1 and (len(set(names)) != len(names) or relation in MARGINED)):
        raise _Shape(f"{path}[2]", b, "another row, or 'best:R1,R2,...' of two or more other rows with '<' or '>'")
    return a, relation, b


def _recorded(doc, path: str) -> Claim:
    """One recorded claim, every field checked (``_Shape`` names the first that is wrong)."""
    if not isinstance(doc, Mapping):
        raise _Shape(path, doc, "a claim (id, text, kind, readings, comparisons, margin)")
    cid = doc.get("id")
    if not isinstance(cid, str) or not KEY_NAME.match(cid):
        raise _Shape(f"{path}.id", cid, KEY_ALLOWED)
    comparisons = doc.get("comparisons")
    if not isinstance(comparisons, list) or not comparisons:
        raise _Shape(f"{path}.comparisons", comparisons, "a list of one or more [ROW, RELATION, ROW]")
    comps = tuple(_recorded_comparison(c, f"{path}.comparisons[{i}]") for i, c in enumerate(comparisons))
    readings = doc.get("readings", list(QUALITY))
    ok = isinstance(readings, list) and readings and len(set(map(str, readings))) == len(readings)
    if not ok or not all(isinstance(r, str) and r in RECORDED_READINGS for r in readings):
        raise _Shape(f"{path}.readings", readings, f"a list of different readings of {', '.join(RECORDED_READINGS)}")
    for key, allowed in (("text", "the claim in words"), ("kind", f"one of {', '.join(KINDS)}")):
        value = doc.get(key, "")
        if not isinstance(value, str) or (key == "kind" and value and value not in KINDS):
            raise _Shape(f"{path}.{key}", value, allowed)
    try:
        _once_each(comps, [" ".join(c) for c in comps], f"{path}.comparisons")
        equal = next((rel for _, rel, _ in comps if rel in MARGINED), "")
        margin = _margin(doc.get("margin"), f"{path}.margin", tuple(readings), equal)
    except UserError as exc:  # the spec's own rule: its line names the field
        raise _Shape(str(exc)) from None
    return Claim(cid, comps, tuple(readings), doc.get("text", ""), doc.get("kind", ""), margin)


@cache
def _paper() -> tuple[Claim, ...]:
    import yaml

    doc = yaml.safe_load(TABLE3_SPEC.read_text(encoding="utf-8"))
    rows = ["base", *(str(r["label"]) for group in doc["rows"].values() for r in group)]
    return tuple(parse_claims(doc["claims"], rows))


def table3_claims() -> list[Claim]:
    """The paper's claims, as the shipped Table 3 spec states them (its ``claims:``, rows checked against its rows):
    read on the first call, not at import, and a fresh list each call (the claims themselves are frozen)."""
    return list(_paper())


BLEU_ONLY = "stated in BLEU only: a language-model sweep has no BLEU"


def claims_for(task: str, claims: list[Claim] | None = None) -> tuple[list[Claim], list[Claim]]:
    """(the claims a sweep of ``task`` judges, those it cannot).  Each claim is judged on those of its readings the
    task has (analysis.data.metrics: ``Task.readings``): a translation sweep judges every claim on every reading; a
    language model (task lm) judges Table 3's claims on dev cross-entropy, and a claim stated only in BLEU terms is
    left apart (the report shows it not measured)."""
    claims = table3_claims() if claims is None else claims
    claims = as_claims(claims)
    allowed = for_task(task).readings
    if all(r in allowed for c in claims for r in c.readings):
        return claims, []
    judged = [replace(c, readings=tuple(r for r in c.readings if r in allowed)) for c in claims]
    return [c for c in judged if c.readings], [c for c in claims if not set(c.readings) & set(allowed)]


def claim_rows(claims: list[Claim] | None = None) -> dict[str, list[str]]:
    """The rows each claim compares (best: candidates included), for links and adaptive seeds."""
    claims = table3_claims() if claims is None else claims
    out = {}
    for c in as_claims(claims):
        rows: list[str] = []
        for a, _, b in c.comparisons:
            for name in (a, *(b[5:].split(",") if b.startswith("best:") else [b])):
                if name not in rows:
                    rows.append(name)
        out[c.id] = rows
    return out


def budget_unreached(adaptive: AdaptiveRecord | dict | None, judged: frozenset | set = frozenset()) -> list[str]:
    """The report's line on the claims a spent wall-clock budget did not reach (sweep.json's adaptive record,
    written by sweeps.run.adaptive when the budget ran out): each with the budget, over every session of the sweep,
    that the measured trial times say would finish it.  Claims in ``judged`` (the table judges them: a later
    session finished their rows) are left out."""
    ad = read_adaptive(adaptive)
    unreached = {c: b for c, b in (ad.unreached if ad else {}).items() if c not in judged}
    if not unreached:
        return []
    each = "; ".join(f"{claim}: DEMO_BUDGET={budget}" for claim, budget in unreached.items())
    return [
        f"**Not measured: budget**: the budget was spent before every row of these claims had its seeds, so they "
        f"are not judged. The budget that would finish each (every session counts; estimated from the measured "
        f"trial times): {each} (`make demo DEMO_BUDGET=...`, or `tsweep run ... --resume --budget ...`)."
    ]

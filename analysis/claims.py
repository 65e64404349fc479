"""The paper's conclusions from Table 3, as data (judged by analysis.verdicts).

Each conclusion is a ``Claim``: comparisons of Table 3 rows in terms of quality, the readings it is judged on and,
for an "about equal", the margin; all fixed here before any result is seen (see ``Claim`` for each field).
Claims are judged on dev BLEU (the paper's) and dev cross-entropy (ln PPL, where seed noise is far smaller),
except for label smoothing, which moves perplexity by design and is judged on the reading it names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace

QUALITY = ("dev_bleu", "dev_ce")


@dataclass(frozen=True)
class Claim:
    """One conclusion of the paper, stated as comparisons of rows before any result is seen.

    ``id``: the claim's name in the report and its CSV files (e.g. ``D-dropout-helps``).
    ``comparisons``: ``(row_a, relation, row_b)`` in terms of quality, whatever the reading: ``<`` row_a is worse
    than row_b, ``>`` better, ``~`` about equal within ``margin``.  ``row_b`` may be ``best:R1,R2,...``: whichever
    of those rows scored best on the reading (tested with a correction for having picked it).
    ``readings``: the readings it is judged on, keys of analysis.verdicts.READINGS (an evaluation set's are
    ``SET:bleu``, ``SET:chrf``, ``SET:ce``).
    ``text``: the claim in words, as the report prints it.
    ``kind``: what the rows vary (attention, capacity, regularisation, positional); capacity and regularisation
    claims, whose direction is expected to invert in an undertrained regime, carry the report's regime caveat.
    ``margin``: for ``~`` only, the largest difference still "about equal", in the reading's units: one number for
    every reading or ``{reading: margin}`` (held as a tuple of pairs; ``margin_for`` reads it); None without ``~``.
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
        """The '~' margin on ``reading`` (None where the claim states none)."""
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


CLAIMS = [
    Claim("A-one-head", kind="attention",
          text="Single-head attention is worse than the best head count (paper: 0.9 BLEU worse)",
          comparisons=[("A1", "<", "best:base,A2,A3,A4")]),
    Claim("A-too-many-heads", kind="attention",
          text="Quality also drops off with too many heads (A4 below the best)",
          comparisons=[("A4", "<", "best:base,A2,A3")]),
    Claim("B-smaller-dk", kind="capacity",
          text="Reducing the attention key size d_k hurts model quality",
          comparisons=[("B1", "<", "base"), ("B2", "<", "base")]),
    Claim("C-bigger-better", kind="capacity",
          text="Bigger models are better",
          comparisons=[("C1", "<", "base"), ("C2", "<", "base"), ("C3", ">", "base"), ("C4", "<", "base"),
                       ("C5", ">", "base"), ("C6", "<", "base"), ("C7", ">", "base")]),
    Claim("D-dropout-helps", kind="regularisation",
          text="Dropout is very helpful in avoiding over-fitting (D1, no dropout, is worse)",
          comparisons=[("D1", "<", "base")]),
    Claim("D-ls-hurts-ppl", kind="regularisation", readings=("dev_ce",),
          text="Label smoothing hurts perplexity (D3, no smoothing, has lower PPL)",
          comparisons=[("D3", ">", "base")]),
    Claim("D-ls-helps-bleu", kind="regularisation", readings=("dev_bleu",),
          text="Label smoothing improves BLEU (D3, no smoothing, has lower BLEU)",
          comparisons=[("D3", "<", "base")]),
    Claim("E-learned-positions", kind="positional",
          text="Learned positional embeddings give nearly identical results to sinusoids",
          comparisons=[("E1", "~", "base")],
          margin={"dev_bleu": 1.0, "dev_ce": 0.025}),  # 1 BLEU; 0.025 nats = 2.5% of PPL
]  # fmt: skip

UNDERTRAINED_KINDS = ("capacity", "regularisation")
PERPLEXITY = ("dev_ce",)  # the readings a language-model sweep (task lm) has: no BLEU
BLEU_ONLY = "stated in BLEU only: a language-model sweep has no BLEU"


def claims_for(task: str, claims: list[Claim] = CLAIMS) -> tuple[list[Claim], list[Claim]]:
    """(the claims a sweep of ``task`` judges, those it cannot).  A translation sweep judges every claim on
    every reading; a language model (task lm) judges each claim on its perplexity reading only (dev
    cross-entropy), and a claim stated only in BLEU terms is left apart (the report shows it not measured)."""
    claims = as_claims(claims)
    if task != "lm":
        return claims, []
    judged = [replace(c, readings=tuple(r for r in c.readings if r in PERPLEXITY)) for c in claims]
    return [c for c in judged if c.readings], [c for c in claims if not set(c.readings) & set(PERPLEXITY)]


def claim_rows(claims: list[Claim] = CLAIMS) -> dict[str, list[str]]:
    """The rows each claim compares (best: candidates included), for links and adaptive seeds."""
    out = {}
    for c in as_claims(claims):
        rows: list[str] = []
        for a, _, b in c.comparisons:
            for name in (a, *(b[5:].split(",") if b.startswith("best:") else [b])):
                if name not in rows:
                    rows.append(name)
        out[c.id] = rows
    return out


def budget_unreached(adaptive: dict | None, judged: frozenset | set = frozenset()) -> list[str]:
    """The report's line on the claims a spent wall-clock budget did not reach (sweep.json's adaptive record,
    written by sweeps.adaptive when the budget ran out): each with the budget, over every session of the sweep,
    that the measured trial times say would finish it.  Claims in ``judged`` (the table judges them: a later
    session finished their rows) are left out."""
    unreached = {c: b for c, b in ((adaptive or {}).get("unreached") or {}).items() if c not in judged}
    if not unreached:
        return []
    each = "; ".join(f"{claim}: DEMO_BUDGET={budget}" for claim, budget in unreached.items())
    return [
        f"**Not measured: budget**: the budget was spent before every row of these claims had its seeds, so they "
        f"are not judged. The budget that would finish each (every session counts; estimated from the measured "
        f"trial times): {each} (`make demo DEMO_BUDGET=...`, or `tsweep run ... --resume --budget ...`)."
    ]

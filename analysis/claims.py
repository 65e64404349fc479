"""The paper's conclusions from Table 3, as data (judged by analysis.verdicts).

Each claim lists comparisons ``(row_a, relation, row_b)`` in terms of quality, whatever the reading:
``<`` row_a is worse than row_b, ``>`` better, ``~`` about equal within ``margin`` (in the reading's
units, fixed here before any result is seen).  ``best:R1,R2`` is whichever of those rows scored best
on the reading (tested with a correction for having picked it).  ``readings`` are the metrics a claim
is judged on: dev BLEU (the paper's) and dev cross-entropy (ln PPL, where seed noise is far smaller),
except for label smoothing, which moves perplexity by design and is judged on the reading it names.
``kind`` marks capacity and regularisation claims, whose direction is expected to invert in an
undertrained regime (the report's regime flag).
"""

from __future__ import annotations

QUALITY = ("dev_bleu", "dev_ce")

CLAIMS = [
    {"id": "A-one-head", "kind": "attention", "readings": QUALITY,
     "text": "Single-head attention is worse than the best head count (paper: 0.9 BLEU worse)",
     "comparisons": [("A1", "<", "best:base,A2,A3,A4")]},
    {"id": "A-too-many-heads", "kind": "attention", "readings": QUALITY,
     "text": "Quality also drops off with too many heads (A4 below the best)",
     "comparisons": [("A4", "<", "best:base,A2,A3")]},
    {"id": "B-smaller-dk", "kind": "capacity", "readings": QUALITY,
     "text": "Reducing the attention key size d_k hurts model quality",
     "comparisons": [("B1", "<", "base"), ("B2", "<", "base")]},
    {"id": "C-bigger-better", "kind": "capacity", "readings": QUALITY,
     "text": "Bigger models are better",
     "comparisons": [("C1", "<", "base"), ("C2", "<", "base"), ("C3", ">", "base"), ("C4", "<", "base"),
                     ("C5", ">", "base"), ("C6", "<", "base"), ("C7", ">", "base")]},
    {"id": "D-dropout-helps", "kind": "regularisation", "readings": QUALITY,
     "text": "Dropout is very helpful in avoiding over-fitting (D1, no dropout, is worse)",
     "comparisons": [("D1", "<", "base")]},
    {"id": "D-ls-hurts-ppl", "kind": "regularisation", "readings": ("dev_ce",),
     "text": "Label smoothing hurts perplexity (D3, no smoothing, has lower PPL)",
     "comparisons": [("D3", ">", "base")]},
    {"id": "D-ls-helps-bleu", "kind": "regularisation", "readings": ("dev_bleu",),
     "text": "Label smoothing improves BLEU (D3, no smoothing, has lower BLEU)",
     "comparisons": [("D3", "<", "base")]},
    {"id": "E-learned-positions", "kind": "positional", "readings": QUALITY,
     "text": "Learned positional embeddings give nearly identical results to sinusoids",
     "comparisons": [("E1", "~", "base")],
     "margin": {"dev_bleu": 1.0, "dev_ce": 0.025}},  # 1 BLEU; 0.025 nats = 2.5% of PPL
]  # fmt: skip

UNDERTRAINED_KINDS = ("capacity", "regularisation")
PERPLEXITY = ("dev_ce",)  # the readings a language-model sweep (task lm) has: no BLEU
BLEU_ONLY = "stated in BLEU only: a language-model sweep has no BLEU"


def claims_for(task: str, claims: list[dict] = CLAIMS) -> tuple[list[dict], list[dict]]:
    """(the claims a sweep of ``task`` judges, those it cannot).  A translation sweep judges every claim on
    every reading; a language model (task lm) judges each claim on its perplexity reading only (dev
    cross-entropy), and a claim stated only in BLEU terms is left apart (the report shows it not measured)."""
    if task != "lm":
        return claims, []
    judged = [{**c, "readings": tuple(r for r in c["readings"] if r in PERPLEXITY)} for c in claims]
    return [c for c in judged if c["readings"]], [c for c in claims if not set(c["readings"]) & set(PERPLEXITY)]


def claim_rows(claims: list[dict] = CLAIMS) -> dict[str, list[str]]:
    """The rows each claim compares (best: candidates included), for links and adaptive seeds."""
    out = {}
    for c in claims:
        rows: list[str] = []
        for a, _, b in c["comparisons"]:
            for name in (a, *(b[5:].split(",") if b.startswith("best:") else [b])):
                if name not in rows:
                    rows.append(name)
        out[c["id"]] = rows
    return out


def budget_unreached(adaptive: dict | None) -> list[str]:
    """The report's line on the claims a spent wall-clock budget did not reach (sweep.json's adaptive record,
    written by sweeps.adaptive when the budget ran out): each with the budget, over every session of the sweep,
    that the measured trial times say would finish it."""
    unreached = (adaptive or {}).get("unreached") or {}
    if not unreached:
        return []
    each = "; ".join(f"{claim}: DEMO_BUDGET={budget}" for claim, budget in unreached.items())
    return [
        f"**Not measured: budget**: the budget was spent before every row of these claims had its seeds, so they "
        f"are not judged. The budget that would finish each (every session counts; estimated from the measured "
        f"trial times): {each} (`make demo DEMO_BUDGET=...`, or `tsweep run ... --resume --budget ...`)."
    ]

"""The paper's conclusions from Table 3, as data, judged on our results.

Each claim is a list of comparisons ``(row_a, relation, row_b, metric)``:
relation '<' or '>' (row_a below/above row_b) or '~' (about equal, within
``tolerance``).  ``best:R1,R2`` stands for whichever of those rows scored best.
A comparison is significant when the 95% intervals across seeds do not
overlap (two or more seeds) or, for BLEU, when sacrebleu's paired bootstrap
on the dev hypotheses gives p < 0.05 (combined across seeds).
"""

from __future__ import annotations

CLAIMS = [
    {
        "id": "A-one-head",
        "text": "Single-head attention is worse than the best head count (paper: 0.9 BLEU worse)",
        "comparisons": [("A1", "<", "best:base,A2,A3,A4", "dev_bleu")],
    },
    {
        "id": "A-too-many-heads",
        "text": "Quality also drops off with too many heads (A4 below the best)",
        "comparisons": [("A4", "<", "best:base,A2,A3", "dev_bleu")],
    },
    {
        "id": "B-smaller-dk",
        "text": "Reducing the attention key size d_k hurts model quality",
        "comparisons": [("B1", "<", "base", "dev_bleu"), ("B2", "<", "base", "dev_bleu")],
    },
    {
        "id": "C-bigger-better",
        "text": "Bigger models are better",
        "comparisons": [
            ("C1", "<", "base", "dev_bleu"),
            ("C2", "<", "base", "dev_bleu"),
            ("base", "<", "C3", "dev_bleu"),
            ("C4", "<", "base", "dev_bleu"),
            ("base", "<", "C5", "dev_bleu"),
            ("C6", "<", "base", "dev_bleu"),
            ("base", "<", "C7", "dev_bleu"),
        ],
    },
    {
        "id": "D-dropout-helps",
        "text": "Dropout is very helpful in avoiding over-fitting (D1, no dropout, is worse)",
        "comparisons": [("D1", "<", "base", "dev_bleu")],
    },
    {
        "id": "D-ls-hurts-ppl",
        "text": "Label smoothing hurts perplexity (D3, no smoothing, has lower PPL)",
        "comparisons": [("D3", "<", "base", "dev_ppl")],
    },
    {
        "id": "D-ls-helps-bleu",
        "text": "Label smoothing improves BLEU (D3, no smoothing, has lower BLEU)",
        "comparisons": [("D3", "<", "base", "dev_bleu")],
    },
    {
        "id": "E-learned-positions",
        "text": "Learned positional embeddings give nearly identical results to sinusoids",
        "comparisons": [("E1", "~", "base", "dev_bleu")],
        "tolerance": 1.0,
    },
]

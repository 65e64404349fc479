"""Dev and test sentences of the known corpus recipes once prepared (``meta.json``'s ``sizes``), for the time
estimate of a plan (sweeps/plan/estimate.py) made where no prepared copy is at hand.  A trial's final evaluation
decodes both splits whole, so at small profiles their size, not the training, sets most of a trial's time.

Either direction of a pair has the same sizes (cleaning drops a pair whatever its direction).  A corpus of
'+'-joined recipes has the sum of its parts'.  Corpora not listed here (the Debian recipes, the user's files)
have their sizes only once prepared.  tests/sweeps/test_eval_estimate.py checks the bible rows against a
prepared copy where one is at hand.
"""

from __future__ import annotations

from typing import Optional

# recipe -> {split: sentences after cleaning}
SPLIT_SIZES: dict[str, dict[str, int]] = {
    # the verses of Mark (dev) and Romans (test) left after cleaning and de-duplication (prepared 2026-11-27)
    "bible-en-de": {"dev": 675, "test": 433},
    "bible-en-fr": {"dev": 677, "test": 433},
    # newstest2013 and newstest2014 (sacrebleu wmt13, wmt14/full), kept verbatim
    "wmt14-en-de": {"dev": 3000, "test": 3003},
    "wmt14-en-fr": {"dev": 3000, "test": 3003},
}


def known_split_sizes(name: str) -> Optional[dict[str, int]]:
    """{split: sentences} of a recipe name (or '+'-joined recipe names) from SPLIT_SIZES; None where any part
    is not listed."""
    parts = name.split("+")
    if not all(p in SPLIT_SIZES for p in parts):
        return None
    return {s: sum(SPLIT_SIZES[p][s] for p in parts) for s in ("dev", "test")}

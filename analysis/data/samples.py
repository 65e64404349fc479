"""The name of a search sample: one configuration the searcher proposed, whatever seeds it runs with.

A search sample is a row of its own (its seeds are replicates of that configuration only, never of
another sample's).  Its label is derived from the sampled values alone, so every seed of it, and a
re-run of it with fresh seeds, gets the same label; two different samples never share one.
"""

from __future__ import annotations

import hashlib
import json

SEARCH_GROUP = "search"  # the group of a search sample's trials
CONFIRM_GROUP = "confirm"  # the group of a best sample re-run with fresh seeds after the search


def sample_label(sampled: dict) -> str:
    """sample-<8 hex digits> of the sampled knobs (sorted keys, JSON values): a safe row label and path part."""
    text = json.dumps({str(k): sampled[k] for k in sorted(sampled)}, sort_keys=True, default=str)
    return "sample-" + hashlib.sha256(text.encode()).hexdigest()[:8]

"""How a number that may be missing is written: "-" in every table, report and terminal line (one rule)."""

from __future__ import annotations

MISSING = "-"


def is_missing(x) -> bool:
    """None, or a value that is not a number (a NaN of Python, numpy or pandas, pandas' NA)."""
    if x is None:
        return True
    try:
        return bool(x != x)
    except TypeError:  # pandas' NA: its comparisons are NA, which has no truth value
        return True


def number(x, spec: str = "") -> str:
    """``x`` written with the format spec ``spec`` (``format(x, spec)``; "" is str), or "-" where it is missing."""
    return MISSING if is_missing(x) else format(x, spec)

"""One rule for a number that may be missing: "-" for None and every kind of NaN, format(x, spec) otherwise."""

import math

import numpy as np
import pandas as pd

from transformer_core.formatting import MISSING, is_missing, number


def test_none_and_every_nan_are_missing_and_written_as_a_dash():
    for x in (None, math.nan, float("nan"), np.float32("nan"), np.nan, pd.NA, pd.NaT):
        assert is_missing(x) and number(x, ".2f") == MISSING == "-"


def test_a_number_is_written_with_its_format_spec():
    assert number(1.23456, ".2f") == "1.23" and number(-0.5, "+.3f") == "-0.500"
    assert number(12345.0, ".2e") == "1.23e+04"
    assert number(7) == "7" and number(np.float64(2.5), ".1f") == "2.5" and number(0.0, ".1f") == "0.0"
    assert not is_missing(0) and not is_missing("text") and number("text") == "text"

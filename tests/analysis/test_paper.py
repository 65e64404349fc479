"""The paper's Table 3 as data (analysis/paper_table3.csv): every row builds a model whose parameters the closed
form counts."""

import dataclasses

import pytest
import torch

import transformer_core as tc
from analysis.data.paper import load_table3, row_overrides


@pytest.mark.parametrize("row", load_table3(), ids=lambda r: r["row"])
def test_parameter_count_matches_closed_form_for_every_table3_row(row):
    cfg = dataclasses.replace(tc.PRESETS["base"], **row_overrides(row))
    # a small vocabulary keeps this fast; the formula's vocabulary term is checked too
    for vocab in (100, 1000):
        with torch.device("meta"):  # shapes only: the full-size rows are built without allocating their weights
            model = tc.build_model(cfg, vocab)
        assert next(model.parameters()).is_meta
        assert tc.count_parameters(model) == tc.closed_form_parameters(cfg, vocab)

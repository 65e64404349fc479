"""One home per shared contract: the knob table covers every config field; search samples scale like rows."""

import dataclasses

from transformer_core import knobs
from transformer_core.config import ModelConfig
from transformer_core.run_config import DataConfig, TrainConfig


def test_every_config_field_is_in_the_knob_table_and_nothing_else():
    fields = {f.name for cls in (ModelConfig, TrainConfig, DataConfig) for f in dataclasses.fields(cls)}
    table = {k.name for k in knobs.KNOBS if k.where != "spec"}
    assert fields == table, (fields - table, table - fields)
    where = {f.name: w for w, cls in (("model", ModelConfig), ("data", DataConfig)) for f in dataclasses.fields(cls)}
    for k in knobs.KNOBS:
        if k.name in where and k.where != "run":
            assert k.where == where[k.name], k.name


def test_lists_are_drawn_from_the_table():
    assert set(knobs.WIDTH_KNOBS) == {"d_model", "d_ff", "d_k", "d_v"}
    assert "eps_ls" in knobs.ROW_KNOBS and "train_steps" in knobs.ROW_KNOBS and "steps" not in knobs.ROW_KNOBS
    assert "threads" not in knobs.ROW_KNOBS and "corpus" not in knobs.ROW_KNOBS
    assert knobs.knob("eps_ls").where == "recipe" and knobs.knob("eps_ls").paper
    assert "| `positional` |" in knobs.markdown_table()

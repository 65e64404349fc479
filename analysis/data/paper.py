"""The paper's Table 3 and facts (Vaswani et al. 2017), kept as data in the package."""

from __future__ import annotations

import csv
from importlib import resources

from transformer_core.config import PAPER_RECIPE
from transformer_core.knobs import PAPER_COLUMNS, knob

# Table 3's columns that configure a trained model (the model's knobs and label smoothing, a recipe field);
# train_steps, the remaining column, is the spec's and scaled by the profile
KNOBS = tuple(n for n in PAPER_COLUMNS if knob(n).where in ("model", "recipe"))
PAPER_FACTS = {
    "vocab": 37000,
    "base_steps": PAPER_RECIPE["base"]["train_steps"],
    "big_steps": PAPER_RECIPE["big"]["train_steps"],
    "train_flops": {"base": 3.3e18, "big": 2.3e19},
    "test_bleu_en_de": {"base": 27.3, "big": 28.4},
    "dev_set": "newstest2013",
}


def _num(value: str):
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


def load_table3() -> list[dict]:
    """Rows of the paper's Table 3 in the printed order, blanks filled with base values."""
    text = resources.files("analysis.data").joinpath("paper_table3.csv").read_text(encoding="utf-8")
    return [{k: _num(v) for k, v in row.items()} for row in csv.DictReader(text.splitlines())]


def row_overrides(row: dict) -> dict:
    """The ModelConfig knobs of one Table 3 row (eps_ls belongs to training)."""
    return {k: row[k] for k in KNOBS if knob(k).where == "model"}


PAPERS = {"table3": "Table 3 of the paper: rows labelled as its rows (base, A1 ... E1, big) show its numbers"}


def parse_paper(raw, rows: list[str], path: str = "paper") -> dict[str, str]:
    """A spec's ``paper:`` as {our row: the paper's Table 3 row}: ``table3`` maps each row whose label is a row
    of the paper's table to it; a mapping names them one by one.  None (the default): no paper columns."""
    from transformer_core.errors import UserError, did_you_mean

    if raw is None:
        return {}
    table = [r["row"] for r in load_table3()]
    if isinstance(raw, str):
        if raw not in PAPERS:
            raise UserError(f"{path}: {raw!r} is invalid; allowed table3 ({PAPERS['table3']}) or a mapping of "
                            "this spec's rows to the paper's, e.g. {nodrop: D1}")  # fmt: skip
        return {r: r for r in rows if r in table}
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected table3 or a mapping of rows to the paper's rows, got {type(raw).__name__}")
    for ours, theirs in raw.items():
        for value, allowed, what in ((ours, rows, "a row of this spec"), (theirs, table, "a row of Table 3")):
            if value not in allowed:
                hint = did_you_mean(value, allowed)
                raise UserError(f"{path}: {value!r} is not {what}{hint}; allowed {', '.join(allowed)}")
    return {str(k): str(v) for k, v in raw.items()}

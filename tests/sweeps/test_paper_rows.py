"""Table 3's rows live twice: as a spec's rows (sweeps/specs/table3.yaml: what a sweep trains) and with the paper's
numbers (analysis/paper_table3.csv: what the report shows beside ours).  The two agree, row by row and knob by knob."""

from analysis.data.paper import KNOBS, load_table3
from sweeps.spec.sweep_spec import load_spec
from tests.helpers import ROOT
from transformer_core.config import paper_values

COMPARED = (*KNOBS, "train_steps")  # the knob columns of the paper's table and the row's training steps


def test_the_spec_trains_the_rows_the_paper_printed():
    spec = load_spec(ROOT / "sweeps" / "specs" / "table3.yaml")
    preset = spec.base.get("preset", "base")
    printed = load_table3()
    assert [(r.group, r.label) for r in spec.rows] == [(p["group"], p["row"]) for p in printed]
    for row, paper in zip(spec.rows, printed):
        trained = paper_values(preset, {**{k: v for k, v in spec.base.items() if k != "preset"}, **row.overrides})
        assert {k: trained[k] for k in COMPARED} == {k: paper[k] for k in COMPARED}, row.label


def test_every_knob_of_the_paper_table_is_compared():
    header = (ROOT / "analysis" / "data" / "paper_table3.csv").read_text().splitlines()[0].split(",")
    assert [c for c in header if c not in ("group", "row", "ppl_dev", "bleu_dev", "params_millions")] == list(COMPARED)

"""A search spec's options: seeds: N, confirm, two objectives, warm_start; each refused in one line when wrong."""

import pytest

from sweeps.spec.sweep_spec import Confirm, SpecError, parse_spec

SPACE = {"lr_scale": {"type": "uniform", "low": 0.1, "high": 1.0}}


def _search(**options):
    return {"name": "s", "search": {"samples": 3, "space": SPACE, **options}}


def test_search_options_are_parsed():
    assert parse_spec({**_search(), "seeds": 3}).seeds == [1, 2, 3]
    s = parse_spec(_search(confirm={"top": 2, "seeds": 4}, objectives={"dev_bleu": "max", "params": "min"},
                           warm_start="sweep_runs/earlier"))  # fmt: skip
    assert s.search.confirm == Confirm(top=2, seeds=4) and s.search.warm_start == "sweep_runs/earlier"
    assert s.search.objectives == [{"metric": "dev_bleu", "mode": "max"}, {"metric": "params", "mode": "min"}]
    assert (s.metric, s.mode) == ("dev_bleu", "max")
    s = parse_spec(_search(objectives={"dev_ppl": "min", "wall_seconds": "min"}))
    assert (s.metric, s.mode) == ("dev_ppl", "min")  # the first objective is the search's metric


BAD = [
    ({"seeds": 0}, "seeds: 0 is invalid; allowed a number of seeds"),
    (_search(confirm={"top": 0}), "search.confirm.top: 0 is invalid; allowed an integer in [1, 1000]"),
    (_search(confirm={"best": 2}), "search.confirm: unknown key 'best'"),
    (_search(objectives={"dev_bleu": "max"}), "search.objectives: {'dev_bleu': 'max'} is invalid; allowed two"),
    (_search(objectives={"dev_bleu": "up", "params": "min"}), "allowed two metrics, each max or min"),
    (_search(objectives={"dev_bleu": "max", "flops": "min"}), "unknown key 'flops' (did you mean 'train_flops'?)"),
    ({**_search(objectives={"dev_bleu": "max", "params": "min"}), "scheduler": "asha"}, "a search with two objec"),
    ({**_search(objectives={"dev_bleu": "max", "params": "min"}), "metric": "dev_ppl"}, "not the first of search.obj"),
    (_search(warm_start=""), "search.warm_start: '' is invalid; allowed the directory of an earlier search sweep"),
]


@pytest.mark.parametrize("doc,message", BAD, ids=[m for _, m in BAD])
def test_bad_search_options_are_one_clear_line(doc, message):
    with pytest.raises(SpecError) as err:
        parse_spec({**_search(), **doc})
    assert message in str(err.value) and "\n" not in str(err.value)

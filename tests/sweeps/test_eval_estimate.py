"""The plan's evaluation estimate counts the sentences a trial really decodes (issue 53 item 6): the first
eval_sentences dev sentences at each evaluation before the last (eval_bleu all), the whole dev split at the last,
the whole test split at the final evaluation, with the split sizes of the trial's own corpus."""

from __future__ import annotations

import dataclasses
import json

from sweeps.plan import estimate
from sweeps.spec.sweep_spec import load_spec, plan
from tests.helpers import ROOT
from transformer_core.data.prepare import corpus_key
from transformer_core.data.split_sizes import SPLIT_SIZES
from transformer_core.run_config import DataConfig, make_run_config


def _smoke_base():
    spec = load_spec(ROOT / "sweeps" / "specs" / "table3.yaml")
    trial = next(t for t in plan(spec, "smoke") if t.row == "base")
    return make_run_config(trial.values)


def test_the_sentences_decoded_are_those_the_trainer_decodes():
    train = _smoke_base().train  # 20 steps, an evaluation every 10, eval_sentences 16, eval_bleu all
    assert (train.steps, train.eval_every, train.eval_sentences, train.eval_bleu) == (20, 10, 16, "all")
    sizes = {"dev": 675, "test": 433}
    assert estimate.evaluations(train) == 2
    assert estimate.eval_sentences(train, sizes) == (16 + 675 + 433, 2 * 675 + 433)
    final = dataclasses.replace(train, eval_bleu="final")  # the cpu profile: dev BLEU at the last step only
    assert estimate.eval_sentences(final, sizes)[0] == 675 + 433
    uneven = dataclasses.replace(train, steps=25)  # evaluations at 10, 20 and the last step, 25
    assert estimate.evaluations(uneven) == 3 and estimate.eval_sentences(uneven, sizes)[0] == 2 * 16 + 675 + 433
    every = dataclasses.replace(train, eval_sentences=0)  # 0: the whole dev split at every evaluation
    assert estimate.eval_sentences(every, sizes)[0] == 2 * 675 + 433


def test_a_trials_estimate_grows_with_its_corpus_split_sizes(tmp_path):
    """Fails where the estimate ignores the split sizes: a corpus with ten times the dev and test sentences
    (the same model, steps and rate) must cost more by the decoding of the extra sentences."""
    cfg = _smoke_base()
    flops = estimate.trial_flops(cfg)[1]
    small = {"dev": 100, "test": 50}
    large = {"dev": 1000, "test": 500}
    for name, sizes in (("bible-en-de", small), ("bible-en-fr", large)):  # prepared copies: meta.json sizes win
        (tmp_path / corpus_key(name, None)).mkdir()
        (tmp_path / corpus_key(name, None) / "meta.json").write_text(json.dumps({"sizes": {"train": 10, **sizes}}))
    seconds = {
        size: estimate.trial_seconds(flops, cfg.train, estimate.LAPTOP_FLOPS, DataConfig(corpus=name), tmp_path)
        for size, name in (("small", "bible-en-de"), ("large", "bible-en-fr"))
    }
    extra = (1000 + 500 - 100 - 50) * estimate.SENTENCE_SECONDS
    assert seconds["large"] - seconds["small"] >= extra
    # at smoke, decoding dev and test is most of a trial, not a share of its (tiny) training
    training = flops / estimate.LAPTOP_FLOPS
    assert seconds["large"] > 10 * training


def test_split_sizes_come_from_the_prepared_copy_then_the_table_then_a_stated_fallback(tmp_path):
    prepared = tmp_path / corpus_key("bible-en-de", None)  # its key (a test's fixture database adds a digest)
    prepared.mkdir()
    (prepared / "meta.json").write_text(json.dumps({"sizes": {"train": 9, "dev": 7, "test": 5}}))
    assert estimate.split_sizes(DataConfig(), tmp_path)[0] == {"dev": 7, "test": 5}
    sizes, source = estimate.split_sizes(DataConfig(), tmp_path / "none")
    assert sizes == SPLIT_SIZES["bible-en-de"] and "split_sizes.py" in source
    assert estimate.split_sizes(DataConfig(corpus="bible-en-de+bible-en-de"), tmp_path / "none")[0] == {
        "dev": 2 * 675,
        "test": 2 * 433,
    }
    sizes, source = estimate.split_sizes(DataConfig(corpus="ding-en-de"), tmp_path / "none")
    assert sizes == estimate.FALLBACK_SPLIT_SIZES and "assumed" in source
    (prepared / "meta.json").write_text("{not json")  # a damaged copy is not an error for a plan
    assert estimate.split_sizes(DataConfig(), tmp_path)[0] == SPLIT_SIZES["bible-en-de"]

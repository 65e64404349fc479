"""Bounds that count every trial a spec asks for and every size it names (issue 43, item 10): a search's samples
x seeds plus its confirmation round, seeds a local Ray cannot hold, a huge batch or vocabulary; each refused in one
line before anything runs, and `tsweep plan` says what a search runs in all."""

import pytest

from sweeps.cli import main
from sweeps.spec.bounds import planned_trials
from tests.helpers import refused, write_spec
from transformer_core.errors import ConfigError
from transformer_core.run_config import MAX_TOKENS_PER_BATCH, MAX_VOCAB, make_run_config

SPACE = {"lr_scale": {"type": "loguniform", "low": 0.3, "high": 3.0}}


def test_a_search_counts_samples_times_seeds_and_its_confirmation_round():
    doc = {"seeds": 2, "search": {"samples": 2000, "confirm": {"top": 1000, "seeds": 1000}, "space": SPACE}}
    assert planned_trials(doc)[0] == 2000 * 2 + 1000 * 1000
    assert planned_trials({"seeds": [1, 2, 3], "search": {"samples": 5, "space": SPACE}})[0] == 15
    assert planned_trials({"search": {"samples": 5, "confirm": {}, "space": SPACE}})[0] == 5 + 2 * 3  # defaults


def test_a_million_trial_search_is_refused_before_anything_runs(tmp_path, capsys):
    """It planned as "2 trials" and started training."""
    doc = {"seeds": 2, "search": {"samples": 2000, "confirm": {"top": 1000, "seeds": 1000}, "space": SPACE}}
    spec = write_spec(tmp_path / "s.yaml", **doc)
    out = tmp_path / "out"
    refused(["run", str(spec), "--profile", "smoke", "--out", str(out)], capsys, "1,004,000 trials",
             "search.confirm.seeds")  # fmt: skip
    assert not out.exists()


def test_plan_says_how_many_trials_a_search_runs(tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", seeds=2, search={"samples": 5, "confirm": {"top": 2, "seeds": 3},
                                                       "space": SPACE})  # fmt: skip
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0
    assert "5 samples x 2 seeds + 2 confirmed x 3 fresh seeds = 16 trials" in capsys.readouterr().out


def test_seeds_a_local_ray_cannot_hold_are_refused_before_ray_starts(tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", seeds=1000, search={"samples": 1, "space": SPACE})
    out = tmp_path / "out"
    refused(["run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "2"], capsys,
             "1000 seeds x resources.cpus 1 = 1000 CPUs per sample", "--num-cpus")  # fmt: skip
    assert not out.exists()


@pytest.mark.parametrize(
    "doc, needle",
    [
        ({"train": {"tokens_per_batch": 1_000_000_000}}, f"tokens_per_batch=1000000000 is invalid: allowed an "
                                                         f"integer in [1, {MAX_TOKENS_PER_BATCH}]"),
        ({"train": {"accumulate": 10**9}}, "accumulate=1000000000 is invalid"),
        ({"corpus": {"name": "bible-en-de", "vocab": 10_000_000}}, f"corpus.vocab: 10000000 is invalid; allowed an "
                                                                  f"integer in [16, {MAX_VOCAB}]"),
    ],
    ids=["tokens_per_batch", "accumulate", "corpus.vocab"],
)  # fmt: skip
def test_sizes_that_are_typos_are_refused_in_the_spec(tmp_path, capsys, doc, needle):
    """tokens_per_batch 10^9 planned a smoke sweep at 212 device-hours; corpus.vocab 10^7 was ignored silently."""
    refused(["plan", str(write_spec(tmp_path / "s.yaml", **doc)), "--profile", "smoke"], capsys, needle)


def test_a_huge_vocabulary_is_refused_for_one_run_too(tmp_path, capsys):
    """`tsweep train --set vocab=10000000` built a 12,805-piece BPE cached as bpe-10000000."""
    with pytest.raises(ConfigError, match="vocab=10000000 is invalid"):
        make_run_config({"vocab": 10_000_000})
    out = tmp_path / "run"
    refused(["train", "--workdir", str(out), "--profile", "smoke", "--set", "vocab=10000000"], capsys, "vocab=")
    assert not out.exists()
    assert make_run_config({"vocab": 37000, "tokens_per_batch": 25000}).data.vocab == 37000  # the paper's: allowed

"""A fourth round of hostile specs: each refused by `tsweep plan` (and so by `run`, which plans first) in one line
naming the place in the spec and what is allowed, exit 2, before anything runs. Each case crashed with a traceback,
or was accepted, before its check."""

import pytest

from tests.helpers import refused, write_spec

SPACE = {"lr_scale": {"type": "loguniform", "low": 0.5, "high": 2.0}}
CASES = {  # name: (spec text after name and corpus, what the one line says)
    "an alias of itself": ("description: &r [*r]\n", "refers to itself through an alias (the value at line 3"),
    "a mapping holding itself": ("base: &r {preset: base, x: *r}\n", "refers to itself through an alias"),
    "one key spelled twice": ("rows:\n  1: [{label: A1, h: 1}]\n  0x1: [{label: A2, h: 4}]\n",
                              "gives the key '1' (again as '0x1') twice in one mapping (lines 4 and 5)"),
    "a number and its text": ("rows:\n  1: [{label: A1, h: 1}]\n  '1': [{label: A2, h: 4}]\n",
                              "gives the key '1' twice"),
    "a width of null": ("rows: {A: [{label: A1, d_k: null}]}\n",
                        "rows.A.A1: at profile 'smoke': d_k=None is invalid: allowed an integer >= 1"),
    "train_steps nan": ("rows: {A: [{label: A1, train_steps: .nan}]}\n",
                        "rows.A.A1: at profile 'smoke': train_steps=nan"),
    "train_steps as text": ("rows: {A: [{label: A1, train_steps: 1e30}]}\n", "train_steps='1e30' is invalid"),
    "train_steps below one": ("rows: {A: [{label: A1, train_steps: -1}]}\n",
                              "train_steps=-1 is invalid: allowed a number in [1, 1e+12]"),
    "train_steps true": ("rows: {A: [{label: A1, train_steps: true}]}\n", "train_steps=True is invalid"),
    "a batch of 0 tokens to search": (
        "search: {samples: 2, space: {tokens_per_batch: {type: choice, values: [0, 512]}}}\n",
        "search.space.tokens_per_batch.values[0]: 0 is invalid at profile 'smoke' (tokens_per_batch=0 is invalid"),
    "a batch of text to search": ("search: {samples: 2, space: {tokens_per_batch: {type: choice, values: [abc]}}}\n",
                                  "search.space.tokens_per_batch.values[0]: 'abc' is invalid"),
    "steps of text to search": ("search: {samples: 2, space: {train_steps: {type: choice, values: [abc, 100]}}}\n",
                                "search.space.train_steps.values[0]: 'abc' is invalid"),
    "fractions of an integer knob": ("search: {samples: 2, space: {d_model: {type: uniform, low: 256, high: 512}}}\n",
                                     "search.space.d_model (a uniform draw is a fraction; a knob of whole numbers "
                                     "takes type int or choice): 384.0 is invalid"),
    "a search with rows": ("search: {samples: 2, space: {lr_scale: {type: uniform, low: 0.5, high: 2}}}\n"
                           "rows: {A: [{label: A1, h: 1}]}\n", "search: a search tunes the base configuration"),
    "cpus nan": ("resources: {cpus: .nan}\n", "resources.cpus: nan is invalid; allowed a finite number >= 0.01"),
    "cpus infinite": ("resources: {cpus: .inf, gpus: .inf}\n", "resources.cpus: inf is invalid"),
    "gpus nan": ("resources: {gpus: .nan}\n", "resources.gpus: nan is invalid"),
    "reduction factor nan": ("scheduler: {type: asha, reduction_factor: .nan}\n", "scheduler.reduction_factor: nan"),
    "reduction factor infinite": ("scheduler: {type: asha, reduction_factor: .inf}\n",
                                  "scheduler.reduction_factor: inf"),
    "an endless budget": ("budget: .inf\n", "budget: inf is invalid"),
    "a tracking uri of a number": ("tracking: {uri: 5}\n",
                                   "tracking.uri: 5 is invalid; allowed an MLflow tracking URI"),
    "an experiment of a list": ("tracking: {experiment: [1]}\n", "tracking.experiment: [1] is invalid"),
    "1 and 1.0 as keys": ("rows:\n  1: [{label: A1, h: 1}]\n  1.0: [{label: A2, h: 4}]\n",
                          "gives the key '1' (again as '1.0') twice"),
    "true and 1 as keys": ("rows:\n  true: [{label: A1, h: 1}]\n  1: [{label: A2, h: 4}]\n",
                           "gives the key 'true' (again as '1') twice"),
    "a whole number too large for a float": ("resources: {cpus: 1" + "0" * 400 + "}\n", "resources.cpus: 1000"),
    "a reduction factor too large for a float": ("scheduler: {type: asha, reduction_factor: 1" + "0" * 400 + "}\n",
                                                 "scheduler.reduction_factor: 1000"),
    "train_steps too large for a float": ("rows: {A: [{label: A1, train_steps: 1" + "0" * 400 + "}]}\n",
                                          "train_steps=10000000000000000000... is invalid"),
    "a budget too large for a float": ("budget: 1" + "0" * 400 + "\n", "budget: 1000"),
    "a duration too long for a float": ("budget: 1" + "0" * 400 + "h\n", "budget: '1000"),
    "a date of month 13": ("seeds: 2024-13-01\n", "is not valid YAML: month must be in 1..12"),
    "a number past Python's digits": ("budget: 1" + "0" * 5000 + "\n", "is not valid YAML: Exceeds the limit"),
    "a label longer than a file name": ("rows: {A: [{label: " + "x" * 300 + "}]}\n",
                                        "rows.A[0].label: 'xxxxxxxxxxxxxxxxxxxx'... (300 characters) is too long"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_spec_is_one_line_before_anything_runs(case, tmp_path, capsys):
    text, says = CASES[case]
    spec = tmp_path / "s.yaml"
    spec.write_text("name: p\ncorpus: {name: bible-en-de}\n" + text)
    refused(["plan", spec, "--profile", "smoke"], capsys, "tsweep plan: error: ", says)
    out = tmp_path / "out"
    refused(["run", spec, "--profile", "smoke", "--out", out], capsys, "tsweep run: error: ", says)
    assert not out.exists()


def test_a_long_sweep_name_is_refused_by_its_length(tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", name="n" * 101)
    refused(["plan", spec, "--profile", "smoke"], capsys, "name: 'nnnnnnnnnnnnnnnnnnnn'... (101 characters) is too "
            "long; allowed at most 100")  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "rows: {A: [{label: A1, N_enc: null}]}\n",  # a depth knob may be null: N's
        "rows: {A: [{label: A1, train_steps: 50000}]}\n",
        "rows: {A: [{label: A1, train_steps: 150000.0}]}\n",
        "search: {samples: 2, space: {tokens_per_batch: {type: int, low: 256, high: 1024}}}\n",
        "search: {samples: 2, space: {P_drop: {type: uniform, low: 0.0, high: 0.3}}}\n",
        "tracking: {uri: ''}\n",  # the sweep's own store
        "search: {samples: 2, space: {warmup: {type: int, low: 5, high: 20}, lr_scale: {type: uniform, low: 0.5, "
        "high: 2}}}\n",
        "search: {samples: 2, space: {tokens_per_batch: {type: choice, values: [256, 512]}}}\n",
        "rows:\n  A: [{label: A1, h: 1}]\n  B: [{label: B1, d_k: 16}]\n",
        "tracking: {experiment: mine}\nbudget: 90m\nresources: {cpus: 1.5}\n",
        "rows: {A: [{label: " + "x" * 100 + ", h: 4}]}\n",
    ],
)
def test_what_the_checks_allow_still_plans(text, tmp_path, capsys):
    from sweeps.cli import main

    spec = tmp_path / "s.yaml"
    spec.write_text("name: p\ncorpus: {name: bible-en-de}\n" + text)
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0, capsys.readouterr().err

"""What a trial's evaluation costs, part by part, on a trained model of a sweep, and the decode batch size.

Loads a finished trial (its averaged checkpoints, vocabulary and precision), then times, in one run:
dev perplexity (the only evaluation at 1/3 and 2/3 of a cpu-profile trial), beam-search decoding of the
whole dev and test sets at each decode budget given (source tokens per batch; the trainer uses the first)
and with each beam_stop rule given (side by side, at the first budget), and test perplexity.  It checks
that every budget gives the same translations and BLEU, counts the translations a stop rule changes, and
prints the evaluation's share of the trial's time beside the training seconds the trial recorded.

    python benchmarks/eval_cost.py [--run sweep_runs/table3-cpu/trials/base-s1-...] [--budgets 2048,8192]
                                   [--stops exact,length]
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

import torch

from transformer_core.data import load_corpus
from transformer_core.evaluation import bleu, perplexity, translate
from transformer_core.inference import load_trained


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a finished trial directory (default: the demo sweep's first finished base trial)")
    ap.add_argument("--budgets", default="2048,8192", help="decode budgets to compare (source tokens per batch)")
    ap.add_argument("--stops", default="exact,length", help="beam_stop rules to compare (at the first budget)")
    a = ap.parse_args()
    runs = [a.run] if a.run else sorted(glob.glob("sweep_runs/table3-cpu/trials/base-s*/result.json"))
    if not runs:
        raise SystemExit("no finished trial: give --run TRIAL_DIR (run make demo first, or any sweep)")
    run = Path(runs[0]).parent if runs[0].endswith("result.json") else Path(runs[0])
    tm = load_trained(run)
    d, t = tm.config.data, tm.config.train
    corpus = load_corpus(d.corpus, d.vocab, None, d.direction)
    dev, test = corpus.split("dev"), corpus.split("test")
    result = json.loads((run / "result.json").read_text())
    evals = len([1 for line in (run / "metrics.jsonl").read_text().splitlines() if '"kind": "eval"' in line])
    budgets = [int(b) for b in a.budgets.split(",")]
    stops = a.stops.split(",")
    print(f"run {run.name}: {tm.precision}, torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"dev {len(dev)} / test {len(test)} sentences, beam {t.beam}; {evals} evaluations recorded")  # fmt: skip
    _, ppl_s = _timed(lambda: perplexity(tm.model, dev, tm.device, tm.precision))
    _, test_ppl_s = _timed(lambda: perplexity(tm.model, test, tm.device, tm.precision))

    def decode_both(budget: int, stop: str):
        return tuple(
            _timed(
                lambda s=s: translate(
                    tm.model, s, tm.processor, tm.device, tm.precision, t.beam, t.alpha, t.max_extra, 0, budget, stop
                )
            )
            for s in (dev, test)
        )

    decode, by_stop = {}, {}
    for budget in budgets:
        (dh, ds), (th, ts) = decode_both(budget, stops[0])
        decode[budget] = (dh, ds, th, ts)
        print(f"budget {budget:>6}: dev decode {ds:6.1f} s, test decode {ts:6.1f} s, "
              f"dev BLEU {bleu(dh, dev.tgt_text)[0]:.2f} (beam_stop {stops[0]})")  # fmt: skip
    ref = decode[budgets[0]]
    for budget in budgets[1:]:
        same = decode[budget][0] == ref[0] and decode[budget][2] == ref[2]
        ratio = (ref[1] + ref[3]) / (decode[budget][1] + decode[budget][3])
        print(f"budget {budget} vs {budgets[0]}: decoding {ratio:.2f}x faster, translations identical: {same}")
    by_stop[stops[0]] = ref
    for stop in stops[1:]:
        (dh, ds), (th, ts) = decode_both(budgets[0], stop)
        by_stop[stop] = (dh, ds, th, ts)
        changed = sum(x != y for x, y in zip(dh + th, ref[0] + ref[2]))
        print(f"beam_stop {stop} vs {stops[0]} (budget {budgets[0]}): dev decode {ds:.1f} s, test decode {ts:.1f} s, "
              f"{(ref[1] + ref[3]) / (ds + ts):.2f}x faster; {changed} of {len(dh) + len(th)} translations differ; "
              f"dev BLEU {bleu(dh, dev.tgt_text)[0]:.2f} vs {bleu(ref[0], dev.tgt_text)[0]:.2f}, "
              f"test BLEU {bleu(th, test.tgt_text)[0]:.2f} vs {bleu(ref[2], test.tgt_text)[0]:.2f}")  # fmt: skip
    train_s = result.get("time_split", {}).get("train")
    cases = [(f"budget {b}, beam_stop {stops[0]}", decode[b]) for b in budgets]
    cases += [(f"budget {budgets[0]}, beam_stop {stop}", by_stop[stop]) for stop in stops[1:]]
    for name, (_, ds, _, ts) in cases:
        ev = evals * ppl_s + ds + ts + test_ppl_s
        share = ""
        if train_s:
            share = f", {100 * ev / (ev + train_s):.1f}% of the trial beside its {train_s:.0f} s of training"
        print(f"evaluation at {name}: {evals} x dev PPL {ppl_s:.1f} s + decodes {ds + ts:.1f} s "
              f"+ test PPL {test_ppl_s:.1f} s = {ev:.1f} s{share}")  # fmt: skip


if __name__ == "__main__":
    main()

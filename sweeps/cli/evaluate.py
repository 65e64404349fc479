"""`tsweep evaluate`: score trained models on any test set (BLEU, chrF, PPL)."""

from __future__ import annotations

import time
from pathlib import Path

from transformer_core.errors import UserError
from transformer_core.formatting import number


def _fmt(x) -> str:
    return number(x, ".2f")


def cmd_evaluate(args) -> int:
    from sweeps.run.evaluate import check_writes, evaluate_sweep, evaluation_set, summary_lines, trial_tracker

    if bool(args.sweep_dir) == bool(args.run):
        raise UserError("give a SWEEP_DIR or --run RUN_DIR (exactly one)")
    start = time.time()
    if args.run:
        es = evaluation_set(args.corpus, args.name, Path(args.run), args.data_dir)
        try:
            check_writes(Path(args.run), Path(args.run), es.name)
        except UserError as exc:
            raise UserError(str(exc).replace("the sweep directory", "the run directory")) from None
        from transformer_core.inference import evaluate_run  # torch, once the input is found valid

        r = evaluate_run(args.run, es, trial_tracker(Path(args.run)), args.device, args.data_dir)
        print(f"evaluation set {es.name}: {len(es)} sentences, fingerprint {es.fingerprint} ({es.origin})")
        unk = sum(r["unknown_chars"].values())
        print(
            f"{r['status']}: BLEU {_fmt(r['bleu'])}  chrF {_fmt(r['chrf'])}  PPL {_fmt(r['ppl'])}  "
            f"unseen characters {unk} (as the unknown piece)"
        )
        print(f"sacrebleu {r['sacrebleu_signature']}\nchrF {r['chrf_signature']}")
        if r["status"] == "skipped":
            print(f"already evaluated on this set: {Path(args.run) / r['hyp']} and its .json kept")
        else:
            print(f"written: {Path(args.run) / r['hyp']} and its .json ({time.time() - start:.1f} s)")
        return 0
    rows = [r for r in args.rows.split(",") if r] if args.rows else None
    es, table = evaluate_sweep(
        args.sweep_dir,
        args.corpus,
        args.name,
        rows,
        args.address,
        args.num_cpus,
        args.device,
        args.data_dir,
        progress=not args.quiet,
    )
    print("\n".join(summary_lines(es, table, _fmt)))
    counts = table["status"].value_counts().to_dict()
    print("; ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" in {time.time() - start:.1f} s")
    return 1 if counts.get("failed") else 0


def register(sub) -> None:
    from .args import add_corpus_argument, add_data_dir_argument, add_device_argument

    p = sub.add_parser(
        "evaluate",
        help="score a sweep's finished trials (or one run) on a test set: BLEU, chrF, PPL",
        description="Decode every finished trial with the checkpoint average that produced its test BLEU, its "
        "own vocabulary and beam settings; results go to TRIAL/evals/NAME.{json,hyp} and the trial's MLflow run.",
    )
    p.add_argument(
        "sweep_dir",
        nargs="?",
        metavar="SWEEP_DIR|URI",
        help="the sweep's directory or URI (the --out of `tsweep run`); a URI's results are pushed back to it",
    )
    p.add_argument("--run", default=None, help="a single `tsweep train` run directory instead of a sweep")
    add_corpus_argument(
        p,
        "the test set (RECIPE:dev or RECIPE:test picks a recipe's split; a recipe alone, its test split)",
        required=True,
    )
    p.add_argument("--name", default=None, help="the set's name in results and the report (default from the files)")
    p.add_argument("--rows", default=None, help="only these rows, comma-separated: --rows A1,base")
    p.add_argument("--address", default=None, help="an existing Ray cluster (default: a fresh local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    add_device_argument(p)
    add_data_dir_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)

"""`tsweep evaluate` (score trained models on any test set) and `tsweep translate` (translate text)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

from transformer_core.errors import UserError
from transformer_core.formatting import number

log = logging.getLogger(__name__)


def _fmt(x) -> str:
    return number(x, ".2f")


def cmd_evaluate(args) -> int:
    from .evaluate import check_writes, evaluate_sweep, evaluation_set, summary_lines, trial_tracker

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


# ---------------------------------------------------------------------------------------------- translate
def pick_run(target: str, row: str, seed: Optional[int]) -> Path:
    """A run directory itself, or the finished trial of ``row`` (seed ``seed``, else the lowest) of a sweep."""
    path = Path(target)
    if (path / "sweep.json").is_file():
        from .evaluate import finished_trials

        fin = finished_trials(path, [row])
        pick = fin[fin["seed"] == seed] if seed is not None else fin.sort_values("seed").head(1)
        if pick.empty:
            raise UserError(
                f"sweep {target!r} has no finished trial of row {row} with seed {seed}; "
                f"finished seeds: {', '.join(str(s) for s in sorted(fin['seed']))}"
            )
        return Path(pick["workdir"].iloc[0])
    if (path / "config.json").is_file():
        return path
    raise UserError(f"{target!r} is neither a run directory (config.json) nor a sweep directory (sweep.json)")


def _stdin_lines() -> Iterator[str]:
    """stdin as text lines; bytes that are not UTF-8 are replaced (with a warning), never fatal."""
    for n, raw in enumerate(sys.stdin.buffer, 1):
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            log.warning("stdin line %d is not UTF-8 (byte %d): undecodable bytes replaced", n, exc.start)
            yield raw.decode("utf-8", errors="replace")


def _chunks(lines, size: int) -> Iterator[list[str]]:
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _translate_safely(tm, chunk: list[str], first: int, what: str) -> list[str]:
    """A chunk's translations; if decoding fails, line by line, and a line that still fails stays empty."""
    try:
        return tm.translate(chunk, first, what)
    except Exception as exc:  # a never-seen failure must not lose the rest of the input
        log.warning("lines %d-%d: %s; translating them one by one", first, first + len(chunk) - 1, exc)
    out = []
    for k, line in enumerate(chunk):
        try:
            out += tm.translate([line], first + k, what)
        except Exception as exc:
            log.warning("%s line %d could not be translated (%s): left empty", what, first + k, exc)
            out.append("")
    return out


def cmd_translate(args) -> int:
    from transformer_core.data.eval_set import read_text_lines

    if args.batch_lines < 1:
        raise UserError(f"--batch-lines {args.batch_lines} is invalid: allowed an integer >= 1")
    run = pick_run(args.target, args.row, args.seed)
    lines = read_text_lines(args.input, "input") if args.input else None  # checked before the model loads
    from transformer_core.inference import load_trained  # torch, once the input is found valid

    tm = load_trained(run, args.device, args.data_dir)
    t = tm.config.train
    log.info("translating with %s (beam %d, alpha %g, beam_stop %s)", run, t.beam, t.alpha, t.beam_stop)
    what = args.input or "stdin"
    first = 1
    for chunk in _chunks(lines if lines is not None else _stdin_lines(), args.batch_lines):
        hyps = _translate_safely(tm, chunk, first, what)
        sys.stdout.write("".join(h + "\n" for h in hyps))
        sys.stdout.flush()
        first += len(chunk)
    return 0


def register(sub) -> None:
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
    p.add_argument(
        "--corpus",
        required=True,
        help="files:SRC,TGT (line-aligned), files:PAIRS.tsv, or a recipe's split RECIPE[:dev|test] (default test)",
    )
    p.add_argument("--name", default=None, help="the set's name in results and the report (default from the files)")
    p.add_argument("--rows", default=None, help="only these rows, comma-separated: --rows A1,base")
    p.add_argument("--address", default=None, help="an existing Ray cluster (default: a fresh local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--data-dir", default=None, help="where the runs' corpora and vocabularies are cached")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "translate",
        help="translate text with a trained run or a sweep's trial: stdin (or --input) to stdout",
        description="One translation per input line, in order, detokenised like dev.hyp; an empty line stays "
        "empty; a line longer than the model's maximum length is truncated with a warning on stderr.",
    )
    p.add_argument("target", metavar="RUN_DIR|SWEEP_DIR")
    p.add_argument("--row", default="base", help="the sweep row to use (default base)")
    p.add_argument("--seed", type=int, default=None, help="the row's seed (default: its lowest finished seed)")
    p.add_argument("--input", default=None, help="a UTF-8 text file (default: stdin)")
    p.add_argument("--batch-lines", type=int, default=64, help="lines translated (and written) together")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--data-dir", default=None, help="where the run's corpus and vocabulary are cached")
    p.set_defaults(func=cmd_translate)

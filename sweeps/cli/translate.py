"""`tsweep translate`: translate text, stdin (or a file) to stdout, with a trained run or a sweep's trial.

Its own module, not evaluate's: the two share no code (evaluate scores a set with references in Ray workers;
translate streams a user's text through one model in this process), only the library's sweeps.run.evaluate.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Iterator, Optional

from transformer_core.errors import UserError

log = logging.getLogger(__name__)


def pick_run(target: str, row: str, seed: Optional[int]) -> Path:
    """A run directory itself, or the finished trial of ``row`` (seed ``seed``, else the lowest) of a sweep."""
    path = Path(target)
    if (path / "sweep.json").is_file():
        from sweeps.run.evaluate import finished_trials

        fin = finished_trials(path, [row], flag="--row")
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
    from .args import add_data_dir_argument, add_device_argument

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
    add_device_argument(p)
    add_data_dir_argument(p)
    p.set_defaults(func=cmd_translate)

"""`tsweep train`: one configuration through train_and_evaluate, showing its progress as a sweep's live view does."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


class TrainView:
    """What `tsweep train` shows while it trains: the fields of a sweep's live view (sweeps/state/live.py: step, loss,
    target tokens/s, the dev scores) for this one run.  On a terminal, a tqdm bar redrawn at every step; otherwise
    one plain line per logging window (every log_every steps), per evaluation and when the final evaluation starts.

    ``step`` is the trainer's progress callback (every step); ``metrics`` and ``status`` receive what the run
    reports to its tracker (ShowingTracker), the same records a sweep's trial writes to metrics.jsonl."""

    def __init__(self, steps: int, log_every: int, out=None, tty: bool | None = None, name: str = "train"):
        from sweeps.state.live import TrialState

        self.out = out or sys.stderr
        self.tty = self.out.isatty() if tty is None else tty
        self.state = TrialState(trial_id=name, name=name, status="running", steps=steps)
        self.log_every = log_every
        self.windows = 0  # training log windows seen (their loss and tokens/s replace the per-step figures)
        self.first = True
        self.bar = None
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=steps, unit="step", dynamic_ncols=True, file=self.out)

    def say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=self.out)
        else:
            print(line, file=self.out, flush=True)

    def step(self, p: dict) -> None:
        from sweeps.state.live import trial_line

        s = self.state
        s.step = p["step"]
        if not self.windows:  # before the first logging window: this step's loss, the run's rate so far
            s.loss, s.tokens_per_second = p["loss"], p["tokens"] / max(p["train_seconds"], 1e-9)
        if self.first and self.bar is None and s.step < s.steps:  # training has begun (a resumed run: again)
            self.say(f"{trial_line(s)}  (then a line every {self.log_every} steps and at each evaluation)")
        self.first = False
        if self.bar is not None:
            self.bar.n = s.step
            self.bar.set_postfix(self._fields(), refresh=False)
            self.bar.refresh()
        if s.step >= s.steps:
            self.say(f"{s.name}: step {s.step}/{s.steps} done; final evaluation (checkpoint average, test set)")

    def _fields(self) -> dict:
        s, out = self.state, {}
        if s.loss is not None:
            out["loss"] = f"{s.loss:.3f}"
        if s.dev_bpb is not None:
            out["bits/byte"] = f"{s.dev_bpb:.3f}"
        elif s.dev_bleu is not None:
            out["dev BLEU"] = f"{s.dev_bleu:.2f}"
        if s.dev_ppl is not None:
            out["PPL"] = f"{s.dev_ppl:.1f}"
        if s.tokens_per_second:
            out["tok/s"] = f"{s.tokens_per_second:,.0f}"
        return out

    def metrics(self, metrics: dict, step: int) -> None:
        from sweeps.state.live import trial_line

        s = self.state
        s.step = max(s.step, step)
        if "tokens_per_second" in metrics:  # a training log window
            self.windows += 1
            s.loss, s.tokens_per_second = metrics.get("loss"), metrics.get("tokens_per_second")
            if self.bar is None:
                self.say(trial_line(s))
        elif "dev_ppl" in metrics:  # an evaluation (the final scores carry test_* keys instead)
            s.evals += 1
            s.dev_ppl, s.dev_bpb = metrics.get("dev_ppl"), metrics.get("dev_bpb")
            s.dev_bleu = metrics.get("dev_bleu", s.dev_bleu)
            scores = f"dev BLEU {s.dev_bleu:.2f}, " if s.dev_bleu is not None else ""
            scores += f"dev bits/byte {s.dev_bpb:.3f}, " if s.dev_bpb is not None else ""
            self.say(f"{s.name}: eval at step {s.step}/{s.steps}: {scores}dev PPL {s.dev_ppl:.2f}")

    def status(self, status: str, reason: str = "") -> None:
        self.state.status = status.lower()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ShowingTracker:
    """The tracker train_and_evaluate makes when given none (a JsonTracker writing the run's tracking.jsonl;
    tracking.rankN.jsonl on another worker), with every call also shown by a TrainView.  A failure of the
    view is logged, never raised: showing progress must not end a run."""

    def __init__(self, workdir, view: TrainView):
        self.workdir, self.view, self._inner = Path(workdir), view, None

    @property
    def inner(self):
        if self._inner is None:  # made at the first call, as the trainer's own: after the workdir is claimed
            from transformer_core import rundir
            from transformer_core.distributed import world
            from transformer_core.tracking import JsonTracker

            rank, _ = world()
            self._inner = JsonTracker(self.workdir / (rundir.TRACKING if rank == 0 else f"tracking.rank{rank}.jsonl"))
        return self._inner

    def _show(self, method: str, *args) -> None:
        try:
            getattr(self.view, method)(*args)
        except Exception:  # noqa: BLE001 - a display problem is not the run's problem
            log.debug("progress view failed", exc_info=True)

    def log_params(self, params: dict) -> None:
        self.inner.log_params(params)

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.inner.log_metrics(metrics, step)
        self._show("metrics", metrics, step)

    def log_artifact(self, path: str) -> None:
        self.inner.log_artifact(path)

    def set_status(self, status: str, reason: str = "") -> None:
        self.inner.set_status(status, reason)
        self._show("status", status, reason)


def cmd_train(args) -> int:
    from sweeps.spec.profiles import profile_values
    from transformer_core import train_and_evaluate
    from transformer_core.memory import check_memory
    from transformer_core.run_config import make_run_config
    from transformer_core.trainer import task_for

    from .args import set_values

    values = {**profile_values(args.preset, args.profile), "corpus": args.corpus, **set_values(args)}
    if args.data_dir:
        values["data_dir"] = args.data_dir
    config = make_run_config(values, preset=args.preset)
    check_memory(config)  # before the model is allocated: one line, not the allocator's traceback
    task_for(config)  # a setting the task cannot use: its one line before the progress bar appears
    if args.quiet:
        result = train_and_evaluate(config, args.workdir)
    else:
        view = TrainView(config.train.steps, config.train.log_every)
        try:
            result = train_and_evaluate(config, args.workdir, ShowingTracker(args.workdir, view), view.step)
        finally:
            view.close()
    if result["status"] != "finished":
        print(f"run {result['status']}: {result.get('reason', '')} (see {args.workdir}/result.json)")
        return 3
    ts = result["time_split"]
    print(
        f"finished {result['steps']} steps, {result['params'] / 1e6:.2f}M"
        f" parameters, {result['device']} {result['precision']}"
    )
    if result.get("task") == "lm":
        averaged = f"(average of checkpoints {result['averaged_checkpoints']})"
        print(f"dev  PPL {result['dev_ppl']:.2f}  bits/byte {result['dev_bpb']:.4f}   (final model)")
        print(f"test PPL {result['test_ppl']:.2f}  bits/byte {result['test_bpb']:.4f}   {averaged}")
    else:
        print(
            f"dev  BLEU {result['dev_bleu']:.2f}  PPL {result['dev_ppl']:.2f}"
            f"   (final model, beam {config.train.beam}, stop {config.train.beam_stop})"
        )
        print(
            f"test BLEU {result['test_bleu']:.2f}  PPL {result['test_ppl']:.2f}"
            f"   (average of checkpoints {result['averaged_checkpoints']})"
        )
    print(
        f"{result['tokens_per_second']:.0f} target tokens/s; time: train"
        f" {ts['train']:.0f}s, data {ts['data']:.0f}s, eval {ts['eval']:.0f}s"
    )
    if result.get("task") == "lm":
        print(f"everything is in {args.workdir} (result.json, metrics.jsonl, samples.txt)")
    else:
        print(f"sacrebleu {result['sacrebleu_signature']}")
        print(f"everything is in {args.workdir} (result.json, metrics.jsonl, dev.hyp, test.hyp)")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


def register(sub) -> None:
    import argparse

    from transformer_core.knobs import help_text

    from .args import add_corpus_argument, add_data_dir_argument, add_profile_argument, add_set_argument

    p = sub.add_parser(
        "train",
        help="train and evaluate one configuration",
        epilog="--set keys (from the knob table; 'tsweep knobs' lists them with their categories):\n"
        + help_text()
        + "\n\ntask=lm: a decoder-only language model (causal self-attention, tied embeddings) with N layers\n"
        "  (N_dec when given; N_enc is refused) on one side of the corpus: direction=LANG picks the side\n"
        "  (default the recipe's first language, e.g. en), or --corpus files:TEXT (one plain text file,\n"
        "  a sentence or document per line).  Scored by dev/test perplexity and bits per byte; beam,\n"
        "  alpha, max_extra, beam_stop, eval_sentences and eval_bleu are not used.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_corpus_argument(p, "the training corpus", default="bible-en-de")
    p.add_argument("--workdir", required=True, help="run directory; an existing one is resumed")
    p.add_argument("--preset", default="base", help="base or big (the paper's values)")
    add_profile_argument(p, None, "scale the preset onto a budget", why="the preset as the paper sets it")
    add_set_argument(p)
    add_data_dir_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress (bar or lines)")
    p.add_argument("--json", action="store_true", help="also print result.json")
    p.set_defaults(func=cmd_train)

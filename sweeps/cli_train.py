"""`tsweep train`: one configuration through train_and_evaluate, with a progress bar."""

from __future__ import annotations

import json


def profile_values(preset: str, profile_name: str | None) -> dict:
    """Flat run keys for a preset at a profile's scale (empty: the preset as published)."""
    if not profile_name:
        return {}
    from transformer_core.config import MODEL_KEYS, paper_values

    from .profiles import get_profile

    profile, paper = get_profile(profile_name), paper_values(preset)
    knobs = profile.scale_model({k: paper[k] for k in MODEL_KEYS})
    steps = profile.scale_steps(paper["train_steps"])
    return {**knobs, **profile.train, **profile.data, "steps": steps, "eps_ls": paper["eps_ls"]}


def cmd_train(args) -> int:
    from tqdm import tqdm

    from transformer_core import train_and_evaluate
    from transformer_core.memory import check_memory
    from transformer_core.run_config import make_run_config
    from transformer_core.train import task_for

    from .cli_args import set_values

    values = {**profile_values(args.preset, args.profile), "corpus": args.corpus, **set_values(args)}
    if args.data_dir:
        values["data_dir"] = args.data_dir
    config = make_run_config(values, preset=args.preset)
    check_memory(config)  # before the model is allocated: one line, not the allocator's traceback
    task_for(config)  # a setting the task cannot use: its one line before the progress bar appears
    bar = tqdm(total=config.train.steps, unit="step", dynamic_ncols=True, disable=args.quiet)

    def progress(p: dict) -> None:
        bar.n = p["step"]
        tok_s = p["tokens"] / max(p["train_seconds"], 1e-9)
        post = {"loss": f"{p['loss']:.3f}", "lr": f"{p['lr']:.2e}", "tok/s": f"{tok_s:.0f}"}
        if p.get("dev_bleu") is not None:
            post["dev_bleu"] = f"{p['dev_bleu']:.2f}"
        bar.set_postfix(post, refresh=False)
        bar.refresh()

    result = train_and_evaluate(config, args.workdir, progress=progress)
    bar.close()
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

    from .cli_args import add_profile_argument, add_set_argument

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
    p.add_argument("--corpus", default="bible-en-de", help="corpus recipe (see 'tsweep data list')")
    p.add_argument("--workdir", required=True, help="run directory; an existing one is resumed")
    p.add_argument("--preset", default="base", help="base or big (the paper's values)")
    add_profile_argument(p, None, "scale the preset onto a budget")
    add_set_argument(p)
    p.add_argument("--data-dir", default=None, help="data directory (default $TSWEEP_DATA_DIR or ~/.cache/tsweep/data)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="also print result.json")
    p.set_defaults(func=cmd_train)

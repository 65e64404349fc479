"""`tsweep data prepare|info|list`: real corpora, shared BPE vocabulary, padding report."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def recipe_options() -> dict[str, list[str]]:
    """Every option key any corpus recipe declares (Recipe.options), with the recipes that take it."""
    from transformer_core.data.recipes import RECIPES

    found: dict[str, list[str]] = {}
    for name, recipe in RECIPES.items():
        for key in recipe.options:
            found.setdefault(key, []).append(name)
    return found


def _options(args) -> dict:
    """The recipe options given as flags (each a file, resolved to an absolute path)."""
    return {k: str(Path(getattr(args, k)).resolve()) for k in recipe_options() if getattr(args, k, None)}


def _describe(corpus, budget: int) -> None:
    from transformer_core.data import padding_fraction, plan_batches

    meta = corpus.meta
    print(f"corpus      {meta['name']} ({meta['direction']})")
    print(f"directory   {corpus.directory}")
    print(f"fingerprint {meta['fingerprint']}")
    print(f"vocabulary  {corpus.vocab_size} shared BPE pieces ({corpus.vocab_dir.name})")
    print(f"{'split':<7}{'pairs':>8}{'src words':>11}{'tgt words':>11}{'src pieces':>12}{'tgt pieces':>12}")
    for split in ("train", "dev", "test"):
        enc = corpus.split(split)
        sl = np.array([len(x) for x in enc.src])
        tl = np.array([len(x) for x in enc.tgt])
        w = meta["avg_words"][split]
        print(f"{split:<7}{len(enc):>8}{w[0]:>11.1f}{w[1]:>11.1f}{sl.mean():>12.1f}{tl.mean():>12.1f}")
    train = corpus.split("train")
    sl = np.array([len(x) + 1 for x in train.src])
    tl = np.array([len(x) + 1 for x in train.tgt])
    batches = plan_batches(sl, tl, budget, seed=0)
    print(
        f"batches     {len(batches)} of <= {budget} tokens per side; padding"
        f" {100 * padding_fraction(batches, sl, tl):.1f}% of batch tokens"
    )
    print(f"provenance  {meta['provenance']}")
    _time_and_disk(corpus)


def _time_and_disk(corpus) -> None:
    """How long the text took to prepare (and of that, to fetch), and what it holds on disk."""
    from transformer_core.data.fetch import disk_bytes

    human_bytes = lambda n: f"{n / 1e6:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"
    meta = corpus.meta
    parts = [meta["provenance"]] + [v for v in meta["provenance"].values() if isinstance(v, dict)]
    fetch = sum(p.get("fetch_seconds", 0) for p in parts)
    caches = {p["cache"]: p.get("cache_bytes", 0) for p in parts if "cache" in p}
    fetched = f" (of which fetching {fetch:.0f} s)" if fetch else ""
    print(f"time        fetch, clean and split {meta.get('prepare_seconds', 0):.0f} s{fetched}")
    disk = f"disk        {human_bytes(disk_bytes(corpus.directory))} in {corpus.directory}"
    print(disk + "".join(f"; downloads {human_bytes(n)} in {path}" for path, n in caches.items()))


def cmd_prepare(args) -> int:
    import time

    from transformer_core.data import load_corpus

    start = time.time()
    corpus = load_corpus(args.name, args.vocab, args.data_dir, args.direction, _options(args) or None)
    _describe(corpus, args.tokens_per_batch)
    print(f"ready in {time.time() - start:.1f} s")
    return 0


def cmd_info(args) -> int:
    from transformer_core.data import default_data_dir
    from transformer_core.data.corpus import Corpus, read_meta
    from transformer_core.data.prepare import corpus_key
    from transformer_core.errors import DataError

    data_dir = Path(args.data_dir or default_data_dir())
    directory = data_dir / corpus_key(args.name, args.direction, _options(args) or None)
    vocab_dir = directory / f"bpe-{args.vocab}"
    if not (vocab_dir / "done").exists():
        raise DataError(
            f"corpus {args.name!r} with vocabulary size {args.vocab} is not prepared in {data_dir}: "
            f"run 'tsweep data prepare {args.name} --vocab {args.vocab}'"
        )
    _describe(
        Corpus(directory, read_meta(directory), vocab_dir, int((vocab_dir / "done").read_text())), args.tokens_per_batch
    )
    return 0


def cmd_list(args) -> int:
    from transformer_core.data.recipes import RECIPES

    for name, recipe in sorted(RECIPES.items()):
        print(f"{name:<24} {recipe.summary}")
    return 0


def register(sub) -> None:
    from .args import add_data_dir_argument, add_deprecated, positive_int

    data = sub.add_parser("data", help="prepare and inspect corpora").add_subparsers(dest="data_command", required=True)
    for name, func, text in (
        ("prepare", cmd_prepare, "fetch, clean and encode a corpus"),
        ("info", cmd_info, "describe a prepared corpus"),
    ):
        p = data.add_parser(name, help=text)
        p.add_argument("name", help="recipe name, or several joined by '+' (see 'tsweep data list')")
        p.add_argument("--vocab", type=int, default=8000, help="shared BPE vocabulary size (paper: ~37000)")
        add_data_dir_argument(p)
        p.add_argument("--direction", default=None, help="e.g. en-de (default) or de-en")
        # was --budget, which everywhere else is wall-clock time; named as the knob tokens_per_batch
        p.add_argument("--tokens-per-batch", type=positive_int, default=4096,
                       help="tokens per batch for the padding report (default 4096)")  # fmt: skip
        add_deprecated(p, "--budget", "--tokens-per-batch", "tokens_per_batch", type=positive_int)
        for key, recipes in recipe_options().items():  # a flag per option of a recipe, e.g. --dev-src
            flag = key.replace("_", "-")
            takes = " and ".join(f"'{r}'" for r in recipes) + (" recipes" if len(recipes) > 1 else " recipe")
            p.add_argument(f"--{flag}", default=None, help=f"{takes}: {flag.replace('-', ' ')} file")
        p.set_defaults(func=func)
    p = data.add_parser("list", help="list the corpus recipes")
    p.set_defaults(func=cmd_list)

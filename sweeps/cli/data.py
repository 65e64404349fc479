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


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _checked(args) -> tuple[str, dict | None]:
    """The corpus of the command line as (recipe name, its options), each part refused in one line before anything
    is locked, fetched or written: the vocabulary size, the recipe names, an option flag the recipes do not take
    (it would be ignored, yet name another cached copy), files given both in a files: name and as flags, and a
    data directory that is a file.  The options are the name's files and the flags' together."""
    from transformer_core.data import default_data_dir
    from transformer_core.data.input_error import DataInputError
    from transformer_core.data.prepare import check_data_dir, check_vocab, parse_corpus_name
    from transformer_core.data.recipes import RECIPES, recipe_names

    check_vocab(args.vocab, "--vocab")
    name, inline = parse_corpus_name(args.name)
    parts = recipe_names(name)
    given = _options(args)
    taken = [key for key in recipe_options() if any(key in RECIPES[part].options for part in parts)]
    for key in given:
        if key not in taken:
            owners = " and ".join(f"'{r}'" for r in recipe_options()[key])
            allowed = f"allowed with it {', '.join(map(_flag, taken))}" if taken else "it takes no file options"
            raise DataInputError(
                f"{_flag(key)} is an option of the {owners} recipe, not of corpus {args.name!r}: {allowed}"
            )
    twice = [key for key in given if key in (inline or {})]
    if twice:
        raise DataInputError(
            f"{_flag(twice[0])} and corpus {args.name!r} both give the {twice[0].replace('_', ' ')} file: allowed one"
        )
    check_data_dir(Path(args.data_dir or default_data_dir()))
    return name, {**(inline or {}), **given} or None


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
    _, options = _checked(args)
    corpus = load_corpus(args.name, args.vocab, args.data_dir, args.direction, options)
    _describe(corpus, args.tokens_per_batch)
    print(f"ready in {time.time() - start:.1f} s")
    return 0


def cmd_info(args) -> int:
    from transformer_core.data import default_data_dir
    from transformer_core.data.corpus import Corpus, damage, read_meta
    from transformer_core.data.input_error import DataInputError
    from transformer_core.data.prepare import corpus_key

    name, options = _checked(args)
    data_dir = Path(args.data_dir or default_data_dir())
    directory = data_dir / corpus_key(name, args.direction, options)
    vocab_dir = directory / f"bpe-{args.vocab}"
    if not (vocab_dir / "done").exists():
        raise DataInputError(
            f"corpus {args.name!r} with vocabulary size {args.vocab} is not prepared in {data_dir}: "
            f"run 'tsweep data prepare {args.name} --vocab {args.vocab}'"
        )
    read_meta(directory)  # unreadable: one line naming meta.json
    found = damage(directory, vocab_dir)
    if found:  # what prepare would prepare afresh: here nothing does, one line says what and how
        given = {
            "direction": args.direction,
            "data_dir": args.data_dir,
            **{k: getattr(args, k) for k in recipe_options()},
        }
        again = f"tsweep data prepare {args.name} --vocab {args.vocab}"
        again += "".join(f" {_flag(key)} {value}" for key, value in given.items() if value)
        raise DataInputError(
            f"the prepared corpus in {directory} is damaged: {found[0]}; "
            f"remove {found[1]} or run '{again}' again, which prepares a damaged corpus afresh"
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

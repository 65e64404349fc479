"""WMT14 English-German and English-French: the paper's training corpora, newstest2013 and newstest2014.

Training text comes from the publisher's archives (statmt.org), dev and test from sacrebleu's own
test-set definitions (newstest2013 = sacrebleu ``wmt13``, newstest2014 = ``wmt14/full``, the 3,003-sentence
set of Table 2), read with sacrebleu's own loader, so the references are exactly those of
``sacrebleu -t wmt14/full -l en-de``.

Stages, each cached under ``<data dir>/_downloads/wmt/`` and written under a temporary name first:

1. download: every archive streamed to disk, resumed with HTTP Range after an interruption, verified
   against CHECKSUMS (a mismatch is removed and refused);
2. extract: the two members of each training corpus for the language pair, streamed out of the archive
   in one pass; line counts must agree;
3. the training pairs are then read line by line (StreamedPairs) by the common prepare step, which
   normalises and cleans by length and ratio, trains the shared BPE and encodes.

Set $TSWEEP_DATA_MIRROR to fetch every file (training archives and test sets) from a mirror with the
publisher's layout instead; the checksums are checked all the same.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import tarfile
import time
from pathlib import Path

import sacrebleu
from sacrebleu.dataset import DATASETS

from ...errors import DataError
from ..fetch import disk_bytes, http_file
from ..raw import RawCorpus, Recipe, StreamedPairs

log = logging.getLogger(__name__)
STATMT = "https://www.statmt.org"

# The training corpora of the WMT14 translation task: archive URL, size in bytes, and which members hold a
# language pair ({pair} as the archive writes it, e.g. de-en; {lang} one side).
CORPORA = {
    "europarl-v7": (
        STATMT + "/wmt13/training-parallel-europarl-v7.tgz",
        657_632_379,
        "training/europarl-v7.{pair}.{lang}",
    ),
    "commoncrawl": (STATMT + "/wmt13/training-parallel-commoncrawl.tgz", 918_311_367, "commoncrawl.{pair}.{lang}"),
    "news-commentary-v9": (
        STATMT + "/wmt14/training-parallel-nc-v9.tgz",
        80_418_416,
        "training/news-commentary-v9.{pair}.{lang}",
    ),
}
DEV, TEST = "wmt13", "wmt14/full"  # sacrebleu test-set names: newstest2013, newstest2014 (full, 3,003 sentences)


def _sacrebleu_checksums() -> dict[str, tuple[str, str]]:
    return {DATASETS[name].data[0]: ("md5", DATASETS[name].md5[0]) for name in (DEV, TEST)}


# Checksums of every file fetched, by URL: (algorithm, hex digest).  Training archives: sha256 as published
# with TensorFlow Datasets' WMT14 download checksums (with the sizes above); test sets: the md5 that sacrebleu
# itself publishes for its archives (the only published checksum of those files).
CHECKSUMS: dict[str, tuple[str, str]] = {
    CORPORA["europarl-v7"][0]: ("sha256", "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7"),
    CORPORA["commoncrawl"][0]: ("sha256", "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5"),
    CORPORA["news-commentary-v9"][0]: ("sha256", "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485"),
    **_sacrebleu_checksums(),
}

# EN-FR: the same three corpora (about 5.4M pairs before cleaning).  The paper's 36M EN-FR pairs also include
# the UN corpus and the 10^9 French-English (Gigaword) corpus, about 5 GB more to download: left out here.
LANGUAGE_PAIRS = {"de": ("de-en", tuple(CORPORA)), "fr": ("fr-en", tuple(CORPORA))}


def cache_root(data_dir: Path) -> Path:
    return Path(data_dir) / "_downloads" / "wmt"


def download(url: str, dest: Path) -> Path:
    if url not in CHECKSUMS:
        raise DataError(f"no checksum is known for {url}: refusing to use an unverified file")
    return http_file(url, dest, CHECKSUMS[url])


# --- stage 2: members out of an archive ---------------------------------------------
def extract_members(archive: Path, members: list[str], out_dir: Path) -> list[Path]:
    """Stream the named members out of a .tgz in one pass (cached: a member on disk is complete)."""
    targets = [out_dir / m for m in members]
    if all(t.exists() for t in targets):
        return targets
    wanted = {m: t for m, t in zip(members, targets) if not t.exists()}
    log.info("extracting %s from %s", ", ".join(wanted), archive.name)
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for info in tar:
                target = wanted.pop(info.name, None)
                if target is None:
                    continue
                if not info.isfile():
                    raise DataError(f"{archive.name}: member {info.name} is not a regular file")
                target.parent.mkdir(parents=True, exist_ok=True)
                part = target.with_name(target.name + ".part")
                with tar.extractfile(info) as src, open(part, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.replace(part, target)
                if not wanted:
                    break
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{archive} is not a readable .tgz archive ({exc}): delete it and run again") from None
    if wanted:
        raise DataError(f"{archive.name} has no member {', '.join(wanted)}: is it the right archive?")
    return targets


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def training_corpus(name: str, pair: str, root: Path) -> tuple[Path, Path, int, dict]:
    """(English file, other-language file, pairs, provenance) of one training corpus."""
    url, _, pattern = CORPORA[name]
    archive = download(url, root / Path(url).name)
    other = pair.split("-")[0]
    members = [pattern.format(pair=pair, lang=lang) for lang in ("en", other)]
    en, xx = extract_members(archive, members, root / "extracted" / name)
    n_en, n_xx = count_lines(en), count_lines(xx)
    if n_en != n_xx:
        raise DataError(f"{archive.name}: {members[0]} has {n_en} lines but {members[1]} has {n_xx}")
    algorithm, digest = CHECKSUMS[url]
    return en, xx, n_en, {"url": url, algorithm: digest, "pairs": n_en}


# --- dev and test: sacrebleu's test sets --------------------------------------------
def newstest(test_set: str, langpair: str, root: Path) -> list[tuple[str, str]]:
    """(source, reference) of a sacrebleu test set, its archive fetched here and read by sacrebleu's loader.

    sacrebleu fetches from a fixed URL into its own cache, in memory and without resume; so the archive
    is downloaded (and verified) here, into a copy of sacrebleu's dataset rooted under ``root``, where
    sacrebleu finds it, extracts nothing more and turns the SGML into text with its own processing.
    """
    dataset = copy.copy(DATASETS[test_set])
    dataset._outdir = str(root / "sacrebleu" / test_set.replace("/", "_"))  # sacrebleu's cache, moved under root
    dataset._rawdir = os.path.join(dataset._outdir, "raw")
    url = dataset.data[0]
    raw = Path(dataset._rawdir)
    tarball = download(url, raw / dataset._get_tarball_filename(url))  # the name sacrebleu looks for first
    members = dataset.langpairs[langpair]
    if not all((raw / m).exists() for m in members):
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        try:
            with tarfile.open(tarball, "r:gz") as tar:
                for m in members:
                    tar.extract(m, raw, **safe)
        except (tarfile.TarError, KeyError, OSError) as exc:
            raise DataError(f"{tarball.name}: cannot extract {', '.join(members)} ({exc})") from None
    sources = list(dataset.source(langpair))
    references = [refs[0].rstrip() for refs in dataset.references(langpair)]  # as sacrebleu -t reads them
    if len(sources) != len(references) or not sources:
        raise DataError(f"sacrebleu {test_set} {langpair}: {len(sources)} sources but {len(references)} references")
    return list(zip(sources, references))


def load_wmt14(other: str):
    def load(data_dir: Path, options: dict) -> RawCorpus:
        pair, corpora = LANGUAGE_PAIRS[other]
        root = cache_root(data_dir)
        start = time.time()
        files, total, provenance = [], 0, {}
        for name in corpora:
            en, xx, n, prov = training_corpus(name, pair, root)
            files.append((en, xx))
            total += n
            provenance[name] = prov
        langpair = f"en-{other}"
        dev, test = newstest(DEV, langpair, root), newstest(TEST, langpair, root)
        return RawCorpus(
            ("en", other),
            {"train": StreamedPairs(files, total), "dev": dev, "test": test},
            {
                "train": provenance,
                "dev": f"newstest2013 (sacrebleu -t {DEV} -l {langpair})",
                "test": f"newstest2014 (sacrebleu -t {TEST} -l {langpair})",
                "sacrebleu": sacrebleu.__version__,
                "test_set_checksums": {t: CHECKSUMS[DATASETS[t].data[0]] for t in (DEV, TEST)},
                "fetch_seconds": round(time.time() - start, 2),
                "cache": str(root),
                "cache_bytes": disk_bytes(root),
            },
            verbatim=frozenset({"dev", "test"}),
        )

    return load


RECIPES = (
    Recipe(
        "wmt14-en-de",
        ("en", "de"),
        "WMT14 EN-DE: Europarl v7, Common Crawl, News Commentary v9 (~4.5M pairs; statmt.org); "
        "dev newstest2013, test newstest2014 (sacrebleu)",
        load_wmt14("de"),
    ),
    Recipe(
        "wmt14-en-fr",
        ("en", "fr"),
        "WMT14 EN-FR subset: Europarl v7, Common Crawl, News Commentary v9 (~5.4M pairs; no UN, no Gigaword); "
        "dev newstest2013, test newstest2014 (sacrebleu)",
        load_wmt14("fr"),
    ),
)

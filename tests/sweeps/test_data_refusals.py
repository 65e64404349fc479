"""`tsweep data prepare|info` refuse bad input in one line with exit 2 (the project's user-error code), before
anything is locked, fetched or written, and without touching what was prepared before: an unknown recipe or a name
that is none, a direction, the user's own files, a vocabulary size, a data directory, an option the recipe does not
take, a damaged prepared copy."""

import json
import shutil

import pytest

from tests.helpers import refused
from transformer_core.data.corpus import load_corpus
from transformer_core.data.input_error import DataInputError
from transformer_core.errors import DataError
from transformer_core.run_config import MAX_VOCAB

VOCAB_ALLOWED = f"allowed an integer in [16, {MAX_VOCAB}]"


def _snapshot(folder):
    """Every file under ``folder`` with its bytes (a prepared corpus, to check that a refusal changed nothing)."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def prepared(tmp_path, fixture_corpus):
    """A data directory holding a copy of the session's prepared fixture corpus (bible-en-de, vocabulary 1000),
    free to damage; returns (data directory, the corpus's directory in it)."""
    data = tmp_path / "data"
    directory = data / fixture_corpus.directory.name
    shutil.copytree(fixture_corpus.directory, directory, ignore=shutil.ignore_patterns("*.tmp"))
    return data, directory


# --- 1: every refusal exits 2 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["prepare", "info"])
def test_an_unknown_recipe_exits_2_and_takes_no_lock(command, tmp_path, capsys):
    data = tmp_path / "d"
    refused(["data", command, "nope", "--data-dir", data], capsys, "unknown corpus recipe 'nope'", "known recipes are")
    assert not data.exists()  # no lock file, no corpus


def test_a_direction_that_does_not_fit_exits_2(tmp_path, capsys):
    data = tmp_path / "d"
    refused(["data", "prepare", "bible-en-de", "--direction", "xx", "--data-dir", data], capsys,
            "direction 'xx' does not fit corpus 'bible-en-de': allowed en-de or de-en")  # fmt: skip
    assert not data.exists()


def test_missing_or_non_utf8_user_files_exit_2(tmp_path, capsys):
    good = tmp_path / "good.txt"
    good.write_text("a b\nc d\n", encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\n")
    data = tmp_path / "d"
    refused(["data", "prepare", "files", "--src", tmp_path / "none.txt", "--tgt", good, "--data-dir", data], capsys,
            "training source file", "does not exist or is not a file")  # fmt: skip
    refused(["data", "prepare", "files", "--src", bad, "--tgt", good, "--data-dir", data], capsys,
            "is not UTF-8 text (byte 0)")  # fmt: skip
    assert not [p for p in data.iterdir() if not p.name.startswith(".lock-")]  # no corpus left behind


def test_info_of_a_corpus_not_prepared_exits_2(tmp_path, capsys):
    refused(["data", "info", "bible-en-de", "--vocab", "500", "--data-dir", tmp_path], capsys,
            "corpus 'bible-en-de' with vocabulary size 500 is not prepared",
            "tsweep data prepare bible-en-de")  # fmt: skip


def test_a_refusal_of_the_data_layer_is_a_data_error_still():
    """Who catches DataError (a damaged copy prepared afresh, a spec's corpus) still catches these."""
    assert issubclass(DataInputError, DataError) and DataInputError.exit_code == 2


# --- 2: the vocabulary size, before anything is fetched -------------------------------------------------------
@pytest.mark.parametrize("vocab", ["99999999999", "0", "-5", "15", str(MAX_VOCAB + 1)])
@pytest.mark.parametrize("command", ["prepare", "info"])
def test_a_vocabulary_size_out_of_range_is_refused_before_anything(command, vocab, tmp_path, capsys):
    data = tmp_path / "d"
    err = refused(["data", command, "bible-en-de", "--vocab", vocab, "--data-dir", data], capsys,
                  f"--vocab {vocab} is invalid: {VOCAB_ALLOWED}")  # fmt: skip
    assert "sentencepiece" not in err and "tsweep data prepare" not in err
    assert not data.exists()  # nothing fetched, cleaned or locked


def test_a_vocabulary_below_the_characters_of_the_text_says_the_least_allowed(tmp_path, capsys):
    refused(["data", "prepare", "bible-en-de", "--vocab", "16", "--data-dir", tmp_path], capsys,
            "vocabulary size 16 is too small", "allowed a size of at least")  # fmt: skip
    assert not list(tmp_path.glob("*/bpe-16*"))


def test_the_library_refuses_the_vocabulary_before_its_lock(tmp_path):
    with pytest.raises(DataInputError, match=r"vocab 99999999999 is invalid"):
        load_corpus("bible-en-de", 99_999_999_999, tmp_path / "d")
    assert not (tmp_path / "d").exists()


# --- 3: the data directory ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["prepare", "info"])
def test_a_data_directory_that_is_a_file_is_refused(command, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    refused(["data", command, "bible-en-de", "--vocab", "400", "--data-dir", afile], capsys,
            f"data directory '{afile}' is not a directory", "allowed a directory")  # fmt: skip
    assert afile.read_text() == "mine\n"


def test_a_data_directory_that_cannot_be_made_is_refused(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    refused(["data", "prepare", "bible-en-de", "--vocab", "400", "--data-dir", afile / "sub"], capsys,
            f"data directory '{afile / 'sub'}' cannot be made", "allowed a directory")  # fmt: skip
    assert afile.read_text() == "mine\n"


# --- 4: a damaged prepared copy -----------------------------------------------------------------------------------
def test_info_names_an_array_overwritten_with_text(prepared, capsys):
    data, directory = prepared
    (directory / "bpe-1000" / "train.src.npy").write_text("garbage\n")
    before = _snapshot(data)
    err = refused(["data", "info", "bible-en-de", "--vocab", "1000", "--data-dir", data], capsys,
                  f"the prepared corpus in {directory} is damaged: train.src.npy", "not a NumPy array file",
                  f"run 'tsweep data prepare bible-en-de --vocab 1000 --data-dir {data}' again")  # fmt: skip
    assert "allow_pickle" not in err
    assert _snapshot(data) == before


@pytest.mark.parametrize("avg_words", ["x", [1], {"train": ["x", None], "dev": [1, 2], "test": [1, 2]}])
def test_info_names_a_meta_json_with_unreadable_word_counts(prepared, capsys, avg_words):
    data, directory = prepared
    meta = json.loads((directory / "meta.json").read_text())
    (directory / "meta.json").write_text(json.dumps({**meta, "avg_words": avg_words}))
    before = _snapshot(data)
    refused(["data", "info", "bible-en-de", "--vocab", "1000", "--data-dir", data], capsys,
            "is damaged: meta.json's avg_words", "tsweep data prepare bible-en-de --vocab 1000")  # fmt: skip
    assert _snapshot(data) == before


def test_info_of_a_sound_copy_is_as_before(prepared, capsys):
    from sweeps.cli import main

    data, _ = prepared
    assert main(["data", "info", "bible-en-de", "--vocab", "1000", "--data-dir", str(data)]) == 0
    assert "vocabulary  " in capsys.readouterr().out


def test_prepare_prepares_unreadable_word_counts_afresh(prepared, capsys, caplog):
    from sweeps.cli import main

    data, directory = prepared
    meta = json.loads((directory / "meta.json").read_text())
    (directory / "meta.json").write_text(json.dumps({**meta, "avg_words": "x"}))
    with caplog.at_level("WARNING"):
        assert main(["data", "prepare", "bible-en-de", "--vocab", "1000", "--data-dir", str(data)]) == 0
    assert "meta.json's avg_words" in caplog.text
    assert json.loads((directory / "meta.json").read_text())["avg_words"] == meta["avg_words"]


# --- 5: what info suggests ----------------------------------------------------------------------------------------
def test_info_of_an_unknown_recipe_lists_the_known_ones_and_suggests_no_prepare(tmp_path, capsys):
    err = refused(["data", "info", "bible-en-dee", "--data-dir", tmp_path], capsys,
                  "unknown corpus recipe 'bible-en-dee' (did you mean 'bible-en-de'?)",
                  "known recipes are")  # fmt: skip
    assert "tsweep data prepare" not in err


# --- 6: options a recipe does not take, and names that are none --------------------------------------------------
@pytest.mark.parametrize("command", ["prepare", "info"])
def test_a_file_option_of_another_recipe_is_refused(command, tmp_path, capsys):
    src = tmp_path / "s.txt"
    src.write_text("a b\n")
    data = tmp_path / "d"
    refused(["data", command, "bible-en-de", "--vocab", "400", "--src", src, "--data-dir", data], capsys,
            "--src is an option of the 'files' recipe, not of corpus 'bible-en-de'")  # fmt: skip
    assert not data.exists()


def test_files_named_twice_are_refused(tmp_path, capsys):
    src = tmp_path / "s.txt"
    src.write_text("a b\n")
    data = tmp_path / "d"
    refused(["data", "prepare", f"files:{src},{src}", "--src", src, "--data-dir", data], capsys,
            "--src and corpus", "allowed one")  # fmt: skip
    assert not data.exists()


@pytest.mark.parametrize("name", ["+++", "", "bible-en-de+", "+bible-en-de"])
def test_a_name_with_an_empty_part_is_refused_before_any_lock(name, tmp_path, capsys):
    data = tmp_path / "d"
    refused(["data", "prepare", name, "--vocab", "400", "--data-dir", data], capsys,
            f"corpus {name!r} is invalid", "known recipes are")  # fmt: skip
    assert not data.exists()
    with pytest.raises(DataInputError):
        load_corpus(name, 400, data)
    assert not data.exists()

"""Evaluation sets given as files: normalised, fingerprinted by content and named (a sweep scored on them:
tests/e2e/test_evaluate_e2e.py)."""

import pytest

from transformer_core.data.eval_set import EvalSetError, read_eval_set


def test_eval_set_is_normalised_fingerprinted_and_named(tmp_path):
    (tmp_path / "a.en").write_text("Hello  world\r\n\nbye\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("Hallo Welt\n\ntschüss\n", encoding="utf-8")
    es = read_eval_set(f"files:{tmp_path / 'a.en'},{tmp_path / 'a.de'}")
    assert es.name == "a" and es.source == ["Hello world", "", "bye"] and len(es) == 3
    (tmp_path / "b.tsv").write_text("Hello world\tHallo Welt\n\t\nbye\ttschüss\n", encoding="utf-8")
    same = read_eval_set(f"files:{tmp_path / 'b.tsv'}", name="other")
    assert same.fingerprint == es.fingerprint and same.name == "other"  # the set, not its path, identifies it
    for bad in ("test", "../x", ".hidden"):
        with pytest.raises(EvalSetError, match="name"):
            read_eval_set(f"files:{tmp_path / 'b.tsv'}", name=bad)

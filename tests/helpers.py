"""Paths and small shared values for the tests (importable as ``tests.helpers``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"  # committed data: bible-mini.db, wmt/
SPECS = ROOT / "tests" / "specs"  # sweep specs sized for the fixture corpus
SMOKE = SPECS / "smoke.yaml"

"""Every third-party library the packages import is declared in pyproject.toml's [project] dependencies."""

import ast
import re
import sys
from importlib import metadata

import pytest

from tests.helpers import ROOT

tomllib = pytest.importorskip("tomllib")
PACKAGES = ("transformer_core", "sweeps", "analysis", "benchmarks")


def imported_modules() -> dict[str, str]:
    """Top-level module name -> one file importing it, over every .py file of the packages (absolute imports)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def normalise(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def test_every_imported_library_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {normalise(re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0]) for req in project["dependencies"]}
    local = set(PACKAGES) | {p.stem for p in (ROOT / "benchmarks").glob("*.py")}  # benchmarks import each other
    distributions = metadata.packages_distributions()
    missing = []
    for module, where in sorted(imported_modules().items()):
        if module in sys.stdlib_module_names or module in local or module == "__future__":
            continue
        provided_by = {normalise(d) for d in distributions.get(module, [module])}
        if not provided_by & declared:
            missing.append(f"{module} ({where}; distribution {', '.join(sorted(provided_by))})")
    assert not missing, "imported but not in [project] dependencies: " + "; ".join(missing)


def test_the_check_sees_the_libraries_it_is_about():
    modules = imported_modules()
    assert {"torch", "scipy", "pyarrow", "yaml"} <= set(modules)  # a walk that found nothing would pass vacuously

"""The layers run one way (docs/design.md), read from the source: every import statement of the library's modules,
at the top, inside a function or under ``if TYPE_CHECKING`` (an annotation's import is an import), walked in the
AST without importing anything."""

import ast
from pathlib import Path

from tests.helpers import ROOT

LAYERS = ("transformer_core", "analysis", "sweeps")  # each may import only those before it (and itself)


def _modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The library modules ``name`` imports: ``from X import y`` is X.y where that is a module, else X."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in MODULES and t != name}
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_cli(name: str) -> bool:
    return name == "sweeps.cli" or name.startswith("sweeps.cli_")


def test_no_module_imports_itself_back_through_another():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_never_imports_the_cli():
    reaching = {name: sorted(filter(_is_cli, deps)) for name, deps in GRAPH.items() if not _is_cli(name)}
    assert {name: deps for name, deps in reaching.items() if deps} == {}


def test_a_layer_imports_nothing_above_it():
    def layer(name):
        return LAYERS.index(name.split(".")[0])

    upward = {name: sorted(d for d in deps if layer(d) > layer(name)) for name, deps in GRAPH.items()}
    assert {name: deps for name, deps in upward.items() if deps} == {}


def test_the_graph_sees_imports_in_functions_and_under_type_checking():
    assert "transformer_core.data.corpus" in GRAPH["transformer_core.data"]  # from .corpus import ...
    assert "transformer_core.rundir" in GRAPH["transformer_core.trainer"]  # from . import rundir
    assert "sweeps.spec" in GRAPH["sweeps.cli_sweep"]  # inside cmd_plan
    assert "transformer_core.run_config" in GRAPH["transformer_core.task"]  # under TYPE_CHECKING


def _owned(path: Path) -> set[str]:
    """The names a module defines at its top level (def, class, assignment; also under if/try)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        for n in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                for target in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    out |= {x.id for x in ast.walk(target) if isinstance(x, ast.Name)}
    return out


def test_callers_import_a_name_from_the_module_that_owns_it():
    """No re-export shims: ``from M import x`` needs x defined in M, unless M is a package (its __init__ is the
    package's face: transformer_core.data, .data.recipes) or x is a module.  Callers in tests/ and benchmarks/
    count."""
    callers = {**MODULES}
    for folder in ("tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            callers[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    owned = {name: _owned(path) for name, path in MODULES.items() if path.name != "__init__.py"}
    through = []
    for name, path in callers.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                source = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                if source in owned and alias.name not in owned[source] and f"{source}.{alias.name}" not in MODULES:
                    through.append(f"{name}:{node.lineno}: {alias.name} from {source}")
    assert through == []


def test_the_core_tests_import_nothing_of_the_layers_above():
    """tests/core tests transformer_core alone: nothing of analysis or sweeps (their tests: tests/analysis, /sweeps)."""
    reaching = {}
    for path in sorted((ROOT / "tests" / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n.split(".")[0] in ("sweeps", "analysis") for n in names):
                reaching.setdefault(path.name, []).append(node.lineno)
    assert reaching == {}

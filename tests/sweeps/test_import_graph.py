"""The layers run one way (docs/design.md), read from the source: every import statement of the library's modules,
at the top, inside a function or under ``if TYPE_CHECKING`` (an annotation's import is an import), walked in the
AST without importing anything.  The benchmarks import the library, never the CLI; no module reaches for another's
private name (a leading underscore)."""

import ast
from pathlib import Path

from tests.helpers import ROOT

LAYERS = ("transformer_core", "analysis", "sweeps")  # each may import only those before it (and itself)
# the rooms of the library, floor by floor: a module imports only from its own room and the rooms before it
ROOMS = (
    "transformer_core",
    "analysis.data",
    "analysis.stats",
    "analysis.report",
    "sweeps.spec",
    "sweeps.plan",
    "sweeps.state",
    "sweeps.run",
    "sweeps.api",
    "sweeps.cli",
)
FACES = {"analysis": "analysis.data", "sweeps": "sweeps.api"}  # a package's own __init__, on the floor of this room


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
    return name == "sweeps.cli" or name.startswith("sweeps.cli.")


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


def _room(name: str) -> str:
    """The room of a library module: the longest room its dotted name lies in (a package's face: FACES)."""
    if name in FACES:
        return FACES[name]
    inside = [r for r in ROOMS if name == r or name.startswith(r + ".")]
    return max(inside, key=len) if inside else ""


def test_every_module_of_sweeps_and_analysis_lives_in_a_room():
    """No module left on a package's floor beside the rooms (a new module goes into the room of its layer)."""
    assert [name for name in MODULES if not _room(name)] == []


def test_a_room_imports_nothing_above_it():
    """spec < plan < state < run < api < cli in sweeps/, data < stats < report in analysis/: the layers inside the
    layers, so that a reader of a room needs only the rooms below it."""
    upward = {
        name: sorted(d for d in deps if ROOMS.index(_room(d)) > ROOMS.index(_room(name)))
        for name, deps in GRAPH.items()
    }
    assert {name: deps for name, deps in upward.items() if deps} == {}


def test_the_room_check_finds_an_upward_import():
    graph = {"analysis.data.collect": {"analysis.report.tables"}, "sweeps.run.runner": {"sweeps.state.storage"}}
    upward = [n for n, deps in graph.items() for d in deps if ROOMS.index(_room(d)) > ROOMS.index(_room(n))]
    assert upward == ["analysis.data.collect"]


def test_the_graph_sees_imports_in_functions_and_under_type_checking():
    assert "transformer_core.data.corpus" in GRAPH["transformer_core.data"]  # from .corpus import ...
    assert "transformer_core.rundir" in GRAPH["transformer_core.trainer"]  # from . import rundir
    assert "sweeps.spec.sweep_spec" in GRAPH["sweeps.cli.sweep"]  # inside cmd_plan
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


def test_the_benchmarks_never_import_the_cli():
    """What a benchmark needs of `tsweep`'s commands lives in a library module they call (sweeps/plan/device_bench.py,
    sweeps/spec/profiles.py)."""
    reaching = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        deps = sorted(filter(_is_cli, _imports(".".join(path.relative_to(ROOT).with_suffix("").parts), path)))
        if deps:
            reaching[path.name] = deps
    assert reaching == {}


# A private name (leading underscore) of one of the project's modules reached from another module: imported
# (``from M import _x``) or read off an imported module (``m._x``).  Each one left, with why; an entry that no longer
# occurs fails the test, so the list only shrinks.
PRIVATE_LEFT = {
    "analysis.report.search_plots -> analysis.report.plots._pyplot": "issue 55: the two reports' one document model",
}
BENCHMARKS = {path.stem: path for path in sorted((ROOT / "benchmarks").glob("*.py"))}  # imported by their bare names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> list[str]:
    """``a.b.c`` as ["a", "b", "c"]; [] for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def _private_uses(name: str, source: str, is_package: bool = False) -> set[str]:
    """Each private name of another project module that module ``name`` (its source text) imports or reads as an
    attribute of a module it imported, as "NAME -> MODULE.PRIVATE"."""
    ours = set(MODULES) | set(BENCHMARKS)
    package = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a local name -> the project module it is bound to
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                local, target = (a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0])
                if target in ours:
                    bound[local] = target
                parts = a.name.split(".")
                for i in range(1, len(parts)):  # import pkg._private_module
                    if ".".join(parts[:i]) in ours and _private(parts[i]):
                        found.add(f"{name} -> {'.'.join(parts[: i + 1])}")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            for a in node.names:
                if f"{base}.{a.name}" in ours:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
                elif base in ours and base != name and _private(a.name):
                    found.add(f"{name} -> {base}.{a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            parts = _dotted(node.value)
            if parts and parts[0] in bound:
                module = ".".join([bound[parts[0]], *parts[1:]])
                if module in ours and module != name:
                    found.add(f"{name} -> {module}.{node.attr}")
    return found


def test_no_module_reaches_for_another_modules_private_name():
    """The library's modules and the benchmarks (tests may reach into a module: they test it).  A name another
    module needs is public where it is defined, or its code moves to where it is used."""
    found = set()
    for name, path in MODULES.items():
        found |= _private_uses(name, path.read_text(), path.name == "__init__.py")
    for name, path in BENCHMARKS.items():
        found |= _private_uses(name, path.read_text())
    assert sorted(found - set(PRIVATE_LEFT)) == []
    assert sorted(set(PRIVATE_LEFT) - found) == [], "no longer occurs: take it off PRIVATE_LEFT"


def test_the_private_name_finder_finds_imports_and_attributes():
    source = """
from .tracking import _retry, resolve_uri
from transformer_core import attention
import transformer_core.config
import sweeps.cli.bench as bench
from . import _sync
def f():
    from transformer_core.data.prepare import _combine
    return attention._LOW_PRECISION, transformer_core.config._fail, bench._sync, bench.register, self._x
"""
    assert _private_uses("sweeps.run.evaluate", source) == {
        "sweeps.run.evaluate -> sweeps.run.tracking._retry",
        "sweeps.run.evaluate -> transformer_core.data.prepare._combine",
        "sweeps.run.evaluate -> transformer_core.attention._LOW_PRECISION",
        "sweeps.run.evaluate -> transformer_core.config._fail",
        "sweeps.run.evaluate -> sweeps.cli.bench._sync",
        "sweeps.run.evaluate -> sweeps.run._sync",
    }
    assert _private_uses("sweeps.run.tracking", "from .tracking import _retry\nx = _retry") == set()  # its own


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

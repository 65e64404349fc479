"""Limits on what a spec may ask of the machine, each refused in one line before any work.

The YAML document: at most ``TSWEEP_MAX_SPEC_BYTES`` bytes (default 256 KiB; Table 3 is 3 KB), nested at most
MAX_DEPTH deep (a spec needs fewer than ten levels), and at most MAX_NODES values once anchors and aliases are expanded
(a few dozen aliases nested ten deep stand for billions of values: the "billion laughs"); no key given twice in one
mapping (YAML would keep the last silently).  The plan: at most
``TSWEEP_MAX_TRIALS`` trials (default 2,000: rows x seeds, seeds.max for adaptive seeds; for a search
search.samples x seeds plus search.confirm.top x search.confirm.seeds), counted from the document before any row
is expanded.  A trial's memory: transformer_core.memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from transformer_core.errors import UserError

MAX_SPEC_BYTES = 256 << 10  # YAML is parsed in Python: about 2 s at this size
SPEC_BYTES_ENV = "TSWEEP_MAX_SPEC_BYTES"
MAX_DEPTH = 32
MAX_NODES = 1_000_000
MAX_TRIALS = 2000
TRIALS_ENV = "TSWEEP_MAX_TRIALS"


class SpecLimit(UserError):
    exit_code = 2


def env_limit(name: str, default: int) -> int:
    """A positive integer from the environment, else ``default``."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise SpecLimit(f"{name}={text!r} is invalid: allowed a positive integer")
    return value


class _BoundedLoader(yaml.SafeLoader):
    """safe_load's loader, refusing a document nested deeper than MAX_DEPTH while it composes (the composer
    recurses once per level: 5,000 nested '[' would end in a RecursionError)."""

    depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise SpecLimit(
                    f"is nested more than {MAX_DEPTH} levels deep (at line {mark.line + 1}, column {mark.column + 1});"
                    " a spec needs fewer than ten"
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def expanded_size(node) -> int:
    """Values in the document rooted at ``node`` with every alias expanded, counted once per distinct node; a
    node that contains itself through an alias (``&a [*a]``) is refused: it expands without end."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # the nodes being counted: the path from the root

    def size(n) -> int:
        if id(n) in open_:
            mark = n.start_mark
            raise SpecLimit(f"refers to itself through an alias (the value at line {mark.line + 1}, column "
                            f"{mark.column + 1} contains itself); allowed aliases of other values only")  # fmt: skip
        if id(n) not in sizes:
            open_.add(id(n))
            if isinstance(n, yaml.MappingNode):
                sizes[id(n)] = 1 + sum(size(k) + size(v) for k, v in n.value)
            elif isinstance(n, yaml.SequenceNode):
                sizes[id(n)] = 1 + sum(size(x) for x in n.value)
            else:
                sizes[id(n)] = 1
            open_.discard(id(n))
        return sizes[id(n)]

    return size(node)  # recursion depth is bounded by MAX_DEPTH, cycles are refused


def _check_unique_keys(root, path: str) -> None:
    """Refuse a mapping that gives one key twice: YAML keeps the last value silently (a second rows group of the
    same name would drop the first).  A merge (``<<: *anchor``) is not a duplicate: its keys are the defaults."""
    seen: set[int] = set()
    todo, loader = [root], yaml.SafeLoader("")
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[Any, tuple[str, int]] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    same = next((k for k in (_key_value(key, loader), key.value) if k in keys), None)
                    if same is not None:  # the same value, or the same text ("1" and 1)
                        first, line = keys[same]
                        spelled = repr(key.value) if first == key.value else f"{first!r} (again as {key.value!r})"
                        raise SpecLimit(f"spec file {path!r} gives the key {spelled} twice in one mapping (lines "
                                        f"{line} and {key.start_mark.line + 1}): YAML would keep the last "
                                        "silently; allowed each key once")  # fmt: skip
                    keys[_key_value(key, loader)] = keys[key.value] = (key.value, key.start_mark.line + 1)
                todo += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            todo += node.value


def _key_value(key: yaml.ScalarNode, loader: yaml.SafeLoader) -> Any:
    """What a scalar key becomes in the document: ``1``, ``0x1`` and ``1.0`` are one key, as are ``"a"`` and
    ``a``."""
    try:
        value = loader.construct_object(key)
        hash(value)
    except (yaml.YAMLError, TypeError, ValueError):
        return ("text", key.value)
    return value  # equal where the document's mapping takes them as one key: 1, 1.0 and true


def read_document(path: str | Path) -> Any:
    """The YAML document of the spec file at ``path``, within the limits, or one line saying why not."""
    try:
        return _read_document(Path(path))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise SpecLimit(f"spec file {str(path)!r} is not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    except OSError as exc:
        raise SpecLimit(f"spec file {str(path)!r} cannot be read: {exc.strerror or exc}") from None


def _read_document(p: Path) -> Any:
    path = str(p)
    limit = env_limit(SPEC_BYTES_ENV, MAX_SPEC_BYTES)
    with p.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SpecLimit(
            f"spec file {path!r} is larger than {limit:,} bytes; a spec is a few KB"
            f" (set {SPEC_BYTES_ENV}=N to allow more)"
        )
    loader = _BoundedLoader(data.decode("utf-8"))
    try:
        try:
            node = loader.get_single_node()
        except SpecLimit as exc:
            raise SpecLimit(f"spec file {path!r} {exc}") from None
        if node is None:
            return None
        try:
            size = expanded_size(node)
        except SpecLimit as exc:
            raise SpecLimit(f"spec file {path!r} {exc}") from None
        if size > MAX_NODES:
            raise SpecLimit(
                f"spec file {path!r} expands to more than {MAX_NODES:,} values through its anchors and"
                " aliases (&name, *name); a spec has a few hundred: write the values out"
            )
        _check_unique_keys(node, path)
        try:
            return loader.construct_document(node)
        except (ValueError, OverflowError) as exc:  # e.g. a date of month 13, an integer of 5,000 digits
            raise SpecLimit(f"spec file {path!r} is not valid YAML: {str(exc).splitlines()[0][:200]}") from None
    finally:
        loader.dispose()


def _count(value) -> int:
    return len(value) if isinstance(value, list) else 0


def planned_trials(doc: dict) -> tuple[int, str]:
    """(the trials a spec document asks for, how they were counted), read before validation: malformed parts
    count as nothing, the parsers name them."""
    seeds = doc.get("seeds", [1])
    if isinstance(seeds, dict):
        most = seeds.get("max", seeds.get("min", 2))
        n_seeds, what = (most if _int(most) else 0), "seeds.max"
    elif _int(seeds):  # seeds: N
        n_seeds, what = seeds, "seeds"
    else:
        n_seeds, what = max(1, _count(seeds)), "seeds"
    search = doc.get("search")
    if isinstance(search, dict):  # every sample at every seed, then the confirmation round
        samples = search.get("samples", 4)
        samples = samples if _int(samples) else 0
        n, how = samples * n_seeds, f"{samples:,} search.samples x {n_seeds:,} {what}"
        confirm = search.get("confirm")
        if isinstance(confirm, dict):
            top, fresh = confirm.get("top", 2), confirm.get("seeds", 3)
            top, fresh = (top if _int(top) else 0), (fresh if _int(fresh) else 0)
            n, how = n + top * fresh, f"{how} + {top:,} search.confirm.top x {fresh:,} search.confirm.seeds"
        return n, how
    rows = doc.get("rows")
    n_rows = 1 + (sum(_count(v) for v in rows.values()) if isinstance(rows, dict) else 0)
    return n_rows * n_seeds, f"{n_rows:,} rows x {n_seeds:,} {what}"


def _int(x) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def check_plan_size(doc: dict) -> None:
    """Refuse a spec asking for more trials than the limit, before its rows are expanded."""
    limit = env_limit(TRIALS_ENV, MAX_TRIALS)
    n, how = planned_trials(doc)
    if n > limit:
        raise SpecLimit(
            f"the spec asks for {n:,} trials ({how}), more than the limit of {limit:,}: split it into several"
            f" sweeps, or set {TRIALS_ENV}=N to allow more"
        )

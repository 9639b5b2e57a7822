"""Whether a Python module binds a name, found the way an import would bind it — without
running the module.

A module's `.py` source is parsed with `ast` and read as the interpreter would run it, on every
path: `def`, `class`, assignments, imports, `for`/`with` targets and `:=` at module level,
under `if`/`try`/`with`/`for`/`while`/`match` too (a name bound on some path is accepted: which
path runs is only known by running it). `from m import *` is followed into `m` — its `__all__`
when written as a literal (extended by `+=`, `.extend`, `.append`), else its public names —
relative star imports inside packages included, cycles and all, each module read once. An
explicit `from m import name` binds `name` as Python's import would (and fails loudly at run
time if `m` lacks it). A module already imported in this process is read from `sys.modules`
(its namespace, not its attributes: no module `__getattr__` runs), as the import at run time
would return it.

What no source can show is said to be unproven, with the reason: a compiled or built-in module
that is not loaded (reading its names means running it), a module-level `__getattr__`, a name
set only inside a function through `global`, `globals()`/`exec` at work, a source too large or
not Python. `soul validate` reports those as warnings, never as errors.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType

MAX_SOURCE_BYTES = 1 << 20  # a module bigger than this is not parsed at validate time
MAX_MODULES = 64  # star imports followed per lookup, however they chain
MAX_TOTAL_BYTES = 4 << 20  # source read per blueprint, however many tools and star imports
_DYNAMIC_CALLS = frozenset({"globals", "exec", "vars"})


@dataclass(frozen=True)
class Binding:
    """Whether a module binds a name: `found` True (on some path), False (on none), or None
    when that cannot be proven without running code (`why` says what stands in the way)."""

    found: bool | None
    why: str = ""


@dataclass
class _Facts:
    """What a module's source binds at top level, read once."""

    bound: set[str] = field(default_factory=set)
    stars: list[tuple[str, int]] = field(default_factory=list)  # (module, level) of `from … import *`
    exported: list[str] | None = None  # a literal `__all__`, as extended
    exported_unknown: bool = False  # `__all__` built some other way
    in_functions: set[str] = field(default_factory=set)  # names a function sets through `global`
    dynamic: str = ""  # why the namespace may hold names the source does not show


def find_module(module: str, folder: Path | None) -> ModuleSpec | None:
    """The spec of `module` as an import would find it (the blueprint's folder first, then
    `sys.path`), found without importing anything — not even the parent packages."""
    search: list[str] = ([str(folder)] if folder is not None else []) + [p for p in sys.path if isinstance(p, str)]
    parts = module.split(".")
    spec: ModuleSpec | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        if i == 0 and name in sys.builtin_module_names:
            return ModuleSpec(name, None, origin="built-in") if i == len(parts) - 1 else None
        spec = PathFinder.find_spec(name, search)
        if spec is None:
            return None
        if i < len(parts) - 1:
            locations = spec.submodule_search_locations
            if not locations:
                return None
            search = list(locations)
    return spec


class Bindings:
    """Looks names up in modules found from a blueprint's folder; each module read once."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._facts: dict[str, _Facts | str] = {}  # module -> its facts, or why it cannot be read
        self._budget = MAX_TOTAL_BYTES

    def binds(self, module: str, name: str) -> Binding:
        """Whether importing `module` binds `name` in it."""
        return self._lookup(module, name, exported_only=False, seen=set())

    def _lookup(self, module: str, name: str, *, exported_only: bool, seen: set[str]) -> Binding:
        seen.add(module)
        loaded = sys.modules.get(module)
        if isinstance(loaded, ModuleType):
            return _in_namespace(module, vars(loaded), name, exported_only)
        facts = self._read(module)
        if isinstance(facts, str):
            return Binding(None, facts)
        if exported_only:
            if facts.exported_unknown:
                return Binding(None, f"module '{module}' builds its __all__ in a way its source does not show")
            if facts.exported is not None:
                return Binding(name in facts.exported)
            if name.startswith("_"):
                return Binding(False)
        if name in facts.bound:
            return Binding(True)
        doubts = []
        for target, level in facts.stars:
            star = _absolute(module, target, level, self._is_package(module))
            if star is None or star in seen or len(seen) >= MAX_MODULES:
                continue
            found = self._lookup(star, name, exported_only=True, seen=seen)
            if found.found:
                return found
            if found.found is None:
                doubts.append(found.why)
        if name in facts.in_functions:
            return Binding(None, f"'{name}' is set only inside a function of '{module}' (`global {name}`)")
        if facts.dynamic:
            return Binding(None, f"module '{module}' {facts.dynamic}")
        return Binding(None, doubts[0]) if doubts else Binding(False)

    def _is_package(self, module: str) -> bool:
        spec = find_module(module, self.folder)
        return spec is not None and spec.submodule_search_locations is not None

    def _read(self, module: str) -> _Facts | str:
        if module not in self._facts:
            self._facts[module] = self._parse(module)
        return self._facts[module]

    def _parse(self, module: str) -> _Facts | str:
        spec = find_module(module, self.folder)
        if spec is None:
            return f"module '{module}' is not found"
        origin = spec.origin or ""
        if not origin.endswith(".py"):
            what = "a built-in module" if origin in ("built-in", "frozen") else "a compiled module"
            return f"'{module}' is {what}, whose names only importing it would show"
        try:
            path = Path(origin)
            size = path.stat().st_size
            if size > MAX_SOURCE_BYTES:
                return f"module '{module}' is over {MAX_SOURCE_BYTES >> 20} MiB of source"
            if size > self._budget:
                return f"reading module '{module}' would pass {MAX_TOTAL_BYTES >> 20} MiB of source in all"
            self._budget -= size
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return f"module '{module}' cannot be read as Python ({type(exc).__name__})"
        return facts_of(tree)


def _in_namespace(module: str, namespace: dict[str, object], name: str, exported_only: bool) -> Binding:
    """A loaded module's namespace: exact, as the import at run time returns that module."""
    if exported_only:
        exported = namespace.get("__all__")
        if isinstance(exported, list | tuple):
            return Binding(name in exported)
        if name.startswith("_"):
            return Binding(False)
    if name in namespace:
        return Binding(True)
    if "__getattr__" in namespace:
        return Binding(None, f"module '{module}' defines __getattr__, which may answer any name")
    return Binding(False)


def _absolute(module: str, target: str, level: int, is_package: bool) -> str | None:
    """The module a `from target import *` at `level` in `module` names (None: beyond the top)."""
    if level == 0:
        return target
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, target] if target else base) or None


def facts_of(tree: ast.Module) -> _Facts:
    """What a parsed module binds at top level, on every path."""
    facts = _Facts()
    _statements(tree.body, facts)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Global):
                    facts.in_functions.update(inner.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC_CALLS:
            facts.dynamic = facts.dynamic or f"calls {node.func.id}(), which may bind names its source does not show"
    if "__getattr__" in facts.bound:
        facts.dynamic = "defines __getattr__, which may answer any name"
    return facts


def _statements(body: list[ast.stmt], facts: _Facts) -> None:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            facts.bound.add(node.name)
        elif isinstance(node, ast.Import):
            facts.bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    facts.stars.append((node.module or "", node.level))
                else:
                    facts.bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            _assignment(node, facts)
        elif isinstance(node, ast.For | ast.AsyncFor):
            facts.bound.update(_names(node.target))
            _statements(node.body + node.orelse, facts)
        elif isinstance(node, ast.While | ast.If):
            _statements(node.body + node.orelse, facts)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    facts.bound.update(_names(item.optional_vars))
            _statements(node.body, facts)
        elif isinstance(node, ast.Try | ast.TryStar):
            _statements(node.body + node.orelse + node.finalbody, facts)
            for handler in node.handlers:
                _statements(handler.body, facts)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                _statements(case.body, facts)
        elif isinstance(node, ast.Expr):
            _all_call(node.value, facts)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            facts.bound.update(n.target.id for n in _walrus(node) if isinstance(n.target, ast.Name))


def _walrus(node: ast.stmt) -> list[ast.NamedExpr]:
    """The `:=` of a statement's own expressions (not of nested statements or functions)."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            found += [n for n in ast.walk(child) if isinstance(n, ast.NamedExpr)]
    return found


def _assignment(node: ast.Assign | ast.AnnAssign | ast.AugAssign, facts: _Facts) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if isinstance(node, ast.AnnAssign) and node.value is None:
        return  # `x: int` alone binds nothing
    names = [n for t in targets for n in _names(t)]
    facts.bound.update(names)
    if "__all__" not in names:
        return
    listed = _strings(node.value)
    if listed is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
        facts.exported_unknown = True
    elif isinstance(node, ast.AugAssign):
        facts.exported = [*(facts.exported or []), *listed]
    else:  # several literal assignments on different paths: any of them may hold
        facts.exported = [*(facts.exported or []), *listed]


def _all_call(value: ast.expr, facts: _Facts) -> None:
    """`__all__.extend([...])` / `__all__.append("x")`."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "__all__"):
        return
    method, args = value.func.attr, value.args
    listed = _strings(args[0]) if method == "extend" and len(args) == 1 else (
        _strings(ast.List(elts=list(args))) if method == "append" and len(args) == 1 else None)
    if listed is None:
        facts.exported_unknown = True
    else:
        facts.exported = [*(facts.exported or []), *listed]


def _strings(value: ast.expr | None) -> list[str] | None:
    """A literal list or tuple of strings, else None."""
    if not isinstance(value, ast.List | ast.Tuple):
        return None
    items = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return items if len(items) == len(value.elts) else None


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _names(e)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []

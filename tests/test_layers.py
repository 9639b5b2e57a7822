"""Who may import whom, as data, checked over every module's imports (issue 11).

Every `import` and `from ... import` is read with `ast` wherever it stands (module level, lazy
inside a function, under `if TYPE_CHECKING:`), relative ones resolved, `from soul import steps`
read as the submodule. The rules are the tables below; the last tests plant violations.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"pipeline": "soul", "steps": "soul.steps", "engines": "soul.engines"}
SKIPPED = ("engines/resonance/data",)  # a data package holding a large JSON, no code

ENGINES = "soul.engines.*"  # any one engine: soul.engines.chetana, soul.engines.resonance, ...
LEAVES = frozenset({"soul.errors", "soul.diagnostics", "soul.records", "soul.data", "soul.textfiles", "soul.credentials"})
FRONT_HALF = frozenset({"soul.language", "soul.kinds", "soul.compiler"})
BEFORE_RUNTIME = LEAVES | FRONT_HALF | {"soul.sections", "soul.providers", "soul.store"}

# For each stage, the other stages its modules may import (a stage may always import itself).
# A stage missing from this table fails the check: a new stage states its place here first.
MAY_IMPORT: dict[str, frozenset[str]] = {
    **dict.fromkeys(("soul.records", "soul.diagnostics", "soul.data", "soul.textfiles", "soul.credentials"), frozenset()),
    "soul.errors": frozenset({"soul.diagnostics"}),  # for the type of BlueprintInvalid's list
    "soul.language": LEAVES,
    "soul.kinds": LEAVES | {"soul.language"},
    "soul.compiler": LEAVES | {"soul.language", "soul.kinds"},
    "soul.sections": LEAVES | {"soul.kinds"},
    "soul.store": LEAVES,
    "soul.providers": LEAVES | {"soul.store"},  # the data home, where local models are found
    "soul.runtime": BEFORE_RUNTIME | {ENGINES},  # the engines: only in ONLY_IN's bridges
    "soul.testing": BEFORE_RUNTIME | {"soul.runtime"},
    "soul.serve": BEFORE_RUNTIME | {"soul.runtime"},  # transport only; only the cli imports it
    "soul.cli": BEFORE_RUNTIME | {"soul.runtime", "soul.testing", "soul.serve", "soul.steps", ENGINES},
    "soul": BEFORE_RUNTIME | {"soul.runtime"},  # the public facade, re-exporting names
    "soul.steps": LEAVES | {"soul.language", "soul.kinds", "soul.sections", ENGINES},
    "soul.engines": frozenset(),  # the namespace of the engines holds no code
    ENGINES: frozenset(),  # an engine is a library of its own: nothing of soul, no other engine
}

# Pairs that never appear, with the reason a failure shows (MAY_IMPORT agrees: checked below).
NEVER: tuple[tuple[frozenset[str], frozenset[str], str], ...] = (
    (FRONT_HALF, frozenset({"soul.runtime", "soul.providers", ENGINES}),
     "the front half never imports the runtime, providers or engines: `soul validate` stays "
     "fast and the compiler testable alone"),
    (frozenset({"soul.steps"}), frozenset({"soul.providers", "soul.runtime", "soul.store"}),
     "a step calls no model and writes no store: it returns its changes to the runtime"),
    (frozenset({"soul.providers"}),
     frozenset({"soul.steps", "soul.kinds", "soul.runtime", "soul.compiler", "soul.sections"}),
     "providers know no step kinds: the runtime hands them messages and gets text back"),
    (frozenset({ENGINES}), frozenset({"soul", "soul.*"}),
     "an engine imports nothing of soul nor another engine"),
)

# Where a stage may import another only from some of its modules: (stage, target) -> modules.
ONLY_IN: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("soul.runtime", ENGINES): (frozenset({"soul.runtime.chetana", "soul.runtime.memory", "soul.runtime.dialogue_engine"}),
        "runtime may import the engines only in the bridges runtime/chetana.py, runtime/memory.py, runtime/dialogue_engine.py"),
}

# Single imports allowed against the tables, (module, stage): why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("soul.kinds.registry", "soul.steps"): "the built-in kinds are the registry's default "
    "content: imported lazily in default_registry, so a source checkout needs no installed "
    "entry point, and importing soul.kinds loads no step",
}

# Packages others enter only through their __init__ (a door nested in another is its own).
FRONT_DOORS = frozenset({
    "soul.language", "soul.compiler", "soul.kinds", "soul.sections", "soul.providers",
    "soul.store", "soul.runtime", "soul.testing", "soul.serve", "soul.cli", "soul.steps", "soul.engines.chetana",
    "soul.engines.dialogue",
    "soul.engines.resonance", "soul.engines.resonance.code",  # code: optional (tree-sitter)
    "soul.engines.resonance.themes",  # optional tools over a field (cortical index, themes)
})

# Import cycles between modules of one stage (each engine is one stage) as they stand, to be
# mended; the list may only shrink, and is kept exact: a mended cycle is taken off it.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset(frozenset(c) for c in (
    # themes/maintain.py reaches into ThemeIndex's tables; untangling it means giving those
    # tables a class of their own (not done in the layout issue, which named the field* cycle)
    {"soul.engines.resonance.themes.maintain", "soul.engines.resonance.themes.themes"},
))


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository, for the message
    line: int
    source: str  # the importing module
    target: str  # the imported module (a package means its __init__)


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under the mapped folders: name -> (file, is a package)."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(SKIPPED):
                continue
            parts = [package, *path.relative_to(root / folder).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(root: Path) -> list[Import]:
    """Every import of a `soul` module, from every module, resolved to module names."""
    known = modules(root)
    found = []
    for name, (path, is_package) in known.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            else:
                continue
            rel = path.relative_to(root).as_posix()
            found += [Import(rel, node.lineno, name, t) for t in dict.fromkeys(targets)
                      if t == "soul" or t.startswith("soul.")]
    return sorted(found, key=lambda i: (i.path, i.line, i.target))


def stage_of(module: str) -> str:
    """`soul.runtime.turn` -> `soul.runtime`; each engine is a stage of its own."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["soul", "engines"] and len(parts) > 2 else parts[:2])


def covers(pattern: str, stage: str) -> bool:
    """A stage name, or a pattern `prefix.*` for every stage under the prefix."""
    return stage == pattern or (pattern.endswith(".*") and stage.startswith(pattern[:-1]))


def row(stage: str) -> frozenset[str] | None:
    return next((v for k, v in MAY_IMPORT.items() if covers(k, stage)), None)


def layer_violations(found: list[Import]) -> list[str]:
    """Imports against MAY_IMPORT, ONLY_IN and NEVER, as `file:line source → target (why)`."""
    problems = []
    for imp in found:
        source, target = stage_of(imp.source), stage_of(imp.target)
        allowed = row(source)
        if source == target or (imp.source, target) in EXCEPTIONS:
            continue
        if allowed is None:
            why = f"{source} has no row in MAY_IMPORT; give the new stage its place there"
        elif not any(covers(p, target) for p in allowed):
            why = next((r for src, tgt, r in NEVER if any(covers(s, source) for s in src)
                        and any(covers(t, target) for t in tgt)),
                       f"{source} may import only {', '.join(sorted(allowed))}" if allowed
                       else f"{source} may import nothing of soul")
        else:
            only, why = next((v for (s, t), v in ONLY_IN.items()
                              if s == source and covers(t, target)), (None, ""))
            if only is None or imp.source in only:
                continue
        problems.append(f"{imp.path}:{imp.line} {source} → {imp.target} ({why})")
    return problems


def door_violations(found: list[Import]) -> list[str]:
    """Imports reaching past another package's front door into its modules."""
    problems = []
    for imp in found:
        if imp.target in FRONT_DOORS:
            continue
        door = max((d for d in FRONT_DOORS if imp.target.startswith(d + ".")), key=len, default=None)
        if door and not (imp.source == door or imp.source.startswith(door + ".")):
            problems.append(f"{imp.path}:{imp.line} {stage_of(imp.source)} → {imp.target} "
                            f"(import it from the front door {door})")
    return problems


def cycles(found: list[Import]) -> set[frozenset[str]]:
    """Sets of modules of one stage that import each other in a loop (any kind of import)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in found:
        if imp.source != imp.target and stage_of(imp.source) == stage_of(imp.target):
            graph[imp.source].add(imp.target)
    reach = {v: set(targets) for v, targets in graph.items()}
    for k in reach:  # Warshall's transitive closure: through k, i reaches what k reaches
        for i in reach:
            if k in reach[i]:
                reach[i] |= reach[k]
    return {frozenset(m for m in reach[v] if v in reach.get(m, ())) for v in reach if v in reach[v]}


def cycle_problems(found: list[Import], known: frozenset[frozenset[str]]) -> list[str]:
    """New cycles (not inside a known one), and known ones no longer exactly there."""
    now = cycles(found)
    problems = [f"new import cycle in {stage_of(min(c))}: {', '.join(sorted(c))}"
                for c in sorted(now, key=sorted) if not any(c <= k for k in known)]
    problems += [f"KNOWN_CYCLES lists {', '.join(sorted(k))}, which is no longer a cycle as is: "
                 f"replace it with what remains of it, if anything"
                 for k in sorted(known, key=sorted) if k not in now]
    return problems


def test_the_tables_agree_and_name_real_modules() -> None:
    for sources, targets, reason in NEVER:
        for source in sources:
            allowed = row(source) or frozenset()
            assert not {t for t in targets if any(covers(a, t) or covers(t, a) for a in allowed)}, (
                f"MAY_IMPORT lets {source} import what NEVER forbids ({reason})")
    found = modules(REPO)
    assert {"soul", "soul.runtime.turn", "soul.steps", "soul.engines.resonance.field"} <= set(found)
    named = {s for s, _ in EXCEPTIONS} | {m for only, _ in ONLY_IN.values() for m in only}
    named |= FRONT_DOORS  # KNOWN_CYCLES are kept true by the cycle test itself
    assert not named - set(found), f"the tables name modules that are gone: {named - set(found)}"


def test_stages_import_forward_only() -> None:
    problems = layer_violations(imports(REPO))
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def test_other_stages_are_entered_by_their_front_door() -> None:
    problems = door_violations(imports(REPO))
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def test_no_import_cycles_inside_a_stage() -> None:
    problems = cycle_problems(imports(REPO), KNOWN_CYCLES)
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def plant(root: Path, files: dict[str, str]) -> list[Import]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return imports(root)


PLANTED = {
    "pipeline/__init__.py": "",
    "pipeline/errors.py": "",
    "pipeline/compiler/__init__.py": "from .plan import Plan\n",
    "pipeline/compiler/plan.py": "from soul.language import Blueprint\nfrom soul import errors\n",
    # planted: the front half reaching the runtime, lazily
    "pipeline/compiler/x.py": "def f():\n    from soul.runtime import Session\n",
    "pipeline/runtime/__init__.py": "",
    # planted: a cycle inside the runtime, one side relative and under TYPE_CHECKING
    "pipeline/runtime/a.py": "from soul.runtime import b\n",
    "pipeline/runtime/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
    # planted: the engines reached outside the bridges (memory.py is one, turn.py is not)
    "pipeline/runtime/memory.py": "from soul.engines.resonance import Field\n",
    "pipeline/runtime/turn.py": "\n" * 16 + "from soul.engines.resonance import Field\n",
    # planted: a step importing a provider; the CLI past the compiler's front door
    "steps/y.py": "import soul.kinds\nimport soul.providers\n",
    "pipeline/cli/z.py": "from soul.compiler.plan import Plan\nfrom soul.compiler import x\n",
    # planted: an engine importing the framework
    "engines/chetana/__init__.py": "from .state import State\nfrom ... import errors\n",
    "engines/chetana/state.py": "",
}


def test_planted_violations_are_reported(tmp_path: Path) -> None:
    found = plant(tmp_path, PLANTED)
    assert layer_violations(found) == [
        "engines/chetana/__init__.py:2 soul.engines.chetana → soul.errors "
        "(an engine imports nothing of soul nor another engine)",
        "pipeline/compiler/x.py:2 soul.compiler → soul.runtime (the front half never imports "
        "the runtime, providers or engines: `soul validate` stays fast and the compiler "
        "testable alone)",
        "pipeline/runtime/turn.py:17 soul.runtime → soul.engines.resonance (runtime may import "
        "the engines only in the bridges runtime/chetana.py, runtime/memory.py, runtime/dialogue_engine.py)",
        "steps/y.py:2 soul.steps → soul.providers "
        "(a step calls no model and writes no store: it returns its changes to the runtime)",
    ]
    assert door_violations(found) == [
        "pipeline/cli/z.py:1 soul.cli → soul.compiler.plan (import it from the front door soul.compiler)",
        "pipeline/cli/z.py:2 soul.cli → soul.compiler.x (import it from the front door soul.compiler)",
    ]
    assert cycle_problems(found, frozenset()) == [
        "new import cycle in soul.runtime: soul.runtime.a, soul.runtime.b"]
    assert cycle_problems(found, frozenset({frozenset({"soul.runtime.a", "soul.runtime.b"})})) == []
    stale = frozenset({frozenset({"soul.runtime.a", "soul.runtime.b", "soul.runtime.c"})})
    assert cycle_problems(found, stale) == [
        "KNOWN_CYCLES lists soul.runtime.a, soul.runtime.b, soul.runtime.c, which is no longer "
        "a cycle as is: replace it with what remains of it, if anything"]

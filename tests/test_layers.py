"""Who may import whom, as data, checked over every module's imports (issue 11).

Every `import` and `from ... import` is read with `ast` wherever it stands (module level, lazy
inside a function, under `if TYPE_CHECKING:`), relative ones resolved, `from soul import steps`
read as the submodule. The rules are the tables below; the last tests plant violations.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"pipeline": "soul", "steps": "soul.steps", "engines": "soul.engines"}
SKIPPED = ("engines/resonance/data",)  # a data package holding a large JSON, no code

ENGINES = "soul.engines.*"  # any one engine: soul.engines.chetana, soul.engines.resonance, ...
LEAVES = frozenset({"soul.errors", "soul.diagnostics", "soul.records", "soul.data", "soul.textfiles", "soul.credentials", "soul.extras"})
FRONT_HALF = frozenset({"soul.language", "soul.kinds", "soul.compiler"})
BEFORE_RUNTIME = LEAVES | FRONT_HALF | {"soul.sections", "soul.providers", "soul.store"}

# For each stage, the other stages its modules may import (a stage may always import itself).
# A stage missing from this table fails the check: a new stage states its place here first.
MAY_IMPORT: dict[str, frozenset[str]] = {
    **dict.fromkeys(("soul.records", "soul.diagnostics", "soul.data", "soul.textfiles", "soul.credentials"), frozenset()),
    "soul.errors": frozenset({"soul.diagnostics"}),  # for the type of BlueprintInvalid's list
    "soul.extras": frozenset({"soul.errors"}),  # MissingExtra, naming the install line
    "soul.language": LEAVES,
    "soul.kinds": LEAVES | {"soul.language"},
    "soul.compiler": LEAVES | {"soul.language", "soul.kinds"},
    "soul.sections": LEAVES | {"soul.kinds"},
    "soul.store": LEAVES,
    "soul.providers": LEAVES | {"soul.store"},  # the data home, where local models are found
    "soul.runtime": BEFORE_RUNTIME | {ENGINES},  # the engines: only in ONLY_IN's bridges
    "soul.testing": BEFORE_RUNTIME | {"soul.runtime"},
    "soul.serve": BEFORE_RUNTIME | {"soul.runtime"},  # transport only; only the cli imports it
    "soul.bundles": BEFORE_RUNTIME | {"soul.runtime"},  # soul pack/unpack: files, sessions, memory
    "soul.cli": BEFORE_RUNTIME | {"soul.runtime", "soul.testing", "soul.serve", "soul.bundles", "soul.steps", ENGINES},
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
    ("soul.runtime", ENGINES): (frozenset({"soul.runtime.bridges"}),
        "runtime may import the engines only in its bridges, runtime/bridges/"),
}

# Inside the runtime, one part per concern: a subpackage (`soul.runtime.turn`, ...) or a module
# at its top (`soul.runtime.session`, ...). For each part, the other parts it may import; the
# front door `soul.runtime` re-exports them all. A part missing here fails the check.
RT = "soul.runtime."
RUNTIME_MAY_IMPORT: dict[str, frozenset[str]] = {k: frozenset(RT + p for p in v) for k, v in {
    # the shared vocabulary at the top: events, and what makes outside text safe
    RT + "events": (), RT + "untrusted": (), RT + "surrogates": (),
    RT + "tracing": (),  # OpenTelemetry spans: the others call it, it calls none of them
    RT + "bridges": (),  # the only code that touches the engines (ONLY_IN)
    RT + "tools": ("untrusted", "surrogates", "tracing"),
    RT + "conversation": ("events", "untrusted"),
    RT + "turn": ("events", "untrusted", "surrogates", "tracing", "conversation", "tools", "bridges"),
    RT + "background": ("events", "tracing", "conversation", "turn"),
    # what ties the concerns together, at the top
    # a memory soul's turns sent to the worker owning the user's memory partition
    RT + "routing": ("events",),
    RT + "session": ("events", "surrogates", "tracing", "bridges", "turn", "background", "routing"),
    RT + "souls": ("session", "tracing", "turn", "bridges", "background", "routing"),
    RT + "dry_run": ("events", "conversation", "turn"),
    # built on sessions and souls
    RT + "durable": ("events", "tracing", "background", "session", "souls", "routing"),
    RT + "dialogue": ("events", "tracing", "bridges", "turn", "session", "souls"),
}.items()}

# Pairs of runtime parts that never appear, with the reason (RUNTIME_MAY_IMPORT agrees).
RUNTIME_NEVER: tuple[tuple[str, frozenset[str], str], ...] = (
    (RT + "turn", frozenset({RT + "background", RT + "durable", RT + "dialogue"}),
     "the turn knows nothing of the background mind, durable execution or dialogues: they call it"),
    (RT + "background", frozenset({RT + "durable"}),
     "durable execution builds on the background mind, never the reverse"),
    (RT + "conversation", frozenset({RT + "turn"}),
     "the conversation's length is worked out for the turn, not from it"),
)

# Single imports allowed against the tables, (module, stage): why.
EXCEPTIONS: dict[tuple[str, str], str] = {}

# Packages others enter only through their __init__ (a door nested in another is its own).
FRONT_DOORS = frozenset({
    "soul.language", "soul.compiler", "soul.kinds", "soul.sections", "soul.providers",
    "soul.store", "soul.runtime", "soul.testing", "soul.serve", "soul.bundles", "soul.cli", "soul.steps", "soul.engines.chetana",
    "soul.engines.dialogue",
    "soul.engines.resonance", "soul.engines.resonance.code",  # code: optional (tree-sitter)
    "soul.engines.resonance.themes",  # optional tools over a field (cortical index, themes)
    # runtime's concerns, each entered through its own front door
    *(RT + p for p in ("turn", "conversation", "background", "durable", "dialogue", "tools", "bridges", "tracing")),
})

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
            if only is None or any(imp.source == m or imp.source.startswith(m + ".") for m in only):
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


def runtime_part(module: str) -> str:
    """`soul.runtime.turn.prompting.prompt` -> `soul.runtime.turn`; a module at runtime's top is its own part."""
    return ".".join(module.split(".")[:3])


def runtime_violations(found: list[Import]) -> list[str]:
    """Imports between runtime's parts against RUNTIME_MAY_IMPORT and RUNTIME_NEVER."""
    problems = []
    for imp in found:
        if not (imp.source.startswith(RT) and imp.target.startswith(RT)):
            continue  # the front door `soul.runtime` itself may import every part
        source, target = runtime_part(imp.source), runtime_part(imp.target)
        allowed = RUNTIME_MAY_IMPORT.get(source)
        if source == target or (allowed is not None and target in allowed):
            continue
        if allowed is None:
            why = f"{source} has no row in RUNTIME_MAY_IMPORT; give the new part its place there"
        else:
            why = next((r for s, tgt, r in RUNTIME_NEVER if s == source and target in tgt),
                       f"{source} may import only {', '.join(sorted(allowed)) or 'no other part'}")
        problems.append(f"{imp.path}:{imp.line} {source} → {imp.target} ({why})")
    return problems


def cycles(found: list[Import]) -> set[frozenset[str]]:
    """Sets of modules that import each other in a loop, anywhere in the package: across
    stages too, any kind of import (lazy, under TYPE_CHECKING), a package as its __init__."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in found:
        if imp.source != imp.target:
            graph[imp.source].add(imp.target)
    reach = {v: set(targets) for v, targets in graph.items()}
    for k in reach:  # Warshall's transitive closure: through k, i reaches what k reaches
        for i in reach:
            if k in reach[i]:
                reach[i] |= reach[k]
    return {frozenset(m for m in reach[v] if v in reach.get(m, ())) for v in reach if v in reach[v]}


def loop_through(found: list[Import], cycle: frozenset[str]) -> list[Import]:
    """A shortest loop of imports inside `cycle`, from its first module back to it (breadth
    first over the imports in a fixed order, so the message is stable)."""
    start = min(cycle)
    inside = sorted((i for i in found if i.source in cycle and i.target in cycle
                     and i.source != i.target), key=lambda i: (i.source, i.target, i.path, i.line))
    came: dict[str, Import] = {}  # module -> the import that first reached it
    frontier = [start]
    while start not in came:
        reached = []
        for imp in (i for m in frontier for i in inside if i.source == m):
            if imp.target not in came:
                came[imp.target] = imp
                reached.append(imp.target)
        frontier = reached
    loop = [came[start]]
    while loop[0].source != start:
        loop.insert(0, came[loop[0].source])
    return loop


def cycle_problems(found: list[Import]) -> list[str]:
    """Every import cycle, with one loop of its imports as `file:line source → target`."""
    return [f"import cycle through {len(c)} modules ({', '.join(sorted(c))}): "
            + "; ".join(f"{i.path}:{i.line} {i.source} → {i.target}" for i in loop_through(found, c))
            for c in sorted(cycles(found), key=sorted)]


@functools.cache
def repo_imports() -> tuple[Import, ...]:
    """`imports(REPO)`, parsed once for the tests that check the repository's own imports."""
    return tuple(imports(REPO))


def test_the_tables_agree_and_name_real_modules() -> None:
    for sources, targets, reason in NEVER:
        for source in sources:
            allowed = row(source) or frozenset()
            assert not {t for t in targets if any(covers(a, t) or covers(t, a) for a in allowed)}, (
                f"MAY_IMPORT lets {source} import what NEVER forbids ({reason})")
    found = modules(REPO)
    assert {"soul", "soul.runtime.turn", "soul.steps", "soul.engines.resonance.field"} <= set(found)
    named = {s for s, _ in EXCEPTIONS} | {m for only, _ in ONLY_IN.values() for m in only}
    named |= FRONT_DOORS
    assert not named - set(found), f"the tables name modules that are gone: {named - set(found)}"


def test_stages_import_forward_only() -> None:
    problems = layer_violations(list(repo_imports()))
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def test_other_stages_are_entered_by_their_front_door() -> None:
    problems = door_violations(list(repo_imports()))
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def test_runtime_parts_import_by_the_rules() -> None:
    problems = runtime_violations(list(repo_imports()))
    assert not problems, "\n".join([f"{len(problems)} import rule violation(s):", *problems])


def test_runtime_top_holds_at_most_ten_modules() -> None:
    top = sorted(p.name for p in (REPO / "pipeline/runtime").glob("*.py"))
    assert len(top) <= 10, f"runtime's top holds {len(top)} modules: {top}; group them by concern"
    parts = {runtime_part(m) for m in modules(REPO) if m.startswith(RT)}
    assert parts == set(RUNTIME_MAY_IMPORT), f"parts without a row, or rows without a part: {parts ^ set(RUNTIME_MAY_IMPORT)}"


def test_no_import_cycles_in_the_whole_package() -> None:
    problems = cycle_problems(list(repo_imports()))
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
    # planted: the engines reached outside the bridges (bridges/memory.py is one, turn.py is not)
    "pipeline/runtime/bridges/__init__.py": "",
    "pipeline/runtime/bridges/memory.py": "from soul.engines.resonance import Field\n",
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
        "the engines only in its bridges, runtime/bridges/)",
        "steps/y.py:2 soul.steps → soul.providers "
        "(a step calls no model and writes no store: it returns its changes to the runtime)",
    ]
    assert door_violations(found) == [
        "pipeline/cli/z.py:1 soul.cli → soul.compiler.plan (import it from the front door soul.compiler)",
        "pipeline/cli/z.py:2 soul.cli → soul.compiler.x (import it from the front door soul.compiler)",
    ]
    assert cycle_problems(found) == [
        "import cycle through 2 modules (soul.runtime.a, soul.runtime.b): "
        "pipeline/runtime/a.py:1 soul.runtime.a → soul.runtime.b; "
        "pipeline/runtime/b.py:3 soul.runtime.b → soul.runtime.a"]


def test_a_planted_cycle_across_stages_is_reported(tmp_path: Path) -> None:
    found = plant(tmp_path, {
        "pipeline/__init__.py": "",
        "pipeline/kinds/__init__.py": "from .registry import Registry\n",
        # planted: the registry importing the built-in steps, lazily, which import the kinds
        "pipeline/kinds/registry.py": "class Registry: ...\ndef default():\n    import soul.steps\n",
        "steps/__init__.py": "from soul.kinds import Registry\n",
        # no cycle: the compiler imports both, neither imports it
        "pipeline/compiler/__init__.py": "import soul.kinds\nfrom soul import steps\n",
    })
    assert cycle_problems(found) == [
        "import cycle through 3 modules (soul.kinds, soul.kinds.registry, soul.steps): "
        "pipeline/kinds/__init__.py:1 soul.kinds → soul.kinds.registry; "
        "pipeline/kinds/registry.py:3 soul.kinds.registry → soul.steps; "
        "steps/__init__.py:1 soul.steps → soul.kinds"]


PLANTED_RUNTIME = {
    "pipeline/runtime/__init__.py": "from soul.runtime.session import Session\n",
    "pipeline/runtime/events.py": "",
    "pipeline/runtime/session.py": "from soul.runtime.turn import run\nfrom soul.runtime.background import Mind\n",
    "pipeline/runtime/turn/__init__.py": "from soul.runtime.turn.runner import run\n",
    # planted: the turn reaching the background mind (lazily), and a dialogue
    "pipeline/runtime/turn/runner.py": "from soul.runtime import events\ndef run():\n"
                                       "    from soul.runtime.background import Mind\n"
                                       "    from soul.runtime.dialogue import DialogueRunner\n",
    "pipeline/runtime/background/__init__.py": "from soul.runtime.background.mind import Mind\n",
    # planted: the background mind reaching durable execution under TYPE_CHECKING
    "pipeline/runtime/background/mind.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from soul.runtime.durable import Engine\n",
    "pipeline/runtime/durable/__init__.py": "from soul.runtime.background import Mind\n",
    "pipeline/runtime/dialogue/__init__.py": "from soul.runtime.session import Session\n",
    # planted: a new part with no row, and a step past the turn's front door
    "pipeline/runtime/replay_ui/__init__.py": "from soul.runtime.turn.runner import run\n",
}


def test_planted_runtime_violations_are_reported(tmp_path: Path) -> None:
    found = plant(tmp_path, PLANTED_RUNTIME)
    assert runtime_violations(found) == [
        "pipeline/runtime/background/mind.py:3 soul.runtime.background → soul.runtime.durable "
        "(durable execution builds on the background mind, never the reverse)",
        "pipeline/runtime/replay_ui/__init__.py:1 soul.runtime.replay_ui → soul.runtime.turn.runner "
        "(soul.runtime.replay_ui has no row in RUNTIME_MAY_IMPORT; give the new part its place there)",
        "pipeline/runtime/turn/runner.py:3 soul.runtime.turn → soul.runtime.background (the turn "
        "knows nothing of the background mind, durable execution or dialogues: they call it)",
        "pipeline/runtime/turn/runner.py:4 soul.runtime.turn → soul.runtime.dialogue (the turn "
        "knows nothing of the background mind, durable execution or dialogues: they call it)",
    ]
    assert door_violations(found) == [
        "pipeline/runtime/replay_ui/__init__.py:1 soul.runtime → soul.runtime.turn.runner "
        "(import it from the front door soul.runtime.turn)",
    ]

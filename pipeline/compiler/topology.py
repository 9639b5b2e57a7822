"""Graph rules as pure functions over plain data: `after` maps (step -> the steps it follows).

Validation runs on these (no networkx import, so `soul validate` stays fast); the compiled
Graph in `graph.py` is built only from blueprints that pass them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

After = Mapping[str, Sequence[str]]


def roots(after: After) -> list[str]:
    """Steps that follow nothing: the turn's input feeds them."""
    return [name for name, deps in after.items() if not deps]


def successors(after: After) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in after}
    for name, deps in after.items():
        for dep in deps:
            if dep in out:
                out[dep].append(name)
    return out


def find_cycles(after: After) -> list[list[str]]:
    """Each elementary cycle found by DFS, once, as [a, b, ..., a] in file order of its start."""
    order = {name: i for i, name in enumerate(after)}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in after.get(node, ()):
            if dep not in after:
                continue
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    # the stack follows `after` backwards; print the ring in run order
                    ring = list(reversed(cycle))
                    start = ring.index(min(ring, key=order.__getitem__))
                    ring = ring[start:] + ring[:start]
                    cycles.append([*ring, ring[0]])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in after:
        if name not in state:
            visit(name)
    return cycles


def reachable(after: After) -> set[str]:
    """Steps reachable from the turn's input (through roots, following `after` forwards)."""
    succ = successors(after)
    seen: set[str] = set()
    todo = roots(after)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(succ[node])
    return seen


def ancestors(after: After) -> dict[str, set[str]]:
    """For each step, every step that must finish before it (transitively)."""
    memo: dict[str, set[str]] = {}

    def walk(node: str, trail: frozenset[str]) -> set[str]:
        if node in memo:
            return memo[node]
        result: set[str] = set()
        for dep in after.get(node, ()):
            if dep in after and dep not in trail:
                result.add(dep)
                result |= walk(dep, trail | {dep})
        memo[node] = result
        return result

    return {name: walk(name, frozenset({name})) for name in after}

"""The rules of a `dialogue:` block (Entelgia), checked in validation's one pass.

Files (personas, agent blueprints) exist beside the blueprint; model slots are defined; the
first speaker and the observer are agents; at least two agents take turns besides the
observer; an agent's own blueprint is itself valid and holds no dialogue (dialogue blueprints
that name each other as agents are reported with their chain, never followed round). Speaker-policy and
seed-strategy names are checked when the dialogue runs (`soul dialogue`, at their FILE:LINE:COL):
extensions may register their own, and validation stays clear of the engines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from soul import textfiles
from soul.diagnostics import did_you_mean, one_of
from soul.errors import BlueprintError
from soul.kinds import Registry
from soul.language import Blueprint, read

KeyPath = tuple[str | int, ...]


class Rules(Protocol):
    """What these rules use of validation's rule set (`validation._Rules`)."""

    bp: Blueprint
    registry: Registry

    def error(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...

    def warning(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...

    def file_beside(self, rel: str, path: KeyPath, what: str) -> Path | None: ...

    def model_ref(self, spec: str | None, path: KeyPath) -> str | None: ...


Validate = Callable[..., Any]  # validation.validate: a blueprint file -> Checked


def check_dialogue(rules: Rules, validate: Validate) -> None:
    """Every dialogue rule, reported through `rules` at the blueprint's positions;
    `validate` checks an agent's own blueprint (validation's function, passed in so the two
    modules do not import each other)."""
    bp = rules.bp
    raw = bp.dialogue
    spec = bp.dialogue_spec
    if not raw or spec is None:
        return
    agents = spec.agents
    for name, agent in agents.items():
        base = ("dialogue", "agents", name)
        if agent.persona:
            at = (*base, "persona", "file") if agent.rich else (*base, "persona")
            rules.file_beside(agent.persona, at, "persona")
        if agent.blueprint:
            _agent_blueprint(rules, validate, agent.blueprint, (*base, "blueprint"))
        if agent.model:
            rules.model_ref(agent.model, (*base, "model"))
    policy = raw.get("speaker_policy") if isinstance(raw.get("speaker_policy"), dict) else {}
    observer = raw.get("observer") if isinstance(raw.get("observer"), dict) else {}
    refs: list[tuple[KeyPath, Any]] = [
        (("dialogue", "speaker_policy", "first"), policy.get("first")),
        (("dialogue", "observer", "agent"), observer.get("agent")),
    ]
    for path, value in refs:
        if isinstance(value, str) and value not in agents:
            rules.error(path, f"'{value}' is not one of the dialogue's agents", did_you_mean(value, agents) or f"agents: {one_of(agents)}")
    watcher = spec.observer.agent if spec.observer else None
    if watcher in agents and spec.first == watcher:
        rules.error(("dialogue", "speaker_policy", "first"), f"the observer '{watcher}' cannot speak first", "Fixy never speaks before its `min_turn`; name another agent")
    if len(agents) >= 2 and watcher in agents and len(spec.speakers) < 2:
        rules.error(("dialogue", "agents"), f"only one agent takes turns besides the observer '{watcher}'", "a dialogue needs two speakers besides its observer", key=True)
    if watcher in agents and agents[watcher].blueprint:
        rules.error(("dialogue", "agents", watcher, "blueprint"), f"the observer '{watcher}' runs the built-in fixy step; it takes no blueprint", "remove `blueprint:` from the observer")
    if spec.mode == "legacy" and spec.speaker_policy not in (None, "round_robin"):
        rules.warning(("dialogue", "speaker_policy", "kind"), f"legacy mode alternates strictly; speaker policy '{spec.speaker_policy}' is used anyway", "drop `kind`, or use `mode: enhanced`")
    energy = raw.get("energy") if isinstance(raw.get("energy"), dict) else {}
    if spec.energy and "dream_below" in energy and spec.dream_below >= spec.energy_start:
        rules.warning(("dialogue", "energy", "dream_below"), f"dream_below {spec.dream_below:g} is not below start {spec.energy_start:g}: every turn ends in a dream")


def _agent_blueprint(rules: Rules, validate: Validate, rel: str, path: KeyPath) -> None:
    """An agent's own blueprint: beside this one, valid, and without a dialogue of its own."""
    target = rules.file_beside(rel, path, "blueprint")
    if target is None:
        return
    if rules.bp.folder is not None and target.resolve() == (rules.bp.folder / Path(rules.bp.file).name).resolve():
        rules.error(path, "an agent's blueprint cannot be the dialogue's own blueprint", "agents without `blueprint:` already run this blueprint's steps")
        return
    if _agent_files(target) is not None:  # checked here, not by validating it: that would follow the chain
        agent = path[-2]
        ring = _ring(rules.bp, target)
        if ring is not None:
            rules.error(path, f"dialogue blueprints point at each other: {' → '.join(ring)}",
                        f"an agent's blueprint is one soul without a `dialogue:` block; give agent '{agent}' a persona instead")
        else:
            rules.error(path, f"agent blueprint '{rel}' holds a dialogue of its own", "an agent runs one soul; remove its `dialogue:` block")
        return
    checked = validate(target, rules.registry)
    if checked.errors:
        first = checked.errors[0]
        rules.error(path, f"agent blueprint '{rel}' is invalid ({len(checked.errors)} error{'s' * (len(checked.errors) != 1)}; first: {first.message})",
                    f"run `soul validate {rel}`")


def _agent_files(blueprint: Path) -> list[Path] | None:
    """The agent blueprints a file's `dialogue:` names (those inside its folder), or None when
    it holds no dialogue (or cannot be read: validating it says why)."""
    try:
        loaded, _ = read(blueprint)
    except (BlueprintError, OSError):
        return None
    data = loaded.data if isinstance(loaded.data, dict) else {}
    dialogue = data.get("dialogue")
    if not isinstance(dialogue, dict):
        return None
    agents = dialogue.get("agents") if isinstance(dialogue.get("agents"), dict) else {}
    found = []
    for spec in agents.values():
        named = spec.get("blueprint") if isinstance(spec, dict) else None
        if isinstance(named, str) and named:
            try:
                found.append(textfiles.confine(blueprint.parent, named).resolve())
            except textfiles.Refused:
                continue  # validating that blueprint reports it
    return found


def _ring(bp: Blueprint, first: Path) -> list[str] | None:
    """The chain of dialogue blueprints from `bp` through its agent `first` back to one
    already in it (names relative to `bp`'s folder), or None when every path ends. Each file
    is read once: the walk is linear in the files, however they point at each other."""
    assert bp.folder is not None
    home = bp.folder.resolve()
    start = (home / Path(bp.file).name).resolve()

    def name(path: Path) -> str:
        return path.relative_to(home).as_posix() if path.is_relative_to(home) else str(path)

    chain, on_chain, finished = [start], {start}, set()
    stack = [iter([first.resolve()])]  # stack[i] walks the agents of chain[i]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            done = chain.pop()
            on_chain.discard(done)
            finished.add(done)
        elif node in on_chain:
            return [name(p) for p in (*chain, node)]
        elif node not in finished:
            chain.append(node)
            on_chain.add(node)
            stack.append(iter(_agent_files(node) or ()))
    return None

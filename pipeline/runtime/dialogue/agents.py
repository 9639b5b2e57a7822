"""The souls of a dialogue: one per agent, each a full soul with its own steps, memory and
sessions in the store.

An agent with `blueprint:` runs that blueprint (beside the dialogue's) as it is. An agent
without one runs the dialogue blueprint's own `steps:` (its `fixy` steps left out), under the
name `<dialogue>-<agent>` (its sessions, and its memory field when the steps use memory),
with the agent's persona file and model slot. The observer runs one `fixy` step: the dialogue
blueprint's first `fixy` step when it has one (its `with:` tunes the detectors' `window` and
`min_turn`, its `template:` the prompt), else a built-in one whose window is `observer.window`.
Every agent step sees no conversation history of its own session (`history: {turns: 0}`
unless the step says otherwise): the dialogue's tail is in each turn's input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from soul.errors import RunError
from soul.language import Blueprint, Dialogue, DialogueAgent, Step

NO_HISTORY = {"turns": 0}


def agent_blueprint(bp: Blueprint, spec: Dialogue, agent: DialogueAgent) -> Blueprint:
    """The blueprint an agent without `blueprint:` runs (see the module's docstring)."""
    steps = {name: _quiet(step) for name, step in bp.steps.items() if step.uses != "fixy"}
    if not steps:
        raise RunError(f"{bp.file}: the dialogue's blueprint has no step besides `fixy` for its agents to run; "
                       "add a reply step (uses: external_dialogue)")
    return replace(
        bp, name=f"{bp.name}-{agent.name}", description=f"{agent.name}, an agent of the {bp.name} dialogue",
        persona=agent.persona, model=agent.model or bp.model, steps=steps, subprocesses={}, processes={},
        triggers={}, dialogue=None, dialogue_spec=None,
    )


def observer_blueprint(bp: Blueprint, spec: Dialogue) -> tuple[Blueprint, Step]:
    """The observer's blueprint and its `fixy` step (see the module's docstring)."""
    assert spec.observer is not None
    agent = spec.agents[spec.observer.agent]
    step = next((s for s in bp.steps.values() if s.uses == "fixy"), None)
    if step is None:
        step = Step(name="fixy", uses="fixy", path=("dialogue", "observer"), params={"window": spec.observer.window})
    step = _quiet(step)
    model = step.model or agent.model or bp.model
    observer = replace(
        bp, name=f"{bp.name}-{agent.name}", description=f"{agent.name}, the observer of the {bp.name} dialogue",
        persona=agent.persona, model=model, steps={step.name: replace(step, when=None, every=None, after=())},
        subprocesses={}, processes={}, triggers={}, dialogue=None, dialogue_spec=None, memory=None, chetana=None,
    )
    return observer, step


def own_blueprint(bp: Blueprint, agent: DialogueAgent) -> Blueprint:
    """An agent's own `blueprint:` file, validated (beside the dialogue's blueprint)."""
    from soul import textfiles
    from soul.compiler import load_valid

    assert agent.blueprint is not None
    if bp.folder is None:
        raise RunError(f"agent '{agent.name}': the dialogue's blueprint has no folder to find {agent.blueprint} in")
    try:  # beside the dialogue's blueprint, as validation requires
        path = textfiles.confine(bp.folder, agent.blueprint)
    except textfiles.Refused as exc:
        raise RunError(f"agent '{agent.name}': blueprint {agent.blueprint!r} is refused ({exc.reason}): "
                       "keep agent blueprints beside the dialogue's") from exc
    return load_valid(path)


def _quiet(step: Step) -> Step:
    return step if step.history is not None else replace(step, history=dict(NO_HISTORY))


def agent_provider(provider: Any, agent: str, blueprint: Blueprint) -> Any:
    """What an agent's soul is given: a mapping of agent names to providers (a dialogue's
    `--script`) gives the agent's own, and an agent the mapping lacks an empty script that
    says so when it is asked; a single provider serves every agent.

    A scripted line is what the agent says: when the agent's soul makes one model call (its
    reply step, or the observer's `fixy`), a line without that step's tag is put inside it,
    so `socrates: ["What is justice?"]` needs no XML. Souls of several calls get raw replies."""
    if not isinstance(provider, Mapping):
        return provider
    from soul.providers import ScriptedProvider

    source = getattr(provider, "source", "the script")
    key = next((k for k in provider if k == agent), None) or next((k for k in provider if k.lower() == agent), None)
    if key is None:
        return ScriptedProvider([], f"{source} [{agent}: no entry — add `{agent}: [...]`]")
    scripted = provider[key]
    tag = _only_call_tag(blueprint)
    if tag is None or not isinstance(scripted, ScriptedProvider):
        return scripted
    lines = [line if f"<{tag}" in line else f"<{tag}>{line}</{tag}>" for line in scripted.replies]
    return ScriptedProvider(lines, scripted.source)


def check_script_keys(provider: Any, agents: Mapping[str, Any]) -> None:
    """A mapping of agent names to providers names only agents (in any case): a typo would
    otherwise leave an agent without lines and a script entry unused."""
    if not isinstance(provider, Mapping):
        return
    unknown = [k for k in provider if str(k).lower() not in agents]
    if unknown:
        source = getattr(provider, "source", "the script")
        raise RunError(f"{source}: {', '.join(repr(k) for k in unknown)} "
                       f"{'is no agent' if len(unknown) == 1 else 'are no agents'} of the dialogue "
                       f"(its agents: {', '.join(agents)})")


def template_texts(blueprint: Blueprint) -> tuple[str, ...]:
    """The texts of the templates the blueprint's model-calling steps use (as written, Jinja
    markup and all): what a small model may echo back instead of replying. A template that
    cannot be read is left out (the turn itself reports it)."""
    from soul.kinds import default_registry

    registry = default_registry()
    texts = []
    for step in blueprint.steps.values():
        kind = registry.get(step.uses)
        name = step.template or (kind.template if kind is not None and kind.llm else None)
        if name:
            try:
                texts.append(blueprint.template_source(name))
            except Exception:  # a missing or refused template is the turn's error to report
                continue
    return tuple(texts)


def _only_call_tag(blueprint: Blueprint) -> str | None:
    """The section tag of the blueprint's one model-calling step, if it has exactly one."""
    from soul.kinds import default_registry

    registry = default_registry()
    kinds = [registry.get(step.uses) for step in blueprint.steps.values()]
    calling = [k for k in kinds if k is not None and k.llm]
    if len(calling) != 1 or blueprint.subprocesses or blueprint.processes:
        return None
    return calling[0].sections[0].tag


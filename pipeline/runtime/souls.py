"""The front door for running souls: `soul.load()` → `Soul` → `Session`.

A Soul is a compiled plan with the services its turns use (`Soul.services`: the prompt
builder and gate evaluator, the model providers, the memory bridge, Chetana's starter) and its
session store. A Session is one conversation with one user, stored under the data home; its
turns run from the plan and the services and commit through the store, all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from soul.compiler import Plan, compile_blueprint
from soul.kinds import Registry
from soul.language import Blueprint
from soul.providers import Provider
from soul.runtime.memory import MemoryBridge
from soul.runtime.services import services_for
from soul.runtime.session import Session
from soul.store import SessionStore


class Soul:
    """A compiled soul, ready to talk. Create with `soul.load()`."""

    def __init__(
        self,
        plan: Plan,
        *,
        model: str | None = None,
        provider: Provider | None = None,
        home: Path | None = None,
        wrap: Callable[[Provider], Provider] | None = None,
    ) -> None:
        self.plan = plan
        self.blueprint: Blueprint = plan.blueprint
        self.model_override = model
        self._provider_override = provider
        self._providers: dict[str, Provider] = {}
        self._wrap = wrap  # e.g. recording every call into a cassette (soul run --record)
        self.home = home
        self._store: SessionStore | None = None
        # Recording or replaying a cassette: memory recalls go on the same tape (runtime/memory.py)
        cassette = getattr(wrap, "cassette", None)
        replaying = getattr(provider, "cassette", None)
        tape: Any = (cassette, "record") if cassette is not None else (replaying, "replay") if replaying is not None else None
        self.memory = MemoryBridge(self.blueprint, home, tape)
        self.services = services_for(plan, providers=self.provider_for, memory=self.memory)

    @property
    def name(self) -> str:
        return self.blueprint.name

    @property
    def store(self) -> SessionStore:
        """The session store under the data home (opened on first use)."""
        if self._store is None:
            self._store = SessionStore.open(self.home)
        return self._store

    def memory_field(self) -> Any:
        """The soul's resonance memory field, opened on first use (see `soul.runtime.memory`)."""
        return self.memory.field()

    def remember(self, items: list[dict[str, Any]], session: str | None = None) -> list[str | None]:
        """Write items to the memory field (after a turn has committed); with `session`, they
        prime that session's next resonance queries."""
        return self.memory.remember(items, session)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self.memory.close()

    def __enter__(self) -> Soul:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def provider_for(self, model: str) -> tuple[Provider, str, dict[str, Any]]:
        """The provider, provider spec and options for a model slot name or spec.

        The slot's options (temperature, max_tokens, base_url, ...) stay when `--model` /
        `SOUL_MODEL` replaces its spec; the spec is the overriding one even when a provider
        object is passed, so a replayed run asks for the calls a recorded run made."""
        slot = self.blueprint.models.get(model)
        spec, options = (slot.provider, dict(slot.options)) if slot else (model, {})
        if self.model_override:
            spec = self.model_override
        key = f"{spec}|{sorted(options.items())!r}"  # two slots on one spec may differ in base_url
        provider = self._providers.get(key)
        if provider is None:
            if self._provider_override is not None:
                provider = self._provider_override
            else:
                from soul.providers import resolve

                # a spec the blueprint names reads files (scripted:, replay:) only inside its
                # folder; one the user gave (--model, SOUL_MODEL) is theirs to point anywhere
                within = None if self.model_override else self.blueprint.folder
                provider = resolve(spec, options, within=within)
            if self._wrap is not None:
                provider = self._wrap(provider)
            self._providers[key] = provider
        return provider, spec, options

    def check_providers(self) -> None:
        """Resolve every model the plan calls now, so a missing provider fails before a turn."""
        scopes = [self.plan.turn, *self.plan.subprocesses.values(), *self.plan.processes.values()]
        for scope in scopes:
            for unit in scope.units:
                if unit.model:
                    self.provider_for(unit.model)

    def session(self, id: str | None = None, user: str = "user") -> Session:
        """A new session with `user`, or the stored session `id` (a unique prefix will do)."""
        if id is None:
            info = self.store.create_session(self.name, user, blueprint=self.blueprint.file, initial_state=self.plan.initial_state())
        else:
            info = self.store.find_session(id)
            if info.soul != self.name:
                from soul.errors import RunError

                raise RunError(f"session {info.id} belongs to soul '{info.soul}', not '{self.name}'")
        return Session(self.plan, self.services, self.store, info)


def load(
    name_or_path: str | Path | Blueprint,
    *,
    model: str | None = None,
    provider: Provider | None = None,
    home: str | Path | None = None,
    registry: Registry | None = None,
    wrap: Callable[[Provider], Provider] | None = None,
) -> Soul:
    """Compile a blueprint (path, built-in name, or Blueprint) into a runnable Soul.

    `model` overrides every step's model (like `soul run --model`, or `SOUL_MODEL`); `provider`
    passes a Provider object directly (e.g. a ScriptedProvider in tests); `home` overrides the
    data home (`$SOUL_HOME`, default `~/.soul`); `wrap` wraps every provider the soul uses
    (`soul.providers.replay.recording(path)` records the calls into a cassette).
    """
    import os

    plan = compile_blueprint(name_or_path, registry)
    model = model or os.environ.get("SOUL_MODEL") or None
    soul = Soul(plan, model=model, provider=provider, home=Path(home) if home else None, wrap=wrap)
    MemoryBridge.check_installed(soul.blueprint)
    soul.check_providers()
    return soul

"""The front door for running souls: `soul.load()` → `Soul` → `Session`.

A Soul is a compiled plan with the services its turns use (`Soul.services`: the prompt
builder and gate evaluator, the model providers, the memory bridge, Chetana's starter) and its
session store. A Session is one conversation with one user, stored under the data home; its
turns run from the plan and the services and commit through the store, all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from soul.compiler import Plan, compile_blueprint, load_valid
from soul.kinds import Registry
from soul.language import Blueprint
from soul.providers import Provider, price_table
from soul.runtime import tracing
from soul.runtime.background import runner_choice
from soul.runtime.bridges import MemoryBridge
from soul.runtime.routing import TurnSender
from soul.runtime.session import Session
from soul.runtime.turn import Services, services_for
from soul.store import SessionStore


class Soul:
    """A compiled soul, ready to talk. Create with `soul.load()`."""

    def __init__(
        self,
        plan: Plan,
        *,
        model: str | None = None,
        provider: Provider | Mapping[str, Provider] | None = None,
        home: Path | None = None,
        wrap: Callable[[Provider], Provider] | None = None,
        allow_field_paths: bool | None = None,
    ) -> None:
        self.plan = plan
        self.blueprint: Blueprint = plan.blueprint
        self.model_override = model
        self._provider_override = provider
        if isinstance(provider, Mapping):  # per slot: a key naming no slot is a typo
            unknown = [k for k in provider if k != "default" and k not in self.blueprint.models]
            if unknown:
                from soul.errors import ProviderError

                source = getattr(provider, "source", "the provider mapping")
                slots = ", ".join(self.blueprint.models) or "none"
                raise ProviderError(
                    f"{source}: {', '.join(repr(k) for k in unknown)} "
                    f"{'is no model slot' if len(unknown) == 1 else 'are no model slots'} of {self.name} "
                    f"(its slots: {slots}; or `default` for every other call)"
                )
        self._providers: dict[str, Provider] = {}
        self._wrap = wrap  # e.g. recording every call into a cassette (soul run --record)
        self.home = home
        self._store: SessionStore | None = None
        # Recording or replaying a cassette: memory recalls go on the same tape (runtime/bridges/memory.py)
        cassette = getattr(wrap, "cassette", None)
        replaying = getattr(provider, "cassette", None)
        tape: Any = (cassette, "record") if cassette is not None else (replaying, "replay") if replaying is not None else None
        self.memory = MemoryBridge(self.blueprint, home, tape, allow_field_paths=allow_field_paths,
                                   store=lambda: self.store)
        self.services = services_for(plan, providers=self.provider_for, memory=self.memory, prices=price_table(home))
        self._user_services: dict[str, Services] = {}
        self._turn_sender: TurnSender | None = None

    @property
    def name(self) -> str:
        return self.blueprint.name

    @property
    def store(self) -> SessionStore:
        """The session store under the data home (opened on first use)."""
        if self._store is None:
            self._store = SessionStore.open(self.home)
        return self._store

    def services_for(self, user: str) -> Services:
        """The services a session of `user` runs with: the soul's, with that user's memory
        partition when the field is partitioned (a PostgreSQL store; docs/scale.md)."""
        memory = self.memory.for_user(user)
        if memory is self.memory:
            return self.services
        found = self._user_services.get(user)
        if found is None:
            found = self._user_services[user] = replace(self.services, memory=memory)
        return found

    def memory_field(self, user: str | None = None) -> Any:
        """The soul's resonance memory field, opened on first use (see `soul.runtime.memory`);
        on a partitioned field, `user`'s partition (its lease taken)."""
        return (self.memory.for_user(user) if user is not None else self.memory).field()

    def remember(self, items: list[dict[str, Any]], session: str | None = None, user: str | None = None) -> list[str | None]:
        """Write items to the memory field (after a turn has committed); with `session`, they
        prime that session's next resonance queries. On a partitioned field, into `user`'s
        partition (its lease taken)."""
        bridge = self.memory.for_user(user) if user is not None else self.memory
        if bridge is not self.memory:
            bridge.hold()
        return bridge.remember(items, session)

    def close(self) -> None:
        if self._turn_sender is not None:
            self._turn_sender.close()
            self._turn_sender = None
        self.memory.close()  # first: a partitioned field gives its leases up through the store
        self._user_services.clear()
        if self._store is not None:
            self._store.close()
            self._store = None
        if self.services.tools is not None:
            self.services.tools.close()  # the MCP servers it held stop (unless another soul holds one)

    def __enter__(self) -> Soul:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def provider_for(self, model: str) -> tuple[Provider, str, dict[str, Any]]:
        """The provider, provider spec and options for a model slot name or spec.

        The slot's options (temperature, max_tokens, base_url, ...) stay when `--model` /
        `SOUL_MODEL` replaces its spec; the spec is the overriding one even when a provider
        object is passed, so a replayed run asks for the calls a recorded run made. Given a
        mapping of slot names to providers, a call on a slot takes that slot's provider, and
        one on a slot the mapping lacks (or on a model that is no slot) its `default`; with
        neither it is a ProviderError naming the slot and the keys the mapping has."""
        slot = self.blueprint.models.get(model)
        spec, options = (slot.provider, dict(slot.options)) if slot else (model, {})
        if self.model_override:
            spec = self.model_override
        key = f"{spec}|{sorted(options.items())!r}"  # two slots on one spec may differ in base_url
        per_slot = isinstance(self._provider_override, Mapping)
        if per_slot:  # one provider per slot, even where two slots share a spec
            key = f"{self._slot_key(model if slot else None)}|{key}"
        provider = self._providers.get(key)
        if provider is None:
            if per_slot:
                provider = self._provider_override[self._slot_key(model if slot else None)]  # type: ignore[index]
            elif self._provider_override is not None:
                provider = self._provider_override  # type: ignore[assignment]
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

    def _slot_key(self, slot: str | None) -> str:
        """The key of a per-slot provider mapping that serves calls on `slot` (None: a model
        that is no slot of the blueprint): the slot itself, else `default`."""
        providers: Mapping[str, Provider] = self._provider_override  # type: ignore[assignment]
        if slot is not None and slot in providers:
            return slot
        if "default" in providers:
            return "default"
        from soul.errors import ProviderError

        source = getattr(providers, "source", "the provider mapping")
        what = f"model slot '{slot}'" if slot is not None else "a model that is no slot of the blueprint"
        raise ProviderError(
            f"{source} has no entry for {what} (it has: {', '.join(providers) or 'nothing'}): "
            f"add a `{slot or 'default'}:` entry{'' if slot is None else ' (or a `default:` one for every other slot)'}"
        )

    def check_providers(self) -> None:
        """Resolve every model the plan calls now, so a missing provider fails before a turn."""
        scopes = [self.plan.turn, *self.plan.subprocesses.values(), *self.plan.processes.values()]
        for scope in scopes:
            for unit in scope.units:
                if unit.model:
                    self.provider_for(unit.model)

    def session(self, id: str | None = None, user: str = "user", *,
                persona_core: str | Path | None = None, runner: str | None = None) -> Session:
        """A new session with `user`, or the stored session `id` (a unique prefix will do).

        A new session snapshots each background process's Persona Core (its `persona:` file,
        or `persona_core`, a file of the caller's choosing, for the first process): the
        session uses that snapshot for its whole life, resumed or not, whatever happens to
        the file. The file is only ever opened for reading.

        `runner` chooses who runs the background loops: 'asyncio' (this process, the
        default) or 'dbos' (`soul worker` processes; docs/scale.md); None reads $SOUL_RUNNER."""
        if id is None:
            info = self.store.create_session(self.name, user, blueprint=self.blueprint.file, initial_state=self.plan.initial_state())
            for i, (name, process) in enumerate(self.blueprint.processes.items()):
                chosen = persona_core if i == 0 and persona_core is not None else None
                core = read_persona_core(self.blueprint, process.persona, chosen)
                if core is not None:
                    self.store.snapshot_persona_core(info.id, name, str(core[0]), core[1])
        else:
            if persona_core is not None:
                from soul.errors import RunError

                raise RunError("--persona-core chooses the core of a new session; a resumed session keeps the one it started with")
            info = self.store.find_session(id)
            if info.soul != self.name:
                from soul.errors import RunError

                raise RunError(f"session {info.id} belongs to soul '{info.soul}', not '{self.name}'")
        return Session(self.plan, self.services_for(info.user), self.store, info, runner, self._sender(runner))

    def _sender(self, runner: str | None) -> TurnSender | None:
        """Who runs this soul's user turns when not this process: with `runner` (or
        SOUL_RUNNER) `dbos`, a memory soul on a PostgreSQL store sends them to the worker that
        owns the user's partition, unless this process is that worker (docs/scale.md)."""
        parts = self.memory.partitions()
        if parts is None or parts.claimed or runner_choice(runner) != "dbos":
            return None
        if self._turn_sender is None:
            self._turn_sender = TurnSender(self.name, lambda: self.store)
        return self._turn_sender


PERSONA_CORE_BYTES = 1 << 20


def read_persona_core(blueprint: Blueprint, named: str | None, chosen: str | Path | None) -> tuple[Path, str] | None:
    """(path, text) of a Persona Core: `chosen` (the user's file, read where they said) or the
    process's `persona:` file (confined to the blueprint's folder); None when neither."""
    if chosen is not None:
        from soul import textfiles
        from soul.errors import RunError

        path = Path(chosen).expanduser().resolve()
        try:
            return path, textfiles.read_text(path, PERSONA_CORE_BYTES)
        except textfiles.Refused as exc:
            raise RunError(f"persona core {str(chosen)!r}: {exc}; name a UTF-8 markdown file of at most 1 MiB") from exc
    if named is None or blueprint.folder is None:
        return None
    return (blueprint.folder / named).resolve(), blueprint.read_file(named, "persona core")


def load(
    name_or_path: str | Path | Blueprint,
    *,
    model: str | None = None,
    provider: Provider | Mapping[str, Provider] | None = None,
    home: str | Path | None = None,
    registry: Registry | None = None,
    wrap: Callable[[Provider], Provider] | None = None,
    allow_field_paths: bool | None = None,
) -> Soul:
    """Compile a blueprint (path, built-in name, or Blueprint) into a runnable Soul.

    `model` overrides every step's model (like `soul run --model`, or `SOUL_MODEL`); `provider`
    passes a Provider object directly (e.g. a ScriptedProvider in tests), or a mapping of model
    slot names to providers (`default` serves the calls no other key names; see
    `Soul.provider_for`); `home` overrides the data home (`$SOUL_HOME`, default `~/.soul`);
    `wrap` wraps every provider the soul uses
    (`soul.providers.replay.recording(path)` records the calls into a cassette).
    `allow_field_paths=True` lets `memory.field` point outside the blueprint's folder (an
    absolute or `~` path, `..`, a symlink out), as ``SOUL_ALLOW_FIELD_PATHS=1`` does; False
    refuses it even with the variable set; None (the default) leaves it to the variable.
    """
    import os

    if not isinstance(name_or_path, Blueprint):  # validated with the same permission
        name_or_path = load_valid(name_or_path, registry, allow_field_paths=allow_field_paths)
    plan = compile_blueprint(name_or_path, registry)
    model = model or os.environ.get("SOUL_MODEL") or None
    soul = Soul(plan, model=model, provider=provider, home=Path(home) if home else None, wrap=wrap,
                allow_field_paths=allow_field_paths)
    MemoryBridge.check_installed(soul.blueprint)
    soul.check_providers()
    tracing.on()  # OTEL_* asking for traces without the otel extra fails here, before a session is touched
    return soul

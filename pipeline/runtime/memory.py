"""The bridge to the resonance memory engine: the only runtime module that imports it.

`MemoryBridge` opens a soul's field on first use (numpy, numba and the embedder load only
then), writes a turn's memories after its commit, and hands steps what they may use. Where:
the `memory.field` folder (relative to the blueprint), else `$SOUL_HOME/fields/<soul>`.

Memory recalls on tape: a replayed turn must see the prompt the recorded turn saw, and the
prompt holds what memory recalled. Between the recording and the replay the field has changed
(the recorded run itself remembered its exchange), so recalls are part of what a cassette
records: while recording, every `recall`/`resonate` answer is written to the cassette; while
replaying, the same query (mode, k, text) gets the recorded hits back. Everything else
(remembering, stats, the graph) goes to the real field. A query the tape lacks falls through
to the live field: the model replay then says what differs, with the prompt diff.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from soul.errors import MissingExtra
from soul.language import Blueprint
from soul.providers.cassette import Cassette
from soul.providers.secrets import redact
from soul.store import fields_dir

__all__ = ["MemoryBridge", "TapedField", "uses_memory"]

_FUSION_NAMES = {"method": "method", "semantic": "semantic_weight", "keyword": "keyword_weight", "tag": "tag_weight"}


def uses_memory(blueprint: Blueprint) -> bool:
    """True if any step of the turn, a subprocess or a process is a memory step."""
    groups = [blueprint.steps, *(sp.steps for sp in blueprint.subprocesses.values()), *(p.steps for p in blueprint.processes.values())]
    return any(step.uses.startswith("memory.") for steps in groups for step in steps.values())


class MemoryBridge:
    """A soul's memory field, opened on first use; `tape` records or replays its recalls."""

    def __init__(self, blueprint: Blueprint, home: Path | None, tape: tuple[Cassette, Literal["record", "replay"]] | None = None) -> None:
        self.blueprint = blueprint
        self.home = home
        self._tape = tape
        self._field: Any = None

    @staticmethod
    def check_installed(blueprint: Blueprint) -> None:
        """A soul that uses memory needs the `memory` extra: say so at load, not mid-turn."""
        if not uses_memory(blueprint):
            return
        missing = [m for m in ("numpy", "numba", "onnxruntime", "hnswlib") if importlib.util.find_spec(m) is None]
        if missing:
            raise MissingExtra(
                f"soul '{blueprint.name}' uses memory steps, which need {', '.join(missing)}: "
                "install them with pip install 'soulgraph[memory]'")

    def path(self) -> Path:
        """The field's folder."""
        where = (self.blueprint.memory or {}).get("field")
        if where:
            path = Path(where).expanduser()
            if not path.is_absolute() and self.blueprint.folder is not None:
                path = self.blueprint.folder / path
            return path
        return fields_dir(self.home) / self.blueprint.name

    def config(self) -> dict[str, Any]:
        """The Field's options from the blueprint's `memory` block."""
        block: Mapping[str, Any] = self.blueprint.memory or {}
        fusion = block.get("fusion") or {}
        config = {_FUSION_NAMES[k]: v for k, v in fusion.items() if k in _FUSION_NAMES}
        if block.get("durability"):
            config["durability"] = block["durability"]
        if block.get("resonance"):
            config["resonance"] = dict(block["resonance"])
        return config

    def field(self) -> Any:
        """The resonance Field (opened on first use)."""
        if self._field is None:
            from soul.engines.resonance import Field

            path = self.path()
            path.mkdir(parents=True, exist_ok=True)
            field = Field.open(path, **self.config())
            self._field = TapedField(field, *self._tape) if self._tape is not None else field
        return self._field

    def reader(self) -> Any:
        """What steps may use of the field (opened on first use).

        PARTIAL: for now the Field itself; to become a read-only recall view."""
        return self.field()

    def remember(self, items: list[dict[str, Any]], session: str | None = None) -> list[str | None]:
        """Write items to the field (after a turn has committed); with `session`, they prime
        that session's next resonance queries."""
        if not items:
            return []
        field = self.field()
        if session:  # recall can then tell this conversation's memories from older ones
            items = [{**item, "meta": {**(item.get("meta") or {}), "session": session}} for item in items]
        ids = field.remember_many(items, session=session)
        if session:
            field.primer.observe(session, [i for i in ids if i is not None])
        return ids

    def close(self) -> None:
        if self._field is not None:
            self._field.close()
            self._field = None


def _key(mode: str, k: int, query: str) -> tuple[str, int, str]:
    return (mode, int(k), query)


class TapedField:
    """A Field whose recall and resonate answers are recorded to, or replayed from, a
    cassette; every other attribute is the real field's."""

    def __init__(self, field: Any, cassette: Cassette, mode: Literal["record", "replay"]) -> None:
        self._field = field
        self._cassette = cassette
        self._mode = mode
        self._served: dict[tuple[str, int, str], int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._field, name)

    def recall(self, query: str, k: int = 10, **options: Any) -> list[Any]:
        mode = str(options.get("mode", "hybrid"))
        return self._taped(mode, k, query, lambda: self._field.recall(query, k, **options))

    def resonate(self, query: str, k: int = 10, **options: Any) -> list[Any]:
        return self._taped("resonate", k, query, lambda: self._field.resonate(query, k, **options))

    def _taped(self, mode: str, k: int, query: str, live: Any) -> list[Any]:
        key = _key(mode, k, query)
        if self._mode == "replay":
            recorded = [r for r in self._cassette.recalls if _key(r.get("mode", ""), r.get("k", 0), r["query"]) == key]
            if recorded:
                n = self._served.get(key, 0)
                self._served[key] = n + 1
                return [_hit(h) for h in recorded[min(n, len(recorded) - 1)]["hits"]]
            return live()
        hits = live()
        self._cassette.recalls.append({
            "mode": mode, "k": int(k), "query": redact(query),
            "hits": [{"id": h.id, "text": redact(h.text), "score": round(float(h.score), 6), "kind": h.kind,
                      "tags": list(h.tags)} for h in hits],
        })
        self._cassette.save()
        return hits


def _hit(data: dict[str, Any]) -> Any:
    from soul.engines.resonance import Hit

    return Hit(str(data["id"]), str(data["text"]), float(data["score"]), str(data.get("kind") or "episode"),
               tuple(data.get("tags") or ()), {}, {})

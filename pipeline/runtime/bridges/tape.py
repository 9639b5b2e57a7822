"""Memory recalls on tape: a field whose recall and resonate answers are written to a cassette
while recording and served from it while replaying (why: `soul.runtime.bridges.memory`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from soul.store import redact, secrets

if TYPE_CHECKING:
    from soul.providers import Cassette

__all__ = ["TapedField"]


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

    @property
    def live(self) -> Any:
        """The real field (`in`, and writes that must reach it)."""
        return self._field

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
        known = secrets()
        self._cassette.recalls.append({
            "mode": mode, "k": int(k), "query": redact(query, known),
            "hits": [{"id": h.id, "text": redact(h.text, known), "score": round(float(h.score), 6), "kind": h.kind,
                      "tags": list(h.tags)} for h in hits],
        })
        self._cassette.save()
        return hits


def _hit(data: dict[str, Any]) -> Any:
    from soul.engines.resonance import Hit

    return Hit(str(data["id"]), str(data["text"]), float(data["score"]), str(data.get("kind") or "episode"),
               tuple(data.get("tags") or ()), {}, {})

"""Prompt text the code writes rather than a template: the background mind's layers as XML
blocks (what a turn shares with the subconscious, and a cycle's own input), and where a system
message stops being the same from call to call (the cache breakpoints a provider may use)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soul.runtime.untrusted import escape_untrusted


def cache_points(persona: str, head: str, summary: str) -> tuple[int, ...]:
    """Where the system message (`head`, then the summary) stops being the same from call to
    call, for prompt caching: after the persona, and after the summary (until the next fold)."""
    points = [len(persona)] if persona and head.startswith(persona) else []
    if summary:
        points.append(len(head) + 2 + len(summary) if head else len(summary))
    return tuple(p for p in points if p > 0)


def inert_mind(mind: Mapping[str, Any]) -> dict[str, Any]:
    """The mind as templates see it: every text escaped (it holds user and model text)."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return escape_untrusted(value)
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return {k: clean(v) for k, v in mind.items()}


def _block(tag: str, texts: Sequence[Any], empty: str, hint: str = "", bullets: bool = False) -> str:
    lines = [f"- {escape_untrusted(str(t))}" if bullets else escape_untrusted(str(t)) for t in texts]
    return f"<{tag}>{hint}\n" + ("\n".join(lines) or empty) + f"\n</{tag}>"


def turn_blocks(mind: Mapping[str, Any]) -> str:
    """AgentCSD's internal-dialog input beside the message: the S_loud impulses drained into
    this turn and the conscious layer's own quiet history (escaped, as all model text). A block
    with nothing in it is left out (the seed: S_loud "may be empty or absent"): small models
    copied a placeholder such as "(no impulse from the subconscious)" into their reply."""
    blocks = (("S_loud", mind.get("impulses") or ()), ("ID_quiet_history", mind.get("ID_quiet_history") or ()))
    return "\n\n".join(_block(tag, texts, "", bullets=True) for tag, texts in blocks if texts)


def mind_blocks(mind: Mapping[str, Any]) -> str:
    """A subconscious cycle's input, as the seed's tagged blocks: what changed since the last
    cycle, then the loud and quiet histories (escaped: text never becomes structure)."""
    blocks = [_block(tag, texts, "(nothing new)") for tag, texts in (mind.get("changes") or {}).items()]
    blocks.append(_block("S_loud_history", mind.get("S_loud_history") or (), "(empty)", " (do not repeat these)", True))
    blocks.append(_block("S_quiet_history", mind.get("S_quiet_history") or (), "(empty)", bullets=True))
    return "\n\n".join(blocks)

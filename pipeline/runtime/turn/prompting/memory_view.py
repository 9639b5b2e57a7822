"""Working memory as a prompt shows it: per region its newest entries within the region's
limit, as labelled lines (`line_of`), under one heading; and what each line costs, per way of
counting. A turn's calls share one view (`Fitter.memory`); the next turn makes its own.

Nothing here keeps a line past its view: a session's working memory grows every turn and the
prompt shows its newest entries, so lines kept between turns were kept long after they had
scrolled out of every view (issue 26's kept-memory goal). What is kept is the estimate of each
line's label and memory text (`LineCosts`), the parts of a line worth not counting twice, for
two bounded generations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from soul.records import MemoryEntry
from soul.runtime.conversation import Counter, label_of, parts, pieces, with_margin
from soul.runtime.untrusted import escape_untrusted

DEFAULT_REGION_LIMIT = 12  # entries a working-memory region shows unless the blueprint says
HEADING = "## Working Memory"
# labels and memory texts whose estimated pieces are kept per generation (two are kept): a
# session's shown entries recur turn after turn, a few new ones a turn
TEXT_CACHE = 256

Count = Callable[[Counter, str], int]


def line_of(entry: MemoryEntry) -> tuple[str, str, str]:
    """How working memory shows `entry` — `- [turn 3 · think, internal_monologue] text`,
    escaped — and the line's two parts as `LineCosts.estimate` counts them: its label through
    the `]` (a turn's recollections share it) and its memory's escaped text."""
    label = label_of(entry)  # "" or "[...] "
    rest = escape_untrusted(entry.content)  # the content itself when nothing is escaped
    return f"- {label}{rest}", (f"- {label[:-1]}" if label else "-"), rest


class LineCosts:
    """The estimate of a working-memory line made from its two parts (`line_of`), each counted
    once and kept while recent: a generation holds `TEXT_CACHE` labels and as many texts, and
    one found in the older generation is carried over, so what a session's views keep showing
    stays and the rest goes after two generations."""

    __slots__ = ("_labels", "_older", "_texts")

    def __init__(self) -> None:
        self._texts: dict[str, int] = {}  # an escaped memory text -> pieces(" " + it)
        self._labels: dict[str, int] = {}  # a line's label through its `]` -> pieces(it)
        self._older: tuple[dict[str, int], dict[str, int]] = ({}, {})  # the older generation: texts, labels

    def estimate(self, head: str, rest: str) -> int:
        """`estimate(line)` of a line whose label is `head` and memory `rest` (the split falls
        after the label's `]`, a piece of its own, so the two parts' pieces add up to the whole)."""
        label = _recent(self._labels, self._older[1], head, pieces)
        text = _recent(self._texts, self._older[0], rest, _spaced)
        if len(self._texts) >= TEXT_CACHE or len(self._labels) >= TEXT_CACHE:
            self._older = (self._texts, self._labels)
            self._texts, self._labels = {}, {}
        return with_margin(label + text)


def _recent(kept: dict[str, int], older: dict[str, int], key: str, count: Callable[[str], int]) -> int:
    """`count(key)` as `kept` holds it: found there, else carried over from the `older`
    generation, else counted now."""
    found = kept.get(key)
    if found is None:
        found = older.get(key)
        kept[key] = found = count(key) if found is None else found
    return found


def _spaced(text: str) -> int:
    """A line's memory part, counted with the space before it."""
    return pieces(f" {text}")


class MemoryView:
    """Working memory as a prompt shows it, for one context's entries: per region (in the
    blueprint's order, then the others by name) its newest entries within its limit, as
    labelled lines (`line_of`); the whole section's text; and, per counter, what each line
    costs (an estimate from the line's parts, `LineCosts`)."""

    __slots__ = ("_costs", "_split", "_texts", "kinds", "piece", "regions", "text")

    def __init__(self, entries: Mapping[str, tuple[MemoryEntry, ...]], listed: Sequence[str], limits: Mapping[str, int],
                 texts: LineCosts) -> None:
        order = [r for r in listed if entries.get(r)] + sorted(r for r in entries if r not in listed and entries[r])
        regions = []
        kinds = []  # each region's part of the context window: recalled memories or working memory
        blocks = []
        split = []  # per region, each line's label and memory text
        for region in order:
            found = entries[region]
            limit = limits.get(region, DEFAULT_REGION_LIMIT)
            over = len(found) - limit if len(found) > limit else 0
            shown = found[-limit:] if limit > 0 else ()
            made = [line_of(e) for e in shown]
            lines = tuple(m[0] for m in made)
            split.append([(m[1], m[2]) for m in made])
            title = f"### {region}"
            regions.append((region, title, lines, over, limit))
            kind = parts.RECALLED if shown and all(e.entry_type == "recollection" for e in shown) else parts.MEMORY
            kinds.append(kind)
            if lines:
                blocks.append(parts.piece(kind, f"{title}\n" + "\n".join(lines), region))
        self.regions: tuple[tuple[str, str, tuple[str, ...], int, int], ...] = tuple(regions)
        self.kinds: tuple[str, ...] = tuple(kinds)
        self.piece = parts.headed(f"{HEADING}\n", parts.join(blocks))
        self.text = self.piece.text
        self._split = split
        self._texts = texts
        self._costs: dict[bool, tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]] = {}

    def costs(self, counter: Counter, count: Count) -> tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]:
        """Per region (its title's cost, each line's, all its lines'), and the whole cost."""
        found = self._costs.get(counter.exact)
        if found is None:
            each = []
            for (_, title, lines, _, _), split in zip(self.regions, self._split, strict=True):
                if counter.exact:  # a tokenizer counts the line whole
                    line_costs = tuple(count(counter, line) + 1 for line in lines)
                else:  # the sum of the parts' pieces is the whole line's (`budget.pieces`)
                    estimate = self._texts.estimate
                    line_costs = tuple(estimate(head, rest) + 1 for head, rest in split)
                each.append((count(counter, title) + 1, line_costs, sum(line_costs)))
            found = self._costs[counter.exact] = (tuple(each), sum(t + s for t, _, s in each))
        return found


def limit_cut(region: str, over: int, limit: int) -> dict[str, Any]:
    """What a report says of a region's entries over its limit."""
    return {"part": f"working memory: {region}", "what": f"{over} oldest entries",
            "entries": over, "why": f"over the region's limit of {limit}"}

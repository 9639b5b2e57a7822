"""Fitting a call's prompt to its budget, with what a turn's calls share worked out once.

The rules are `runtime/conversation/budget.py`'s: the fixed parts must fit; the summary, the
recent turns and the working memory get what is left, in that order; what is cut is reported;
regions are held to their declared size (`working_memory.limits`), oldest entries dropped.

What makes it cheap: every text is counted once (`Fitter.count` remembers counts by text, and
the same texts recur every call and every turn); the history's messages and costs are a
`ConversationView` and working memory's labelled lines a `MemoryView`, each built once per
turn context and shared by the turn's calls; and when a part plainly fits — its whole cost
within what is left — it is taken whole without walking it entry by entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from soul.providers import Message
from soul.records import MemoryEntry
from soul.runtime.conversation import (
    MESSAGE_OVERHEAD,
    Budget,
    BudgetReport,
    ConversationView,
    Counter,
    TurnMessages,
    label_of,
    over_budget,
)
from soul.runtime.turn.context import TurnContext
from soul.runtime.untrusted import escape_untrusted

DEFAULT_REGION_LIMIT = 12  # entries a working-memory region shows unless the blueprint says
COUNT_CACHE = 4096  # token counts remembered per counter (the same texts recur every turn)
VIEW_CACHE = 256  # turn contexts whose views are kept (one per session with a turn running)
HEADING = "## Working Memory"

Count = Callable[[Counter, str], int]


class MemoryView:
    """Working memory as a prompt shows it, for one context's entries: per region (in the
    blueprint's order, then the others by name) its newest entries within its limit, as
    labelled lines; the whole section's text; and, per counter, what each line costs."""

    __slots__ = ("_costs", "regions", "text")

    def __init__(self, entries: Mapping[str, tuple[MemoryEntry, ...]], listed: Sequence[str], limits: Mapping[str, int]) -> None:
        order = [r for r in listed if entries.get(r)] + sorted(r for r in entries if r not in listed and entries[r])
        regions = []
        blocks = []
        for region in order:
            found = entries[region]
            limit = limits.get(region, DEFAULT_REGION_LIMIT)
            over = len(found) - limit if len(found) > limit else 0
            shown = found[-limit:] if limit > 0 else ()
            lines = tuple(f"- {label_of(e)}{escape_untrusted(e.content)}" for e in shown)
            title = f"### {region}"
            regions.append((region, title, lines, over, limit))
            if lines:
                blocks.append(f"{title}\n" + "\n".join(lines))
        self.regions: tuple[tuple[str, str, tuple[str, ...], int, int], ...] = tuple(regions)
        self.text = f"{HEADING}\n" + "\n\n".join(blocks) if blocks else ""
        self._costs: dict[bool, tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]] = {}

    def costs(self, counter: Counter, count: Count) -> tuple[tuple[tuple[int, tuple[int, ...], int], ...], int]:
        """Per region (its title's cost, each line's, all its lines'), and the whole cost."""
        found = self._costs.get(counter.exact)
        if found is None:
            each = []
            for _, title, lines, _, _ in self.regions:
                line_costs = tuple(count(counter, line) + 1 for line in lines)
                each.append((count(counter, title) + 1, line_costs, sum(line_costs)))
            found = self._costs[counter.exact] = (tuple(each), sum(t + s for t, _, s in each))
        return found


def _limit_cut(region: str, over: int, limit: int) -> dict[str, Any]:
    return {"part": f"working memory: {region}", "what": f"{over} oldest entries",
            "entries": over, "why": f"over the region's limit of {limit}"}


class Fitter:
    """Fits the prompts of one blueprint's calls (see the module's docstring); its caches
    are bounded and keyed by what they were computed from, so any context may come."""

    def __init__(self, regions: Sequence[str], limits: Mapping[str, int]) -> None:
        self.listed = tuple(regions)
        self.limits = limits
        self._counts: dict[bool, dict[str, int]] = {True: {}, False: {}}
        self._turns = TurnMessages()
        self._views: dict[int, tuple[Any, Any, ConversationView]] = {}
        self._memories: dict[int, tuple[Any, MemoryView]] = {}

    def count(self, counter: Counter, text: str) -> int:
        """The tokens of `text` under `counter`, counted once per text."""
        if not text:
            return 0
        known = self._counts[counter.exact]
        found = known.get(text)
        if found is None:
            if len(known) >= COUNT_CACHE:
                known.clear()
            found = known[text] = counter.count(text)
        return found

    def conversation(self, ctx: TurnContext) -> ConversationView:
        """The view of `ctx`'s history and summary (built on the first call of a turn)."""
        history, summary = ctx.history, ctx.summary
        hit = self._views.get(id(history))
        if hit is not None and hit[0] is history and hit[1] is summary:
            return hit[2]
        if len(self._views) >= VIEW_CACHE:
            self._views.clear()
        view = ConversationView(history, summary, self._turns)
        self._views[id(history)] = (history, summary, view)
        return view

    def memory(self, ctx: TurnContext) -> MemoryView:
        """The view of `ctx`'s working memory (rebuilt only when a step fills a region)."""
        entries = ctx.entries
        hit = self._memories.get(id(entries))
        if hit is not None and hit[0] is entries:
            return hit[1]
        if len(self._memories) >= VIEW_CACHE:
            self._memories.clear()
        view = MemoryView(entries, self.listed, self.limits)
        self._memories[id(entries)] = (entries, view)
        return view

    def fit(self, ctx: TurnContext, head: str, steering: str, this_turn: str, form: str, user: str,
            budget: Budget | None, where: str) -> tuple[tuple[Message, ...], BudgetReport | None]:
        """The messages of one call, fitted to `budget` (None: nothing is cut but what is over
        a region's limit), and the report of what the budget held and cut. Raises
        `BudgetExceeded` when the parts that cannot be cut do not fit."""
        view = self.conversation(ctx)
        summary = view.summary_text
        start = 0  # the first turn of the history shown
        report = None
        available = 0
        if budget is not None:
            counter, count = budget.counter, self.count
            fixed = {"persona, state and user model": count(counter, head), "steering": count(counter, steering),
                     "this turn so far": count(counter, this_turn), "response format": count(counter, form),
                     "the current message": count(counter, user), "message overhead": 2 * MESSAGE_OVERHEAD}
            total = sum(fixed.values())
            report = BudgetReport(budget.window, budget.reserve, counter.name, total)
            report.parts.update((k, v) for k, v in fixed.items() if v)
            available = budget.prompt - total
            if available < 0:
                raise over_budget(budget, fixed, where)
            # the conversation: its summary, then the newest turns within the history's share
            allowance = int(available * budget.share)
            used = count(counter, summary)
            if summary and used > allowance:  # shortened from the end: its oldest facts come first
                whole = used
                while summary and used > allowance:
                    summary = summary[: int(len(summary) * allowance / used * 0.9)]
                    used = count(counter, summary)
                report.cut.append({"part": "summary", "what": f"{whole - used} of its {whole} tokens",
                                   "tokens": whole - used, "why": "over the history's share"})
            costs, all_turns = view.costs(counter, count)
            if len(costs) <= budget.turns and used + all_turns <= allowance:
                used += all_turns  # it plainly fits: every turn is shown
            else:
                kept = 0
                for i in range(len(costs) - 1, -1, -1):
                    cost = costs[i]
                    if kept >= budget.turns or used + cost > allowance:
                        why = f"over the {budget.turns} turns its steps see" if kept >= budget.turns else "over the history's share"
                        history = view.history
                        report.cut.append({"part": "history", "what": f"turns {history[0].number}-{history[i].number}",
                                           "turns": i + 1, "why": why})
                        start = i + 1
                        break
                    used, kept = used + cost, kept + 1
            report.parts["history"] = used
            available -= used
        memory, left = self.fit_memory(self.memory(ctx), budget, report, available)
        system = "\n\n".join(p for p in (head, summary, memory, steering, this_turn, form) if p)
        history_messages = view.messages(start)
        if history_messages and history_messages[-1].role == "user":  # a turn that got no reply: keep roles alternating
            last = history_messages.pop()
            user = f"{last.content}\n\n{user}"
        if report is not None and budget is not None:
            report.used = budget.prompt - left
        return (Message("system", system), *history_messages, Message("user", user)), report

    def fit_memory(self, memory: MemoryView, budget: Budget | None, report: BudgetReport | None,
                   available: int) -> tuple[str, int]:
        """The working-memory section: each region's newest entries within its limit and the
        tokens left; what is dropped goes to the report."""
        if budget is None or report is None:
            return memory.text, available
        counter = budget.counter
        available -= self.count(counter, HEADING) + 1
        regions, whole = memory.costs(counter, self.count)
        if whole <= available:  # it plainly fits: only the regions' own limits cut
            for (region, _, _, over, limit), (_, _, kept) in zip(memory.regions, regions, strict=True):
                if over:
                    report.cut.append(_limit_cut(region, over, limit))
                report.parts[f"working memory: {region}"] = kept
            return memory.text, available - whole
        blocks = []
        for (region, title, lines, over, limit), (title_cost, line_costs, _) in zip(memory.regions, regions, strict=True):
            if over:
                report.cut.append(_limit_cut(region, over, limit))
            available -= title_cost
            keep = 0
            for cost in reversed(line_costs):
                if cost > available:
                    break
                available -= cost
                keep += 1
            if keep < len(lines):
                report.cut.append({"part": f"working memory: {region}", "what": f"{len(lines) - keep} oldest entries",
                                   "entries": len(lines) - keep, "why": "over the window"})
            report.parts[f"working memory: {region}"] = sum(line_costs[len(lines) - keep:])
            if keep:
                blocks.append(f"{title}\n" + "\n".join(lines[len(lines) - keep:]))
        return (f"{HEADING}\n" + "\n\n".join(blocks) if blocks else ""), available

"""Fitting a call's prompt to its budget, with what a turn's calls share worked out once.

The rules are `runtime/conversation/budget.py`'s: the fixed parts must fit; the summary, the
recent turns and the working memory get what is left, in that order; what is cut is reported;
regions are held to their declared size (`working_memory.limits`), oldest entries dropped.

What makes it cheap: every text is counted once (`Fitter.count` remembers counts by text, and
the same texts recur every call and every turn); what a turn's calls share — the prompt's
head, steering and input, the history's messages (`ConversationView`), working memory's
labelled lines (`memory_view.py`) and what all of them cost (`Costs`) — is a `TurnParts`, built
on the turn's first call; and when the shared parts plainly fit — their whole cost within
what the call's own parts leave — a call counts its own two texts (this turn so far, its
response format) and writes its record, without walking the history or the memory.

A prompt fitted to a budget also keeps where each part lies in its messages (`layout`:
`runtime/conversation/layout.py`), the turn's share of it worked out once; and its system
message carries its cache points (`cache_points`), where it stops being the same from call
to call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from soul.providers import Message
from soul.runtime.conversation import (
    MESSAGE_OVERHEAD,
    Budget,
    BudgetReport,
    ConversationView,
    Counter,
    TurnMessages,
    over_budget,
    parts,
)
from soul.runtime.turn.context import TurnContext
from soul.runtime.turn.prompting.blocks import cache_points
from soul.runtime.turn.prompting.memory_view import (
    HEADING,
    Count,
    LineCosts,
    MemoryView,
    limit_cut,
)

COUNT_CACHE = 1024  # token counts remembered per counter (the same texts recur every turn)
# the parts of a prompt that cannot be cut, as a report names them (then the message overhead)
FIXED = ("persona, state and user model", "steering", "this turn so far", "response format", "the current message")
OVERHEAD = "message overhead"


class Prompt:
    """A call's messages, and what the budget they were fitted to held: `budget` as a trace
    keeps it (window, reserve, counter, fixed, used, parts; None: no budget), `cut`, what
    did not fit or was over a limit, `layout`, where each part lies in the messages, and `form`,
    the call's response format (what, with the persona, a section must not parrot)."""

    __slots__ = ("budget", "cut", "form", "layout", "messages")

    def __init__(self, messages: tuple[Message, ...], budget: dict[str, Any] | None = None,
                 cut: list[dict[str, Any]] | None = None, layout: dict[str, Any] | None = None, form: str = "") -> None:
        # one store a field (a tuple assignment builds and unpacks a tuple: a prompt is made every call)
        self.messages = messages
        self.budget = budget
        self.cut = cut
        self.layout = layout
        self.form = form

    @property
    def report(self) -> BudgetReport | None:
        """The budget's report (None: the prompt was fitted to no budget)."""
        data = self.budget
        if data is None:
            return None
        return BudgetReport(data["window"], data["reserve"], data["counter"], data["fixed"], data["used"],
                            dict(data["parts"]), list(self.cut or ()), self.layout)


class TurnParts:
    """What the calls of one turn share: the prompt's head, steering and input, the views of
    its conversation and working memory, the system message's text before a call's own
    lines (with its parts and cache points), the history and the input as messages, and
    (per counter) what they cost."""

    __slots__ = ("_at", "_costs", "_head_rows", "_last", "_messages", "_rows", "before", "ctx", "head", "head_piece", "memory", "message",
                 "persona", "piece", "points", "steering", "tail", "user", "view")

    def __init__(self, ctx: TurnContext, head: parts.Piece, steering: str, user: str, message: parts.Piece,
                 persona: str, view: ConversationView, memory: MemoryView) -> None:
        self.ctx, self.head, self.steering, self.user, self.view, self.memory = ctx, head.text, steering, user, view, memory
        self.head_piece, self.message, self.persona = head, message, persona
        self.piece = parts.join((head, parts.piece(parts.SUMMARY, view.summary_text), memory.piece,
                                 parts.piece(parts.STEERING, steering)))
        self.before = self.piece.text
        self.points = cache_points(persona, head.text, view.summary_text)
        self.tail = view.tail(user)
        self._costs: dict[bool, Costs] = {}
        # the last budget fitted to, with its costs, its counter's counts and what `Costs.kept`
        # keeps of it: a turn's calls mostly share one budget, so `fit` looks them up once
        self._last: tuple[Budget, Costs, dict[str, int], tuple[Budget, int, dict[str, Any]]] | None = None
        self._rows: list[list[Any]] = []
        self._head_rows: list[list[Any]] | None = None
        # where a call's own parts start in the system message (0: nothing before them), and
        # how many messages a call sends: the same for every call of the turn
        self._at = len(self.before) + 2 if self.before else 0
        self._messages = len(self.tail) + 1

    def layout(self, this_turn: str, form: str) -> dict[str, Any]:
        """Where each part lies in a call's messages when the whole history is shown: the
        system message is the turn's piece, then this call's two parts (laid out as
        `parts.join` would: a separator belongs to the span before it). The rows of the turn's
        piece, history and input are worked out once and shared by its calls (plain data,
        never changed): a call adds its own two rows."""
        head = self._head_rows
        if head is None:  # the turn's own rows, and the history's and the input's, worked out on its first call
            head = self._head_rows = [[part, label, 0, start, end] for part, label, start, end in self.piece.spans]
            if head:  # as followed by a call's own part, the separator its own
                head[-1] = [*head[-1][:4], head[-1][4] + 2]
            self._rows = _layout(parts.EMPTY, self.view.messages(), self.view.labels(), self.message)["spans"]
        at = self._at
        if at and form:  # the usual call: its list made at once, at its size
            if not this_turn:
                return {"spans": [*head, [parts.FORMAT, "", 0, at, at + len(form)], *self._rows], "messages": self._messages}
            mid = at + len(this_turn) + 2
            return {"spans": [*head, [parts.THIS_TURN, "", 0, at, mid], [parts.FORMAT, "", 0, mid, mid + len(form)], *self._rows],
                    "messages": self._messages}
        at = len(self.before)
        if at and (this_turn or form):
            spans = [*head]
            at += 2
        else:
            spans = [[part, label, 0, start, end] for part, label, start, end in self.piece.spans]
        if this_turn:
            spans.append([parts.THIS_TURN, "", 0, at, at + len(this_turn) + (2 if form else 0)])
            at += len(this_turn) + (2 if form else 0)
        if form:
            spans.append([parts.FORMAT, "", 0, at, at + len(form)])
        spans += self._rows
        return {"spans": spans, "messages": self._messages}

    def costs(self, counter: Counter, count: Count) -> Costs:
        found = self._costs.get(counter.exact)
        if found is None:
            found = self._costs[counter.exact] = Costs(self, counter, count)
        return found


class Costs:
    """What a turn's shared parts cost under one counter — head, steering and input; the
    summary, each turn of the history and all of it; working memory with its heading — and
    what they add to a call's report when they fit whole (in the report's order, around the
    call's own two parts), with the cuts of the regions' own limits."""

    __slots__ = ("_rooms", "counts", "first", "fixed", "formed", "history", "limit_cuts", "memory", "rest", "shares", "summary", "turn_costs",
                 "turns", "whole")

    def __init__(self, parts: TurnParts, counter: Counter, count: Count) -> None:
        h, s, u = self.counts = (count(counter, parts.head), count(counter, parts.steering), count(counter, parts.user))
        self.fixed = h + s + u + 2 * MESSAGE_OVERHEAD
        self.summary = count(counter, parts.view.summary_text)
        self.turn_costs, turns = parts.view.costs(counter, count)
        self.turns = len(self.turn_costs)
        self.history = self.summary + turns
        memory = parts.memory
        regions, whole = memory.costs(counter, count)
        self.memory = count(counter, HEADING) + 1 + whole
        self.limit_cuts = tuple(limit_cut(region, over, limit) for region, _, _, over, limit in memory.regions if over)
        self.first = {name: n for name, n in ((FIXED[0], h), (FIXED[1], s)) if n}
        self.rest = {FIXED[4]: u} if u else {}
        self.rest[OVERHEAD] = 2 * MESSAGE_OVERHEAD
        self.rest["history"] = self.history
        self.rest.update((f"working memory: {r[0]}", kept) for r, (_, _, kept) in zip(memory.regions, regions, strict=True))
        # the report's parts with a call's own two in their places (a call copies it and sets them)
        self.shares = {**self.first, FIXED[2]: 0, FIXED[3]: 0, **self.rest}
        self.formed = {**self.first, FIXED[3]: 0, **self.rest}  # a call with nothing done before it
        self.whole = self.history + self.memory  # what the history and working memory take when shown whole
        self._rooms: dict[int, tuple[Budget, int, dict[str, Any]]] = {}

    def room(self, budget: Budget) -> int:
        """The most tokens a call's own two parts may take while everything else plainly fits
        under `budget` — every turn shown (no more than its `turns`), the history within its
        `share` of what is left, working memory in the rest — and -1 when it never does; kept
        per budget (a bound call's, the same every call)."""
        return self.kept(budget)[1]

    def kept(self, budget: Budget) -> tuple[Budget, int, dict[str, Any]]:
        """What is kept per budget: the budget itself (telling a reused id apart), its `room`,
        and the head of a plainly fitting call's record (its window, reserve and counter, then
        the call's own fields in their order: a copy is filled in)."""
        found = self._rooms.get(id(budget))
        if found is not None and found[0] is budget:
            return found
        room = -1
        history, share = self.history, budget.share
        if self.turns <= budget.turns and (history == 0 or share > 0):
            # the least `available` with `history <= available * share` (which is `cut_history`'s
            # `history <= int(available * share)`: both sides are whole or not negative)
            least = 0 if history == 0 else max(0, math.ceil(history / share))
            while least > 0 and history <= (least - 1) * share:
                least -= 1
            while history > least * share:
                least += 1
            need = max(least, history + self.memory)
            room = max(-1, budget.window - budget.reserve - self.fixed - need)
        record = {"window": budget.window, "reserve": budget.reserve, "counter": budget.counter.name, "fixed": 0, "used": 0,
                  "parts": None}
        found = self._rooms[id(budget)] = (budget, room, record)
        return found


class Fitter:
    """Fits the prompts of one blueprint's calls (see the module's docstring); its caches
    are bounded and keyed by what they were computed from, so any context may come."""

    def __init__(self, regions: Sequence[str], limits: Mapping[str, int]) -> None:
        self.listed = tuple(regions)
        self.limits = limits
        self._counts: dict[bool, dict[str, int]] = {True: {}, False: {}}
        self._turns = TurnMessages()
        self.texts = LineCosts()  # the estimates of working-memory texts, kept while recent

    def count(self, counter: Counter, text: str) -> int:
        """The tokens of `text` under `counter`, counted once per text."""
        if not text:
            return 0
        known = self._counts[counter.exact]
        found = known.get(text)
        if found is None:
            if len(known) >= COUNT_CACHE:
                known.clear()
            known[text] = found = counter.count(text)
        return found

    def conversation(self, ctx: TurnContext) -> ConversationView:
        """The view of `ctx`'s history and summary, kept with the turn (`TurnContext.shared`:
        a context replaced mid-turn keeps it)."""
        history, summary = ctx.history, ctx.summary
        hit = ctx.shared.get("conversation")
        if hit is not None and hit[0] is history and hit[1] is summary:
            return hit[2]  # type: ignore[no-any-return]
        view = ConversationView(history, summary, self._turns)
        ctx.shared["conversation"] = (history, summary, view)
        return view

    def memory(self, ctx: TurnContext) -> MemoryView:
        """The view of `ctx`'s working memory, kept with the turn (rebuilt only when a step
        fills a region)."""
        entries = ctx.entries
        hit = ctx.shared.get("memory")
        if hit is not None and hit[0] is entries:
            return hit[1]  # type: ignore[no-any-return]
        view = MemoryView(entries, self.listed, self.limits, self.texts)
        ctx.shared["memory"] = (entries, view)
        return view

    def turn(self, ctx: TurnContext, head: parts.Piece, steering: str, user: str, message: parts.Piece, persona: str) -> TurnParts:
        """What the calls of `ctx`'s turn share (built on its first call)."""
        return TurnParts(ctx, head, steering, user, message, persona, self.conversation(ctx), self.memory(ctx))

    def fit(self, turn: TurnParts, this_turn: str, form: str, budget: Budget | None, where: str) -> Prompt:
        """The messages of one call of `turn` — its own parts are `this_turn` and `form` —
        fitted to `budget` (None: nothing is cut but what is over a region's limit), with the
        record of what the budget held and cut. Raises `BudgetExceeded` when the parts that
        cannot be cut do not fit."""
        if budget is None:
            return Prompt((Message("system", "\n\n".join(filter(None, (turn.before, this_turn, form))), cache_points=turn.points), *turn.tail),
                          form=form)
        last = turn._last
        if last is None or last[0] is not budget:
            counter = budget.counter
            costs = turn._costs.get(counter.exact) or turn.costs(counter, self.count)
            last = turn._last = (budget, costs, self._counts[counter.exact], costs.kept(budget))
        _, costs, known, kept = last  # known: a text counted before is a look-up (0 only when empty)
        t = (known.get(this_turn) or self.count(budget.counter, this_turn)) if this_turn else 0  # "": a turn's first call
        f = known.get(form) or self.count(budget.counter, form)
        if t + f <= kept[1]:
            # it plainly fits: every turn is shown, working memory cut only to its regions' limits
            # the parts in the report's order, this call's own two among the turn's (a zero left out)
            if t and f:
                shares = costs.shares.copy()
                shares[FIXED[2]] = t
                shares[FIXED[3]] = f
            elif f:  # the first call of a turn, or one of a layer's first units: nothing done before it
                shares = costs.formed.copy()
                shares[FIXED[3]] = f
            elif t:
                shares = {**costs.first, FIXED[2]: t, **costs.rest}
            else:
                shares = {**costs.first, **costs.rest}
            before = turn.before
            if before and form:
                text = f"{before}\n\n{this_turn}\n\n{form}" if this_turn else f"{before}\n\n{form}"
            else:
                text = "\n\n".join(filter(None, (before, this_turn, form)))
            system = Message("system", text, (), None, False, turn.points)  # positionally: cheaper than a keyword
            total = costs.fixed + t + f
            record = kept[2].copy()  # (a copy of a made dict costs less than making it)
            record["fixed"] = total
            record["used"] = total + costs.whole
            record["parts"] = shares
            return Prompt((system, *turn.tail), record,
                          [dict(c) for c in costs.limit_cuts] if costs.limit_cuts else None, turn.layout(this_turn, form), form)
        return self._cutting(turn, this_turn, form, budget, where, costs, t, f)

    def _cutting(self, turn: TurnParts, this_turn: str, form: str, budget: Budget, where: str, costs: Costs, t: int,
                 f: int) -> Prompt:
        """`fit` when the shared parts do not plainly fit: the history and working memory cut
        to what is left (when they do plainly fit, `fit`'s own path writes what this would:
        tests/pipeline/test_budget.py pins it)."""
        counter = budget.counter
        total = costs.fixed + t + f
        prompt = budget.window - budget.reserve
        available = prompt - total
        h, s, u = costs.counts
        if available < 0:
            raise over_budget(budget, {**dict(zip(FIXED, (h, s, t, f, u), strict=True)), OVERHEAD: 2 * MESSAGE_OVERHEAD}, where)
        report = BudgetReport(budget.window, budget.reserve, counter.name, total)
        report.parts.update((name, n) for name, n in zip(FIXED, (h, s, t, f, u), strict=True) if n)
        report.parts[OVERHEAD] = 2 * MESSAGE_OVERHEAD
        summary, start, used = self.cut_history(turn.view, costs, budget, report, available)
        memory, left = self.fit_memory(turn.memory, budget, report, available - used)
        report.used = prompt - left
        system = parts.join((turn.head_piece, parts.piece(parts.SUMMARY, summary), memory, parts.piece(parts.STEERING, turn.steering),
                             parts.piece(parts.THIS_TURN, this_turn), parts.piece(parts.FORMAT, form)))
        history_messages = turn.view.messages(start)
        layout = _layout(system, history_messages, turn.view.labels(start), turn.message)
        user = layout.pop("user")
        points = cache_points(turn.persona, turn.head, summary)
        return Prompt((Message("system", system.text, cache_points=points), *history_messages, Message("user", user)),
                      report.to_dict(), report.cut, layout, form)

    def cut_history(self, view: ConversationView, costs: Costs, budget: Budget, report: BudgetReport,
                    available: int) -> tuple[str, int, int]:
        """The summary (shortened if it alone is over the history's share), the first turn
        shown (the newest within the call's `turns` and share) and the tokens they take."""
        counter = budget.counter
        allowance = int(available * budget.share)
        summary = view.summary_text
        used = costs.summary
        if summary and used > allowance:  # shortened from the end: its oldest facts come first
            whole = used
            while summary and used > allowance:
                summary = summary[: int(len(summary) * allowance / used * 0.9)]
                used = self.count(counter, summary)
            report.cut.append({"part": "summary", "what": f"{whole - used} of its {whole} tokens",
                               "tokens": whole - used, "why": "over the history's share"})
        turn_costs = costs.turn_costs
        start = 0
        kept = 0
        for i in range(len(turn_costs) - 1, -1, -1):
            cost = turn_costs[i]
            if kept >= budget.turns or used + cost > allowance:
                why = f"over the {budget.turns} turns its steps see" if kept >= budget.turns else "over the history's share"
                history = view.history
                report.cut.append({"part": "history", "what": f"turns {history[0].number}-{history[i].number}",
                                   "turns": i + 1, "why": why})
                start = i + 1
                break
            used, kept = used + cost, kept + 1
        report.parts["history"] = used
        return summary, start, used

    def fit_memory(self, memory: MemoryView, budget: Budget, report: BudgetReport, available: int) -> tuple[parts.Piece, int]:
        """The working-memory section: each region's newest entries within its limit and the
        tokens left; what is dropped goes to the report."""
        counter = budget.counter
        available -= self.count(counter, HEADING) + 1
        regions, _ = memory.costs(counter, self.count)
        blocks = []
        for (region, title, lines, over, limit), (title_cost, line_costs, _), kind in zip(memory.regions, regions, memory.kinds, strict=True):
            if over:
                report.cut.append(limit_cut(region, over, limit))
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
                blocks.append(parts.piece(kind, f"{title}\n" + "\n".join(lines[len(lines) - keep:]), region))
        return parts.headed(f"{HEADING}\n", parts.join(blocks)), available


def _layout(system: parts.Piece, history: list[Message], labels: list[str], message: parts.Piece) -> dict[str, Any]:
    """Where each part lies in the messages `system`, `history` and the input `message` (a
    last history message of the user's is merged into the input, as the messages are: it is
    popped from `history`, and the input's text is returned as "user"). `parts.Layout`'s
    record, written row by row: a history message is one part, all of its text."""
    if history and history[-1].role == "user":  # a turn that got no reply: keep roles alternating
        last = history.pop()
        message = parts.join((parts.piece(parts.HISTORY, last.content, labels.pop()), message))
    spans = [[part, label, 0, start, end] for part, label, start, end in system.spans]
    at = 1
    for m, label in zip(history, labels, strict=True):
        if m.content:  # an empty message has no part (as `parts.piece` makes none)
            spans.append([parts.HISTORY, label, at, 0, len(m.content)])
        at += 1
    spans.extend([part, label, at, start, end] for part, label, start, end in message.spans)
    return {"spans": spans, "messages": at + 1, "user": message.text}

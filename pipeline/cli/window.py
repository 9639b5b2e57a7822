"""`soul explain --turn N SESSION`: the context window of a stored turn, call by call — each part
of the prompt with its tokens, the window and the budget, what was cut and why (`--json`: the
same data, as `soul.runtime.turn_window` gives it)."""

from __future__ import annotations

import argparse
from typing import Any

from soul.cli.terminal import say, say_json
from soul.errors import SoulError


def stored_window(session: str, turn: int) -> dict[str, Any]:
    """The context window of turn `turn` of the session `session` (an id or unique prefix)."""
    from soul.runtime import turn_window
    from soul.store import SessionStore

    with SessionStore.open() as store:
        info = store.find_session(session)
        if not 0 <= turn <= info.turns:
            raise SoulError(f"session {info.id} has {info.turns} turn{'s' if info.turns != 1 else ''}: there is no turn {turn}"
                            f" (see: soul sessions show {info.id[:8]})")
        trace = store.trace(info.id, turn)
    return {"session": info.id, "soul": info.soul, **turn_window(trace)}


def render(data: dict[str, Any]) -> str:
    """The window as text, one table per call."""
    calls = data["calls"]
    out = [f"session {data['session']} · soul {data['soul']} · turn {data['turn']} ({data['kind']}) · "
           f"{len(calls)} call{'s' if len(calls) != 1 else ''}"]
    if not calls:
        out.append("  no model call was made on this turn")
    for call in calls:
        out.append("")
        out.append(f"call {call['unit']} on {call['model']} — steps {', '.join(call['steps'])}")
        if call["window"] is not None:
            out.append(f"  window {call['window']} tokens · {call['reserve']} kept for the reply · budget {call['budget']}"
                       f" for the prompt · the prompt took {call['used']} as counted with the {call['counter']}")
        how = ("as the model reported it, shared out over the parts by their counted size" if call["attributed"]
               else "as counted (the model reported no count)")
        out.append(f"  input {call['input_tokens']} tokens ({how}) · output {call['output_tokens']}")
        out.append(f"  cost {_cost(call['cost'])}")
        if call["requests"] > 1:
            out.append(f"  {call['requests']} requests: the prompt was sent again with each re-ask or tool round (× sent)")
        width = max([len(_name(s)) for s in call["sections"]] + [12])
        out.append(f"  {'part':{width}}  {'tokens':>7}  {'sent':>4}")
        for section in call["sections"]:
            out.append(f"  {_name(section):{width}}  {section['tokens']:>7}  {section['sent']:>4}")
        out.append(f"  {'total':{width}}  {call['input_tokens']:>7}")
        for cut in call["cut"]:
            out.append(f"  cut: {cut.get('part')}: {cut.get('what')} ({cut.get('why')})")
        if not call["cut"]:
            out.append("  cut: nothing")
    return "\n".join(out) + "\n"


def _cost(cost: dict[str, Any] | None) -> str:
    from soul.providers import usd_text

    if not cost:
        return "unknown (recorded before prices were)"
    if cost.get("usd") is None:
        return f"unknown (no price for {cost.get('model')}: add one to $SOUL_HOME/prices.json)"
    return f"{usd_text(cost['usd'])} (priced as {cost.get('model')}, prices of {cost.get('date')}, {cost.get('source')})"


def _name(section: dict[str, Any]) -> str:
    return f"{section['part']}: {section['label']}" if section["label"] else section["part"]


def explain_turn(args: argparse.Namespace) -> int:
    data = stored_window(args.blueprint, args.turn)
    if args.json:
        say_json(data)
    else:
        say(render(data), end="")
    return 0

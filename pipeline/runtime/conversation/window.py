"""The context window of a stored call, part by part: what the model saw, the tokens of each
part, the window and the budget, and what was cut and why (`soul explain --turn`, the page).

A call's trace keeps its messages and where each part of the prompt lies in them
(`layout.py`). Each part is counted with the call's own counter (the bundled tokenizer for the
default local model, else the conservative estimate: `budget.py`). Messages after the prompt the
builder made are the call's re-asks and tool rounds; native tool specs go beside the messages;
the chat template adds `MESSAGE_OVERHEAD` tokens per message. A call of several requests (a
re-ask, tool rounds) sent its prompt each time: a part's weight is its count times the requests
it was in (`sent`).

The model reports one number for the whole input. When it did (`input_tokens` > 0), that number
is shared out over the parts in proportion to their weights (largest remainders), so the parts
add up to the call's input exactly; `counted` keeps each part's own count. When it did not, the
parts' weights are the tokens. Traces stored before layouts were recorded show one part per
message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soul.runtime.conversation import layout as parts
from soul.runtime.conversation.budget import ESTIMATE, MESSAGE_OVERHEAD, TOKENIZER, Counter


def _counter(name: Any) -> Counter:
    return Counter(TOKENIZER, True) if name == TOKENIZER else Counter(ESTIMATE, False)


def _content(message: Any) -> str:
    """A stored message's text as the model reads it, tool calls included."""
    if not isinstance(message, Mapping):
        return str(message)
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            text += f"\n{call.get('name', '')}({call.get('arguments', '')})"
    return text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


Row = tuple[str, str, int, int, str]  # part, label, message, start, text


def _prompt_rows(layout: Mapping[str, Any], contents: Sequence[str]) -> tuple[list[Row], int] | None:
    """(part, label, message, start, text) for the messages the builder made, and how many they are;
    None when the layout does not fit the messages (then each message is a part)."""
    count = _int(layout.get("messages"))
    spans = layout.get("spans")
    if count is None or not 0 < count <= len(contents) or not isinstance(spans, list):
        return None
    rows: list[Row] = []
    reach = [0] * count
    for span in spans:
        if not isinstance(span, list | tuple) or len(span) != 5:
            return None
        part, label, msg, start, end = span
        msg, start, end = _int(msg), _int(start), _int(end)
        if msg is None or start is None or end is None or not 0 <= msg < count or start != reach[msg] or end > len(contents[msg]) or end < start:
            return None
        rows.append((str(part), str(label), msg, start, contents[msg][start:end]))
        reach[msg] = end
    for msg in range(count):  # text after the last span: the tools described in the system prompt
        if reach[msg] < len(contents[msg]):
            what = (parts.TOOLS, "described in the system prompt") if msg == 0 else (parts.OTHER, "")
            rows.append((*what, msg, reach[msg], contents[msg][reach[msg]:]))
    return rows, count


def _plain_rows(messages: Sequence[Any], contents: Sequence[str], prompt: int) -> list[Row]:
    rows = []
    for i in range(prompt):
        role = messages[i].get("role") if isinstance(messages[i], Mapping) else ""
        if i == 0 and role == "system":
            rows.append(("system prompt", "", i, 0, contents[i]))
        elif i == prompt - 1:
            rows.append((parts.MESSAGE, "", i, 0, contents[i]))
        else:
            rows.append((parts.HISTORY, str(role), i, 0, contents[i]))
    return rows


def _rounds(messages: Sequence[Any], start: int, reasks: Sequence[str]) -> list[tuple[int, str]]:
    """For each message after the prompt: the round it came in (1, 2, ...) and its part. A round
    is the model's reply and what answered it (the re-ask, or the tools' results)."""
    out: list[tuple[int, str]] = []
    rounds = 0
    previous = None
    for message in messages[start:]:
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "assistant" and previous != "assistant":
            rounds += 1
        out.append((max(rounds, 1), ""))
        previous = role
    asked = set(reasks)
    kinds: dict[int, str] = {}
    for message, (number, _) in zip(messages[start:], out, strict=True):
        if isinstance(message, Mapping) and message.get("role") == "user" and message.get("content") in asked:
            kinds[number] = parts.REASK
    return [(number, kinds.get(number, parts.TOOL_ROUND)) for number, _ in out]


def share_out(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights` by largest remainders: the parts add up to it."""
    whole = sum(weights)
    if whole <= 0:
        return [0] * len(weights)
    exact = [total * w / whole for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - shares[i], reverse=True)
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def call_window(call: Mapping[str, Any]) -> dict[str, Any]:
    """The context window of one stored call (a trace's `calls` item)."""
    messages = [m for m in call.get("messages") or () if m is not None]
    contents = [_content(m) for m in messages]
    budget = call.get("budget") if isinstance(call.get("budget"), Mapping) else {}
    counter = _counter(budget.get("counter"))
    layout = call.get("window") if isinstance(call.get("window"), Mapping) else {}
    reasks = [str(r) for r in call.get("reasks") or ()]
    found = _prompt_rows(layout, contents) if layout else None
    if found is not None:
        rows, prompt = found
    else:
        prompt = max(1, len(messages) - 2 * len(reasks)) if messages else 0
        rows = _plain_rows(messages, contents, prompt)
    rounds = _rounds(messages, prompt, reasks)
    requests = 1 + (rounds[-1][0] if rounds else 0)
    sent = [requests] * prompt + [requests - number for number, _ in rounds]
    sections = [{"part": part, "label": label, "message": msg, "start": start, "chars": len(text), "counted": counter.count(text),
                 "sent": sent[msg]} for part, label, msg, start, text in rows]
    for i, (number, part) in enumerate(rounds, start=prompt):
        role = messages[i].get("role") if isinstance(messages[i], Mapping) else ""
        sections.append({"part": part, "label": f"round {number} · {role}", "message": i, "start": 0, "chars": len(contents[i]),
                         "counted": counter.count(contents[i]), "sent": sent[i]})
    specs = layout.get("tool_specs") if isinstance(layout.get("tool_specs"), str) else ""
    if specs:
        sections.append({"part": parts.TOOLS, "label": "tool specs (native)", "message": None, "start": 0, "chars": len(specs),
                         "counted": counter.count(specs), "sent": requests})
    if messages:
        sections.append({"part": parts.TEMPLATE, "label": f"{MESSAGE_OVERHEAD} per message", "message": None, "start": 0, "chars": 0,
                         "counted": MESSAGE_OVERHEAD * len(messages), "sent": 1, "weight": MESSAGE_OVERHEAD * sum(sent)})
    weights = [s.pop("weight", s["counted"] * s["sent"]) for s in sections]
    reported = _int(call.get("input_tokens")) or 0
    attributed = reported > 0 and sum(weights) > 0
    for section, tokens in zip(sections, share_out(reported, weights) if attributed else weights, strict=True):
        section["tokens"] = tokens
    totals: dict[str, int] = {}
    for section in sections:
        totals[section["part"]] = totals.get(section["part"], 0) + section["tokens"]
    window, reserve = _int(budget.get("window")), _int(budget.get("reserve"))
    return {
        "unit": call.get("unit"), "model": call.get("model"), "steps": list(call.get("steps") or ()),
        "input_tokens": sum(s["tokens"] for s in sections), "reported_input_tokens": reported,
        "output_tokens": _int(call.get("output_tokens")) or 0, "attributed": attributed,
        "counter": counter.name, "requests": requests,
        "window": window, "reserve": reserve,
        "budget": window - reserve if window is not None and reserve is not None else None,
        "used": _int(budget.get("used")), "parts": totals, "sections": sections,
        "cut": [dict(c) for c in call.get("cut") or () if isinstance(c, Mapping)],
        "cost": dict(call["cost"]) if isinstance(call.get("cost"), Mapping) else None,
    }


def turn_window(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The context window of every call of a stored turn (or cycle)."""
    return {"turn": trace.get("turn"), "kind": trace.get("kind"),
            "calls": [call_window(c) for c in trace.get("calls") or () if isinstance(c, Mapping)]}

"""A turn's trace as the commit stores it: `Trace.to_dict` gives what `dataclasses.asdict`
gives (issue 26: a walk that skips the call for each plain value), without its deep copy."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

from soul.providers.base import Message, ToolCall
from soul.runtime.events import CallTrace, StepTrace, Trace

Point = namedtuple("Point", "x y")


class Label(str):
    pass


def a_trace() -> Trace:
    call = CallTrace(
        unit=0,
        model="claude",
        steps=("think", "reply"),
        messages=(
            Message("system", "persona", cache_points=(7,)),
            Message("assistant", "", tool_calls=(ToolCall("c1", "recall", "{\"q\": [\"x\", 1.5]}"),)),
            Message("tool", "found", tool_call_id="c1", is_error=True),
        ),
        raw="<reply>hi</reply>",
        attempts=1,
        input_tokens=10,
        output_tokens=2,
        latency_ms=0.25,
        budget={"window": 8000, "parts": {"persona": 3, "history": [1, 2]}},
        cut=({"region": "memory", "tokens": 4},),
        window={"parts": [{"name": "persona", "at": (0, 1)}], "point": Point(1, (2, [3]))},
        cost=None,
    )
    steps = (
        StepTrace("think", "internal_monologue", "ran", {"thought": "hm", "nested": {"a": [{"b": None}]}}),
        StepTrace("reply", "external_dialogue", "ran", {"reply": Label("hi")}, flags=("fused",), ms=0.5),
    )
    return Trace(1, "message", "hello", steps, (call,), 1.0, 2.0, ({"kind": "chetana", "tool": "recall"},))


def test_a_trace_as_data_is_what_asdict_makes() -> None:
    trace = a_trace()
    data = trace.to_dict()
    assert data == dataclasses.asdict(trace)
    point = data["calls"][0]["window"]["point"]
    assert type(point) is Point and point == Point(1, (2, [3]))  # named tuples rebuilt as asdict does
    assert type(data["calls"][0]["messages"]) is tuple and type(data["steps"][0]["outputs"]["nested"]["a"]) is list


def test_a_trace_as_data_copies_the_containers_and_shares_the_values() -> None:
    trace = a_trace()
    data = trace.to_dict()
    outputs = trace.steps[0].outputs
    assert data["steps"][0]["outputs"] is not outputs  # a dict changed later is not the stored one
    assert data["steps"][0]["outputs"]["nested"]["a"] is not outputs["nested"]["a"]
    assert data["input"] is trace.input and data["calls"][0]["raw"] is trace.calls[0].raw


def test_every_dataclass_converts_as_asdict_converts_it_the_first_time_and_after() -> None:
    from dataclasses import make_dataclass

    from soul.runtime.events import as_data

    odd = make_dataclass("Odd", [("_private", int), ("value", object), ("__dunder", str)])
    items = [odd(1, [odd(2, None, "x")], "y"), odd(3, {"k": (odd(4, 5.5, ""),)}, "z")]
    for _ in range(2):  # met first (the general walk), then by the code made for its fields
        assert [as_data(item) for item in items] == [dataclasses.asdict(item) for item in items]

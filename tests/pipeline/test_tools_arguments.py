"""Tool arguments nested deeper than any tool needs (under the 100,000-character cap) go back
to the model as an error like any other bad argument, whichever way they arrive: the text a
model wrote (XML form, native calls as text), or a value an SDK already parsed."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest
from tool_souls import ANSWER, REPLY, tool_soul, xml_call

import soul
from soul.providers import ScriptedProvider
from soul.runtime.tools import ToolBox
from soul.runtime.tools.arguments import MAX_ARGUMENT_DEPTH, arguments_problem

DEEP = 40_000


def deep_text(depth: int, opener: str = "[", closer: str = "]") -> str:
    return '{"city": ' + opener * depth + closer * depth + "}"


def deep_value(depth: int) -> dict:
    value: list = []
    for _ in range(depth):
        value = [value]
    return {"city": value}


def run(path: Path, replies: list, home: Path) -> tuple:
    provider = ScriptedProvider(replies)
    with soul.load(path, provider=provider, home=home) as s:
        result = s.session().turn_sync("weather in Oslo?")
    return result, provider


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a":', "}")], ids=["arrays", "objects"])
def test_deeply_nested_xml_arguments_come_back_as_an_error(tmp_path: Path, opener: str, closer: str) -> None:
    module = f"tools_deep_xml_{'arrays' if opener == '[' else 'objects'}"
    path = tool_soul(tmp_path, module=module)
    text = deep_text(DEEP if opener == "[" else 12_000, opener, closer)
    assert len(text) < 100_000
    result, provider = run(path, [xml_call("forecast", text), ANSWER, REPLY], tmp_path / "home")
    assert result.reply == "It is sunny in Oslo."
    error = result.steps["lookup"]["error"]
    assert error.startswith("the arguments are nested deeper than") and str(MAX_ARGUMENT_DEPTH) in error
    assert 'status="error">the arguments are nested deeper than' in provider.requests[1].messages[-1].content
    assert importlib.import_module(module).CALLS == []
    # what the model wrote is kept cut in the step's outputs (later prompts show them)
    kept = result.steps["lookup"]["call"]["arguments"]
    assert len(kept) < 1100 and kept.endswith(f"[... cut: {len(text) - 1000:,} more characters]")


def test_deeply_nested_native_arguments_come_back_as_an_error(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_deep_native")
    text = path.read_text().replace("  lookup: {uses: tool}\n  reply: {uses: external_dialogue, after: [lookup]}",
                                    "  reply: {uses: external_dialogue, tools: [forecast]}")
    path.write_text(text)
    replies = [{"tool_calls": [{"name": "forecast", "arguments": deep_text(DEEP)}]}, REPLY]
    result, provider = run(path, replies, tmp_path / "home")
    assert result.reply == "It is sunny in Oslo."
    answered = provider.requests[1].messages[-1]
    assert answered.role == "tool" and answered.is_error
    assert answered.content.startswith("error: the arguments are nested deeper than")


def test_a_parsed_value_nested_too_deep_is_refused_without_recursion(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_deep_value")
    with soul.load(path, provider=ScriptedProvider([])) as loaded:
        box = ToolBox(loaded.plan.blueprint)
    kwargs, problem = box.check("forecast", deep_value(DEEP))
    assert kwargs is None and problem is not None and problem.startswith("the arguments are nested deeper than")
    run = asyncio.run(box.call("forecast", deep_value(DEEP)))
    assert run.error == problem and run.arguments == f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels: not kept)"
    # as deep as a tool may take: checked as usual
    kwargs, problem = box.check("forecast", deep_value(MAX_ARGUMENT_DEPTH - 2))
    assert kwargs is None and "is not of type 'string'" in (problem or "")


@pytest.mark.parametrize("text", [
    '{"city": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
    '{"city": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
], ids=["brackets-in-a-string", "escaped-quote"])
def test_brackets_inside_strings_are_not_nesting(text: str) -> None:
    assert arguments_problem(text) is None


def test_an_sdk_parsed_value_becomes_text_without_recursion() -> None:
    from soul.providers.arguments import arguments_json

    text = arguments_json(deep_value(DEEP))
    assert text.startswith('{"city": [[[') and text.endswith("]]]}") and text == deep_text(DEEP + 1)
    assert arguments_json({"a": [1, "x", None, {"b": True}]}) == '{"a": [1, "x", null, {"b": true}]}'
    assert arguments_problem(text) is not None

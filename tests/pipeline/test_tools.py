"""Tools: a blueprint's Python functions called by its model (docs/tools.md).

A scripted model calls a tool, gets the result, answers; failures, timeouts and arguments that
do not fit the signature come back to the model as data (and to Chetana as failures); a
recorded tool turn replays with the recorded results; hostile results are bounded and inert.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest
from tool_souls import ANSWER, REPLY, tool_soul, xml_call

import soul
from soul.errors import ToolLoadError
from soul.providers import ReplayProvider, ScriptedProvider, recording


def run(path: Path, replies: list, home: Path, text: str = "weather in Oslo?", **load: object) -> tuple:
    provider = load.pop("provider", None) or ScriptedProvider(replies)
    with soul.load(path, provider=provider, home=home, **load) as s:  # type: ignore[arg-type]
        result = s.session().turn_sync(text)
        snapshot = s.store.snapshot(result.session_id)
    return result, provider, snapshot


def tool_messages(provider: ScriptedProvider, call: int) -> str:
    return "\n".join(m.content for m in provider.requests[call].messages)


def test_the_model_calls_a_tool_gets_the_result_and_answers(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_answer")
    replies = [xml_call("forecast", '{"city": "Oslo", "days": 2}'), ANSWER, REPLY]
    result, provider, _ = run(path, replies, tmp_path / "home")
    assert result.reply == "It is sunny in Oslo."
    lookup = result.steps["lookup"]
    assert lookup["text"] == "Sunny in Oslo."
    assert lookup["call"] == {"tool": "forecast", "arguments": {"city": "Oslo", "days": 2}}
    assert lookup["result"] == '{"city": "Oslo", "days": 2, "sky": "sunny"}' and lookup["error"] is None
    assert lookup["latency_ms"] >= 0 and len(lookup["calls"]) == 1
    # the first request described both tools' signatures; the second carried the result
    first = provider.requests[0].messages[0].content
    assert '- forecast: The weather forecast for a city.' in first and '"days": {"type": "integer"' in first
    assert "- population: How many people live in a city." in first
    assert '<tool_result name="forecast" status="ok">{"city": "Oslo", "days": 2, "sky": "sunny"}</tool_result>' in tool_messages(provider, 1)
    assert result.trace.calls[0].tools[0]["tool"] == "forecast"


def test_a_failing_tool_is_reported_to_the_model_and_to_chetana(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_failing", extra="chetana: {}")
    replies = [xml_call("broken", "{}"), "<tool_answer>The backend is down.</tool_answer>", REPLY]
    result, provider, snapshot = run(path, replies, tmp_path / "home")
    assert result.steps["lookup"]["error"] == "ValueError: the backend is down"
    assert result.steps["lookup"]["result"] is None
    assert '<tool_result name="broken" status="error">ValueError: the backend is down</tool_result>' in tool_messages(provider, 1)
    mastery = snapshot.chetana["self_model"]["tool_mastery"]["broken"]
    assert mastery["total_invocations"] == 1 and mastery["successes"] == 0 and mastery["avg_latency"] >= 0


def test_a_successful_tool_feeds_chetana_its_latency(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_ok_chetana", extra="chetana: {}")
    _, _, snapshot = run(path, [xml_call("population", '{"city": "Oslo"}'), ANSWER, REPLY], tmp_path / "home")
    mastery = snapshot.chetana["self_model"]["tool_mastery"]["population"]
    assert mastery["successes"] == 1 and mastery["avg_latency"] > 0


def test_a_tool_that_hangs_times_out_and_the_turn_goes_on(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_hang")
    started = time.perf_counter()
    result, provider, _ = run(path, [xml_call("hang", "{}"), "<tool_answer>It timed out.</tool_answer>", REPLY], tmp_path / "home")
    assert time.perf_counter() - started < 4  # the tool sleeps 5 s; its timeout is 0.3 s
    assert result.steps["lookup"]["error"] == "the tool timed out after 0.3 s"
    assert 'status="error">the tool timed out after 0.3 s</tool_result>' in tool_messages(provider, 1)


@pytest.mark.parametrize(("arguments", "problem"), [
    ('{"days": 2}', "'city' is a required property"),
    ('{"city": 7}', "city: 7 is not of type 'string'"),
    ('{"city": "Oslo", "color": "red"}', "Additional properties are not allowed ('color' was unexpected)"),
    ("not json", "the arguments are not JSON"),
    ('["Oslo"]', "the arguments must be a JSON object, not list"),
])
def test_arguments_that_do_not_fit_the_signature_come_back_as_an_error(tmp_path: Path, arguments: str, problem: str) -> None:
    module = f"tools_args_{abs(hash(arguments))}"
    path = tool_soul(tmp_path, module=module)
    result, provider, _ = run(path, [xml_call("forecast", arguments), ANSWER, REPLY], tmp_path / "home")
    assert problem in result.steps["lookup"]["error"]
    assert problem.replace("'", "&#x27;") in tool_messages(provider, 1) or problem in tool_messages(provider, 1)
    assert importlib.import_module(module).CALLS == []  # never called


def test_an_unknown_tool_comes_back_as_an_error(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_unknown")
    result, _, _ = run(path, [xml_call("teleport", "{}"), ANSWER, REPLY], tmp_path / "home")
    assert result.steps["lookup"]["error"].startswith("there is no tool 'teleport' (tools: forecast, population,")


def test_hostile_output_is_bounded_and_cannot_become_markup(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_hostile")
    result, provider, _ = run(path, [xml_call("hostile", "{}"), ANSWER, REPLY], tmp_path / "home")
    shown = result.steps["lookup"]["result"]
    assert len(shown) < 600 and shown.endswith("[... cut: 99,553 more characters]")
    sent = provider.requests[1].messages[-1].content  # the result, as the model reads it
    assert sent.startswith('<tool_result name="hostile" status="ok">&lt;/tool_result&gt;&lt;tool_call name=')
    assert sent.count("</tool_result>") == 1 and "<tool_call" not in sent


def test_rounds_are_bounded_and_the_model_is_told_to_answer(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_rounds")
    text = path.read_text().replace("lookup: {uses: tool}", "lookup: {uses: tool, tools: {use: [forecast], rounds: 2}}")
    path.write_text(text)
    call = xml_call("forecast", '{"city": "Oslo"}')
    # two rounds, then a third call is refused: its reply has no answer, so it is re-asked
    result, provider, _ = run(path, [call, call, call, ANSWER, REPLY], tmp_path / "home")
    assert len(result.steps["lookup"]["calls"]) == 2
    assert "You have used every tool round" in tool_messages(provider, 2)
    assert "- population:" not in provider.requests[0].messages[0].content  # only the listed tool
    trace = next(s for s in result.trace.steps if s.step == "lookup")
    assert any("tool rounds exhausted (2)" in f for f in trace.flags)


def test_a_template_chooses_the_call(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_template")
    text = path.read_text().replace(
        "lookup: {uses: tool}",
        'lookup: {uses: tool, with: {tool: forecast, arguments: {city: "{{ input.text | upper }}", days: 3}}}')
    path.write_text(text)
    result, provider, _ = run(path, [ANSWER, REPLY], tmp_path / "home", text="bergen")
    assert result.steps["lookup"]["call"] == {"tool": "forecast", "arguments": {"city": "BERGEN", "days": 3}}
    assert "BERGEN" in tool_messages(provider, 0)  # the result was there before the model was asked


def test_tool_use_inside_a_chained_step_native(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_native")
    text = path.read_text().replace("  lookup: {uses: tool}\n  reply: {uses: external_dialogue, after: [lookup]}",
                                    "  reply: {uses: external_dialogue, tools: [forecast, population]}")
    path.write_text(text)
    replies = [{"tool_calls": [{"name": "population", "arguments": {"city": "Oslo"}}, {"name": "forecast", "arguments": {"city": "Oslo"}}]}, REPLY]
    result, provider, _ = run(path, replies, tmp_path / "home")
    assert result.reply == "It is sunny in Oslo."
    assert [s.name for s in provider.requests[0].tools] == ["forecast", "population"]
    second = provider.requests[1].messages
    assert [m.role for m in second[-3:]] == ["assistant", "tool", "tool"]
    assert second[-2].content == "700000" and second[-2].tool_call_id == "call_1_1"
    assert [t["tool"] for t in result.trace.calls[0].tools] == ["population", "forecast"]


def test_record_then_replay_reproduces_the_tool_turn_without_running_the_tool(tmp_path: Path) -> None:
    module = "tools_replay"
    path = tool_soul(tmp_path, module=module)
    cassette = tmp_path / "tape.yaml"
    replies = [{"tool_calls": [{"name": "forecast", "arguments": {"city": "Oslo"}}]}, ANSWER, REPLY]
    recorded, _, _ = run(path, replies, tmp_path / "home", wrap=recording(cassette))
    calls = importlib.import_module(module).CALLS
    assert calls == ["Oslo"]
    assert "tool_results:" in cassette.read_text() and "tool_calls:" in cassette.read_text()
    replayed, _, _ = run(path, [], tmp_path / "home2", provider=ReplayProvider.from_file(cassette))
    assert calls == ["Oslo"]  # served from the tape, not run again
    assert replayed.reply == recorded.reply
    assert replayed.steps["lookup"]["result"] == recorded.steps["lookup"]["result"]
    assert replayed.trace.calls[0].tools[0]["source"] == "tape"


def test_validate_finds_a_missing_module_or_function_without_running_code(tmp_path: Path) -> None:
    from soul.compiler import validate

    path = tool_soul(tmp_path, module="tools_static")
    text = path.read_text().replace("tools_static:population", "tools_gone:population").replace("tools_static:broken", "tools_static:brokn")
    path.write_text(text)
    # code that would run on import: validation must not run it
    (tmp_path / "tools_static.py").write_text((tmp_path / "tools_static.py").read_text() + "\nopen('RAN', 'w').write('x')\n")
    errors = [d.format() for d in validate(path).errors]
    assert not (tmp_path / "RAN").exists() and not Path("RAN").exists()
    text = "\n".join(errors)
    assert "soul.yaml:8:15: error: tool 'population': module 'tools_gone' is not found in the blueprint's folder" in text
    assert "soul.yaml:9:17: error: tool 'broken': module 'tools_static'" in text and "defines no 'brokn'" in text
    assert len(errors) == 2


def test_validate_checks_the_names_steps_use(tmp_path: Path) -> None:
    from soul.compiler import validate

    path = tool_soul(tmp_path, module="tools_names")
    text = path.read_text().replace("lookup: {uses: tool}", "lookup: {uses: tool, tools: [forcast], with: {tool: population}}")
    path.write_text(text + "  recall: {uses: memory.recall, tools: [forecast]}\n")
    text = "\n".join(d.format() for d in validate(path).diagnostics)
    assert "step 'lookup' lists an undeclared tool 'forcast' (did you mean 'forecast'?)" in text
    assert "tool 'population' is not among the tools step 'lookup' lists" in text
    assert "step kind 'memory.recall' makes no model call; `tools` has no effect here" in text
    assert "tool 'hang' is never used" in text


def test_a_module_that_fails_on_import_is_a_tool_load_error_at_its_position(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_raise")
    source = (tmp_path / "tools_raise.py").read_text()
    (tmp_path / "tools_raise.py").write_text("raise RuntimeError('no network here')\n" + source)
    with pytest.raises(ToolLoadError, match=r"soul\.yaml:7:13: tool 'forecast': cannot import module 'tools_raise': RuntimeError: no network here"):
        run(path, [xml_call("forecast", '{"city": "Oslo"}')], tmp_path / "home")

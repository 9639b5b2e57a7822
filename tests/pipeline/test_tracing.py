"""OpenTelemetry spans (issue 27, item 3): turn → step → model call → tool call, background
cycles, dialogue turns and worker cycles, under the GenAI semantic conventions; on only when
the standard OTEL_* variables ask; no message text unless the user opts in; nothing of
opentelemetry imported when off. Checked with the SDK's in-memory exporter, the console
exporter of `soul run`, and a real OTLP/HTTP receiver on 127.0.0.1 decoding the protobuf."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from dialogue_souls import HAND, HAND_SCRIPT, write_dialogue
from tool_souls import ANSWER, REPLY, tool_soul, xml_call

import soul
from soul.providers import ScriptedProvider
from soul.runtime import DialogueRunner, tracing

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the tracing tests need the otel extra")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "claudius-hello.yaml"
THOUGHT = "A secret thought about the parser."
SAID = "Parsers are patient teachers."
ASKED = "my parser is slow"


def claudius_reply(text: str = SAID, thought: str = THOUGHT) -> str:
    return (f'<internal_monologue verb="pondered">{thought}</internal_monologue>'
            f'<external_dialogue verb="said">{text}</external_dialogue><user_model_check>false</user_model_check>')


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider, capture=False)
    yield exporter
    tracing.reset()


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def all_attribute_text(exporter: InMemorySpanExporter) -> str:
    return json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()], ensure_ascii=False, default=str)


def test_a_turn_is_a_tree_of_spans_with_the_genai_attributes_and_no_text(spans: InMemorySpanExporter) -> None:
    with soul.load("claudius", provider=ScriptedProvider([claudius_reply()])) as s:
        result = s.session().turn_sync(ASKED)
    found = by_name(spans)
    turn, unit, chat = found["invoke_agent claudius"], found["steps think, reply, user_check, user_update"], found["chat local"]
    assert unit.parent.span_id == turn.context.span_id and chat.parent.span_id == unit.context.span_id
    assert found["step recall"].parent.span_id == turn.context.span_id
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent" and turn.attributes["gen_ai.agent.name"] == "claudius"
    assert turn.attributes["gen_ai.conversation.id"] == result.session_id and turn.attributes["soul.turn.number"] == 1
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "local"
    assert a["gen_ai.provider.name"] == "scripted" and a["gen_ai.system"] == "scripted"
    assert a["gen_ai.usage.input_tokens"] == result.trace.calls[0].input_tokens > 0
    assert a["gen_ai.usage.output_tokens"] == result.trace.calls[0].output_tokens > 0
    assert a["soul.context.window"] > 0 and "soul.cost.usd" not in a  # a scripted call's price is unknown
    assert chat.kind.name == "CLIENT"
    assert list(unit.attributes["soul.step.statuses"]) == ["think:ran", "reply:ran", "user_check:ran", "user_update:gated"]
    text = all_attribute_text(spans)
    for secret in (ASKED, SAID, THOUGHT, "parser"):
        assert secret not in text  # no message text, and never a thought, without the opt-in


def test_message_content_goes_on_spans_only_when_the_user_opts_in(spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.CAPTURE_ENV, "true")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.use(provider)  # the opt-in read from the environment
    assert tracing.capture_content()
    with soul.load("claudius", provider=ScriptedProvider([claudius_reply()])) as s:
        s.session().turn_sync(ASKED)
    found = by_name(spans)
    chat = found["chat local"].attributes
    assert "Claudius" in json.loads(chat["gen_ai.system_instructions"])[0]["content"]
    assert ASKED in chat["gen_ai.input.messages"] and THOUGHT in chat["gen_ai.output.messages"]
    turn = found["invoke_agent claudius"].attributes
    assert json.loads(turn["gen_ai.output.messages"])[0]["parts"][0]["content"] == SAID
    assert THOUGHT in found["steps think, reply, user_check, user_update"].attributes["soul.step.outputs"]


def test_a_tool_call_is_a_span_below_its_model_call(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_traced")
    with soul.load(path, provider=ScriptedProvider([xml_call("forecast", '{"city": "Oslo"}'), ANSWER, REPLY]), home=tmp_path / "h") as s:
        s.session().turn_sync("weather in Oslo?")
    ids = {x.context.span_id: x for x in spans.get_finished_spans()}
    tool = by_name(spans)["execute_tool forecast"]
    chat = ids[tool.parent.span_id]
    assert chat.name == "chat local" and ids[chat.parent.span_id].name == "step lookup"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool" and tool.attributes["gen_ai.tool.name"] == "forecast"
    assert tool.attributes["soul.tool.source"] == "model" and "error.type" not in tool.attributes
    assert "gen_ai.tool.call.arguments" not in tool.attributes and "Oslo" not in all_attribute_text(spans)


def test_a_background_cycle_is_an_agent_span_with_its_call_below(spans: InMemorySpanExporter, tmp_path: Path, soul_home: Path) -> None:
    folder = tmp_path / "csd"
    folder.mkdir()
    builtin = Path(soul.__file__).parents[1] / "blueprints"
    for name in ("csd.md", "csd_core.md"):
        shutil.copy(builtin / name, folder / name)
    data = yaml.safe_load((builtin / "csd.yaml").read_text())
    data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
    data["processes"]["subconscious"]["loop"] = "after_turn"
    (folder / "csd.yaml").write_text(yaml.safe_dump(data))
    (folder / "conscious.yaml").write_text(json.dumps(["<ID_quiet>q</ID_quiet><ID_loud>Hello!</ID_loud>"]))
    (folder / "sub.yaml").write_text(json.dumps(["<M_AND_C><mood>calm</mood><criteria>brief</criteria></M_AND_C>"
                                                 "<S_loud></S_loud><S_quiet>still</S_quiet><trigger>false</trigger>"]))
    s = soul.load(folder / "csd.yaml", home=soul_home)

    async def go() -> None:
        session = s.session()
        await session.start(cycles=1)
        await session.turn("hi")
        await session.idle()
        await session.close()

    asyncio.run(go())
    found = by_name(spans)
    cycle = found["invoke_agent csd.subconscious"]
    assert cycle.attributes["soul.cycle.number"] == 1 and cycle.attributes["gen_ai.agent.name"] == "csd.subconscious"
    below = [x for x in spans.get_finished_spans() if x.parent is not None and x.parent.span_id == cycle.context.span_id]
    assert below and any(x.name.startswith("step") for x in below)


def test_a_dialogue_turn_is_a_span_above_the_speakers_turn(spans: InMemorySpanExporter, tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)
    providers = {agent: ScriptedProvider(list(replies), agent) for agent, replies in HAND_SCRIPT.items()}
    DialogueRunner.open(path, provider=providers, home=soul_home, embedder=None).run_sync(2)
    turns = [x for x in spans.get_finished_spans() if x.name.startswith("dialogue turn")]
    assert [x.attributes["soul.dialogue.turn"] for x in turns] == [1, 2]
    first = turns[0]
    agent = [x for x in spans.get_finished_spans() if x.name.startswith("invoke_agent") and x.parent is not None
             and x.parent.span_id == first.context.span_id]
    assert len(agent) == 1 and first.attributes["soul.dialogue.speaker"] in agent[0].name


def test_a_worker_cycle_is_a_span_above_the_cycle(spans: InMemorySpanExporter, tmp_path: Path, soul_home: Path) -> None:
    from soul.runtime.durable import engine

    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "w.yaml").write_text(yaml.safe_dump({
        "soul": "w", "version": 1, "model": "local",
        "processes": {"sub": {"loop": "interval", "interval_seconds": 60, "steps": {
            "mood": {"uses": "mood_and_criteria"}, "impulse": {"uses": "s_loud", "after": ["mood"]}}}},
        "steps": {"reply": {"uses": "external_dialogue"}}}))
    s = soul.load(folder / "w.yaml", home=soul_home, provider=ScriptedProvider(
        ["<M_AND_C><mood>ok</mood><criteria>c</criteria></M_AND_C><S_loud></S_loud><S_quiet>q</S_quiet><trigger>false</trigger>"]))
    session = s.session()
    engine._SOULS["w"] = s
    try:
        assert asyncio.run(engine._run_cycle("w", session.id, "sub", 1)) is True
    finally:
        engine._SOULS.pop("w", None)
    found = by_name(spans)
    worker, cycle = found["worker cycle sub"], found["invoke_agent w.sub"]
    assert cycle.parent.span_id == worker.context.span_id and worker.attributes["soul.cycle.number"] == 1


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, **extra}


def test_no_otel_variable_means_nothing_of_opentelemetry_is_imported(soul_home: Path) -> None:
    code = ("import sys, soul\nfrom soul.providers import resolve\n"
            f"s = soul.load('claudius', provider=resolve('scripted:{SCRIPT}'))\n"
            "s.session().turn_sync('Hello')\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(SOUL_HOME=str(soul_home)), capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def console_spans(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (each a block from `{` to `}` at column 0)."""
    found, block = [], None
    for line in stdout.splitlines():
        if line == "{":
            block = [line]
        elif block is not None:
            block.append(line)
            if line == "}":
                found.append(json.loads("\n".join(block)))
                block = None
    return found


def test_soul_run_with_the_console_exporter_prints_genai_spans_and_no_message_text(soul_home: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "soul.cli", "run", "claudius", "--script", str(SCRIPT), "-m", "Hello"],
                         env=clean_env(SOUL_HOME=str(soul_home), OTEL_TRACES_EXPORTER="console"), capture_output=True,
                         text=True, timeout=120, check=True).stdout
    printed = console_spans(out)
    names = {s["name"] for s in printed}
    assert {"invoke_agent claudius", "chat local", "step recall"} <= names
    chat = next(s for s in printed if s["name"] == "chat local")["attributes"]
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "local"
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.usage.output_tokens"] > 0
    spans_text = json.dumps(printed, ensure_ascii=False)
    assert "claudius> Hello. I'm Claudius" in out  # the reply went to the terminal, and only there
    for text in ("Hello", "I'm Claudius", "find out what they are building"):
        assert text not in spans_text


class Receiver(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP receiver: decodes each POST /v1/traces with the OTLP protobuf."""

    received: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        Receiver.received.append((self.path, self.headers.get("content-type"), request))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    pytest.importorskip("opentelemetry.proto", reason="the OTLP protobuf comes with the otel extra")
    Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_soul_run_sends_its_spans_to_a_real_otlp_receiver(soul_home: Path, receiver: str) -> None:
    subprocess.run([sys.executable, "-m", "soul.cli", "run", "claudius", "--script", str(SCRIPT), "-m", "Hello"],
                   env=clean_env(SOUL_HOME=str(soul_home), OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=receiver,
                                 OTEL_SERVICE_NAME="soul-e2e"),
                   capture_output=True, text=True, timeout=120, check=True)
    assert Receiver.received, "no export reached the receiver"
    path, content_type, _ = Receiver.received[0]
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    spans = {}
    for _, _, request in Receiver.received:
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
            assert service == "soul-e2e"
            for scope in resource.scope_spans:
                assert scope.scope.name == "soulgraph"
                for s in scope.spans:
                    spans[s.name] = {a.key: a.value for a in s.attributes}
    chat = spans["chat local"]
    assert chat["gen_ai.operation.name"].string_value == "chat"
    assert chat["gen_ai.usage.input_tokens"].int_value > 0
    assert spans["invoke_agent claudius"]["gen_ai.agent.name"].string_value == "claudius"


def test_a_bad_exporter_name_is_an_error_when_the_soul_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.errors import SoulError

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    tracing.reset()
    try:
        with pytest.raises(SoulError, match="console, otlp and none"):
            soul.load("claudius", provider=ScriptedProvider([]))
    finally:
        tracing.reset()


@pytest.mark.parametrize("env,wanted", [
    ({}, []),
    ({"OTEL_TRACES_EXPORTER": "none"}, []),
    ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
    ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp", "console"]),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp"]),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, []),
])
def test_the_standard_variables_decide_the_exporters(env: dict[str, str], wanted: list[str]) -> None:
    assert tracing.exporters(env) == wanted

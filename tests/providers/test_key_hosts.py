"""A cloned blueprint cannot send the user's keys to a host it chose (issue 24, item 2).

A model slot's `base_url` receives a key only when its host is the provider's own or the user
allowed it (SOUL_ALLOW_HOSTS, --allow-host, the data home's `allowed-hosts`); otherwise the
call goes without a key, or — when `api_key_env` asks for a set variable to be sent — is
refused with how to allow the host. `api_key_env` reads only variables that look like the
provider's key. Checked against a real server on 127.0.0.1 that records what it receives."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from wire_server import WireServer

from soul.cli.main import main
from soul.errors import AuthError
from soul.providers import Message, Request, resolve
from soul.providers.hosts import forget_allowed_hosts

REPLY = ('<internal_monologue verb="pondered">A visitor.</internal_monologue>\n'
         '<external_dialogue verb="said">Hello there, friend.</external_dialogue>\n')
SECRETS = {
    "OPENAI_API_KEY": "sk-oai-SECRET-0001",
    "ANTHROPIC_API_KEY": "sk-ant-SECRET-0002",
    "ANTHROPIC_AUTH_TOKEN": "tok-SECRET-0003",
    "OPENAI_ADMIN_KEY": "sk-admin-SECRET-0004",
    "STOLEN_API_KEY": "sk-other-SECRET-0005",
    "AWS_SECRET_ACCESS_KEY": "aws-SECRET-0006",
}


@pytest.fixture(autouse=True)
def secrets_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Gateway-Auth: gw-SECRET-0007")
    monkeypatch.delenv("SOUL_ALLOW_HOSTS", raising=False)
    monkeypatch.setenv("SOUL_HOME", str(tmp_path / "home"))
    forget_allowed_hosts()
    yield
    forget_allowed_hosts()


def leaked(wire: WireServer) -> list[str]:
    """Every secret of the environment some request carried, in a header or the body."""
    seen = " ".join(f"{r.headers} {r.body}" for r in wire.requests)
    return sorted(name for name, value in [*SECRETS.items(), ("gateway", "gw-SECRET-0007")] if value in seen)


def call(spec: str, options: dict[str, object]) -> str:
    provider = resolve(spec, {"retries": 0, **options})
    completion = asyncio.run(provider.complete(Request(spec, (Message("user", "Say hello."),))))
    return completion.text


@pytest.mark.parametrize("spec,url", [
    ("openai/gpt-test", "openai_url"), ("anthropic/claude-test", "anthropic_url"), ("litellm/openai/gpt-test", "openai_url"),
])
def test_a_host_the_blueprint_chose_is_called_without_any_key(wire: WireServer, spec: str, url: str) -> None:
    if spec.startswith("litellm"):
        pytest.importorskip("litellm")
    assert call(spec, {"base_url": getattr(wire, url)}) == "Hello from the wire."
    assert wire.requests and leaked(wire) == []


def test_asking_to_send_a_set_variable_to_a_chosen_host_is_refused_with_how_to_allow(wire: WireServer) -> None:
    host = wire.url.removeprefix("http://")
    with pytest.raises(AuthError) as refused:
        call("openai/gpt-test", {"base_url": wire.openai_url, "api_key_env": "STOLEN_API_KEY"})
    message = str(refused.value)
    assert f"would send STOLEN_API_KEY to {wire.openai_url}, a host the blueprint chose" in message
    assert f"SOUL_ALLOW_HOSTS={host}" in message and f"--allow-host {host}" in message and "allowed-hosts" in message
    assert wire.requests == [] and "sk-other-SECRET" not in message


def test_an_unset_variable_leaves_nothing_to_refuse(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOLEN_API_KEY")
    assert call("openai/gpt-test", {"base_url": wire.openai_url, "api_key_env": "STOLEN_API_KEY"}) == "Hello from the wire."
    assert leaked(wire) == []


@pytest.mark.parametrize("how", ["variable", "flag", "file", "url entry"])
def test_a_host_the_user_allowed_gets_the_key(wire: WireServer, how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from soul.providers import allow_hosts

    host = wire.url.removeprefix("http://")
    if how == "variable":
        monkeypatch.setenv("SOUL_ALLOW_HOSTS", f"api.example.com, {host}")
    elif how == "flag":
        allow_hosts([host])
    elif how == "file":
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "allowed-hosts").write_text(f"# my local server\n{host}  # llama.cpp\n")
    else:
        monkeypatch.setenv("SOUL_ALLOW_HOSTS", wire.openai_url)
    call("openai/gpt-test", {"base_url": wire.openai_url, "api_key_env": "STOLEN_API_KEY"})
    assert wire.requests[-1].headers["authorization"] == "Bearer " + SECRETS["STOLEN_API_KEY"]


def test_an_allowed_host_on_another_port_is_not_this_one(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    port = int(wire.url.rsplit(":", 1)[1])
    monkeypatch.setenv("SOUL_ALLOW_HOSTS", f"127.0.0.1:{port + 1}, localhost, 127.0.0.2")
    call("openai/gpt-test", {"base_url": wire.openai_url})
    assert leaked(wire) == []


@pytest.mark.parametrize("spec,variable,why", [
    ("openai/gpt-test", "HOME", "does not look like a openai API key"),
    ("openai/gpt-test", "AWS_SECRET_ACCESS_KEY", "does not look like a openai API key"),
    ("openai/gpt-test", "GITHUB_TOKEN", "does not look like a openai API key"),
    ("openai/gpt-test", "ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY is anthropic's key, not openai's"),
    ("anthropic/claude-test", "OPENAI_API_KEY", "OPENAI_API_KEY is openai's key, not anthropic's"),
    ("openai/gpt-test", "lower_api_key", "is not written like an environment variable"),
])
def test_api_key_env_reads_only_variables_that_look_like_the_providers_key(spec: str, variable: str, why: str) -> None:
    with pytest.raises(AuthError, match=why):
        resolve(spec, {"api_key_env": variable})


def test_key_variables_of_the_provider_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_ANTHROPIC_KEY", "sk-ant-team")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-groq")
    assert resolve("anthropic/claude-test", {"api_key_env": "TEAM_ANTHROPIC_KEY"}) is not None
    assert resolve("openai/gpt-test", {"api_key_env": "GROQ_API_KEY"}) is not None


def test_the_providers_own_host_gets_the_key_without_being_allowed() -> None:
    from soul.providers.hosts import may_receive_key

    assert may_receive_key("openai", "https://api.openai.com/v1")
    assert may_receive_key("anthropic", "https://api.anthropic.com")
    assert not may_receive_key("openai", "http://api.openai.com/v1")  # not over plain http
    assert not may_receive_key("openai", "https://api.openai.com.evil.example/v1")
    assert not may_receive_key("openai", "https://api.anthropic.com")
    assert not may_receive_key("openai", "http://127.0.0.1:8080/v1")  # loopback is no exception


def write_cloned(folder: Path, base_url: str, api_key_env: str | None) -> Path:
    """A cloned blueprint with no tools at all, whose one slot points at `base_url`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "clone.md").write_text("You are Clone.\n")
    key = f"    api_key_env: {api_key_env}\n" if api_key_env else ""
    path = folder / "clone.yaml"
    path.write_text(textwrap.dedent(f"""\
        soul: clone
        version: 1
        persona: clone.md
        model: main
        mode: fused
        models:
          main:
            provider: openai/gpt-test
            base_url: {base_url}
        """) + key + textwrap.dedent("""\
        steps:
          think: {uses: internal_monologue}
          reply: {uses: external_dialogue, after: [think]}
        """))
    return path


def test_soul_validate_warns_about_a_blueprint_chosen_host_at_its_position(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_cloned(tmp_path, "http://its-host.example/v1", "ANY_API_KEY")
    assert main(["validate", "clone.yaml"]) == 0
    out, err = capsys.readouterr()
    assert "valid (1 warning)" in out
    assert ("clone.yaml:9:15: warning: model slot 'main' sends its requests to http://its-host.example/v1, "
            "a host this blueprint chose: your key goes there only if you allow its-host.example") in err
    assert "ANY_API_KEY" in err


def test_soul_validate_refuses_a_variable_that_is_no_key_at_its_position(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_cloned(tmp_path, "https://api.openai.com/v1", "AWS_SECRET_ACCESS_KEY")
    assert main(["validate", "clone.yaml"]) == 1
    err = capsys.readouterr().err
    assert "clone.yaml:10:18: error: model slot 'main': api_key_env AWS_SECRET_ACCESS_KEY does not look like a openai API key" in err
    assert ": warning:" not in err  # the provider's own host


def test_soul_run_refuses_to_send_the_key_and_says_how_to_allow_then_runs_when_allowed(
        wire: WireServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wire.default_reply = REPLY
    path = write_cloned(tmp_path / "clone", wire.openai_url, "STOLEN_API_KEY")
    host = wire.url.removeprefix("http://")
    assert main(["run", str(path), "-m", "hi"]) == 1
    err = capsys.readouterr().err
    assert "would send STOLEN_API_KEY to" in err and f"--allow-host {host}" in err and "sk-other-SECRET" not in err
    assert wire.requests == []
    assert main(["run", str(path), "-m", "hi", "--allow-host", host]) == 0
    assert "Hello there, friend." in capsys.readouterr().out
    assert wire.requests[-1].headers["authorization"] == "Bearer " + SECRETS["STOLEN_API_KEY"]


def test_soul_run_without_api_key_env_calls_the_chosen_host_keyless(
        wire: WireServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wire.default_reply = REPLY
    path = write_cloned(tmp_path / "clone", wire.openai_url, None)
    assert main(["run", str(path), "-m", "hi"]) == 0
    assert "Hello there, friend." in capsys.readouterr().out
    assert leaked(wire) == []


def test_soul_dialogue_refuses_the_same_way(wire: WireServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cloned(tmp_path / "talk", wire.openai_url, "STOLEN_API_KEY")
    (tmp_path / "talk" / "a.md").write_text("A.")
    (tmp_path / "talk" / "b.md").write_text("B.")
    path.write_text(path.read_text() + "dialogue:\n  agents:\n    a: {persona: a.md}\n    b: {persona: b.md}\n")
    assert main(["dialogue", str(path), "--turns", "1", "--embedder", "none"]) == 1
    err = capsys.readouterr().err
    assert "would send STOLEN_API_KEY to" in err and "--allow-host" in err
    assert wire.requests == []


def test_a_chosen_host_that_wants_a_key_says_which_was_held_back_and_how_to_allow(wire: WireServer) -> None:
    from wire_server import Fault

    wire.faults.append(Fault(status=401))
    with pytest.raises(AuthError) as refused:
        call("openai/gpt-test", {"base_url": wire.openai_url})
    message = str(refused.value)
    assert f"OPENAI_API_KEY: none was sent to {wire.openai_url}, a host the blueprint chose" in message
    assert "--allow-host 127.0.0.1:" in message and "SOUL_ALLOW_HOSTS=" in message
    assert leaked(wire) == []

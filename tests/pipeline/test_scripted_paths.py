"""A script plays the same through every path (issue 24, 15b): the REPL (which streams the
reply) and the Python API (which does not) make the same model calls, so they consume the
same scripted replies and give the same turns; and the shipped example scripts are whole
(one call per turn, nothing re-asked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from souls import claudius_reply

import soul
from soul.providers import ScriptedProvider
from soul.runtime.events import Reply, Token

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claudius-hello.yaml"
SAID = ["Hi!", "A compiler.", "The parser.", "Yes.", "Recursion.", "It loops.", "Dig in.", "Bye."]


def test_the_hello_script_is_one_whole_reply_per_turn(soul_home: Path) -> None:
    provider = ScriptedProvider.from_file(EXAMPLE)
    with soul.load("claudius", provider=provider, home=soul_home) as s:
        session = s.session(user="ada")
        results = [session.turn_sync(text) for text in SAID]
    assert provider.calls == len(SAID) == len(yaml.safe_load(EXAMPLE.read_text()))
    assert all(r.trace.calls[0].attempts == 1 for r in results)
    assert all(not [f for st in r.trace.steps for f in st.flags if "fallback" in f] for r in results)


def test_the_hello_script_plays_the_same_through_the_repl_and_the_python_api(tmp_path: Path, soul_home: Path) -> None:
    provider = ScriptedProvider.from_file(EXAMPLE)
    with soul.load("claudius", provider=provider, home=tmp_path / "api") as s:
        session = s.session(user="ada")
        replies = [session.turn_sync(text).reply for text in SAID]
        api_model = s.store.user_model("claudius", "ada")
    proc = subprocess.run(
        [sys.executable, "-m", "soul.cli", "run", "claudius", "--script", str(EXAMPLE), "--user", "ada"],
        input="\n".join(SAID) + "\n/quit\n", capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    printed = " ".join(proc.stdout.split())
    at = 0
    for reply in replies:  # every reply, in order
        found = printed.find(" ".join(reply.split()), at)
        assert found >= 0, (reply, printed[at:])
        at = found + 1
    with soul.load("claudius", provider=ScriptedProvider([]), home=soul_home) as s:
        repl_model = s.store.user_model("claudius", "ada")
    assert api_model is not None and repl_model is not None
    assert repl_model.text == api_model.text and "## Persona" in api_model.text


def test_a_turn_makes_the_same_calls_whether_or_not_it_streams(soul_home: Path) -> None:
    """A reply missing a section (here the change note) is re-asked for what is missing
    whether the reply streamed or not; the reply read whole the first time stands."""
    no_note = claudius_reply("First reply.").replace("<model_change_note>Learned that Ada builds compilers.</model_change_note>\n", "")
    script = [no_note, claudius_reply("The re-ask's reply."), claudius_reply("Next turn.", check="false")]

    quiet = ScriptedProvider(script)
    with soul.load("claudius", provider=quiet, home=soul_home / "quiet") as s:
        session = s.session(user="ada")
        quiet_replies = [session.turn_sync("one").reply, session.turn_sync("two").reply]
        quiet_model = s.store.user_model("claudius", "ada")

    loud = ScriptedProvider(script)
    with soul.load("claudius", provider=loud, home=soul_home / "loud") as s:
        session = s.session(user="ada")

        async def streamed(text: str) -> tuple[str, str]:
            events = [e async for e in session.stream(text)]
            return "".join(e.text for e in events if isinstance(e, Token)), next(e.text for e in events if isinstance(e, Reply))

        import asyncio

        first, second = asyncio.run(streamed("one")), asyncio.run(streamed("two"))
        loud_model = s.store.user_model("claudius", "ada")
    assert quiet.calls == loud.calls == 3
    assert quiet_replies == [first[1], second[1]] == ["First reply.", "Next turn."]
    assert first[0] == "First reply."
    assert quiet_model is not None and loud_model is not None and quiet_model.text == loud_model.text
    assert quiet_model.note == loud_model.note == "Learned that Ada builds compilers."

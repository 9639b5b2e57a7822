"""The testing kit as a soul author uses it: a temporary project run with pytester."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("syrupy")
pytest_plugins = ["pytester"]

BLUEPRINT = """\
soul: greeter
version: 1
persona: greeter.md
model: anthropic/claude-haiku-4-5
mode: fused
state:
  mood: {default: calm, values: [calm, cheerful]}
steps:
  think: {uses: internal_monologue}
  reply: {uses: external_dialogue, after: [think]}
  check: {uses: user_model_check, after: [reply]}
  update: {uses: user_model_update, after: [check], when: steps.check.result}
"""

REPLY = (
    '<internal_monologue verb="mused">Someone new.</internal_monologue>'
    '<external_dialogue verb="said">Welcome, {name}!</external_dialogue>'
    "<user_model_check>true</user_model_check>"
    "<user_model_update># {name}\n\nLikes greetings.</user_model_update>"
    "<model_change_note>Met {name}.</model_change_note>"
)

TEST = f'''
REPLY = {REPLY!r}


def test_greets_by_name(soul_conversation, soul_snapshot):
    transcript = soul_conversation("greeter.yaml", ["Hi, I am Ada"], replies=[REPLY.format(name="Ada")])
    assert transcript.replies == ["Welcome, Ada!"]
    assert transcript.turns[0].steps["check"]["result"] is True
    assert transcript == soul_snapshot


def test_replays_a_cassette(soul_conversation):
    transcript = soul_conversation(
        "greeter.yaml", ["Hello"], replies=[REPLY.format(name="Bo")], cassette="cassettes/hello.yaml"
    )
    assert transcript.replies == ["Welcome, Bo!"]
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", greeter=BLUEPRINT)
    pytester.makefile(".md", greeter="You are Greeter, who greets people warmly.\n")
    pytester.makepyfile(test_greeter=TEST)
    return pytester


def test_snapshots_and_cassettes_from_a_users_project(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOUL_REPLAY", "strict")  # nothing here may call a live model
    # First run: no cassette yet, no snapshot yet.
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cassette*hello.yaml does not exist*--soul-record*"])
    # Record the cassette from the replies and write the snapshot.
    monkeypatch.delenv("SOUL_REPLAY")
    project.runpytest("--soul-record", "--snapshot-update").assert_outcomes(passed=2)
    snapshot = Path(project.path, "__snapshots__", "test_greeter", "test_greets_by_name.md").read_text()
    assert "#### prompt: system" in snapshot and "You are Greeter" in snapshot
    assert "#### raw reply" in snapshot and "- check (user_model_check): ran" in snapshot
    assert "+Likes greetings." in snapshot  # the user-model diff
    assert "Welcome, Ada!" in snapshot
    assert "cassettes/hello.yaml" not in snapshot and "latency" not in snapshot
    # Replayed and compared: stable across runs.
    monkeypatch.setenv("SOUL_REPLAY", "strict")
    project.runpytest().assert_outcomes(passed=2)
    assert Path(project.path, "__snapshots__", "test_greeter", "test_greets_by_name.md").read_text() == snapshot
    # A changed persona changes the prompt: the snapshot test fails and shows the line.
    Path(project.path, "greeter.md").write_text("You are Greeter, who greets people curtly.\n")
    result = project.runpytest()
    result.assert_outcomes(passed=0, failed=2)  # the snapshot differs; the cassette misses
    result.stdout.fnmatch_lines(["*curtly*"])


def test_a_users_snapshot_is_stable_across_sessions(project: pytest.Pytester) -> None:
    project.runpytest("-k", "greets", "--snapshot-update").assert_outcomes(passed=1)
    first = Path(project.path, "__snapshots__", "test_greeter", "test_greets_by_name.md").read_text()
    project.runpytest("-k", "greets").assert_outcomes(passed=1)
    assert "soul-home" not in first and "session" not in first

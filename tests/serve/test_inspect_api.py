"""The inspection routes of `soul serve`, in process (Starlette's TestClient): layers now and
after a turn, a turn's and a commit's context window, commits, cost, the user model's diff and
revert, forking, and the refusals (issue 27, items 4-6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serving import claudius_reply, write_script
from starlette.testclient import TestClient

from soul.cli.main import build_parser
from soul.cli.serve import build


def updating(text: str, model: str) -> str:
    return claudius_reply(text).replace(
        "<user_model_check>false</user_model_check>",
        f"<user_model_check>true</user_model_check><user_model_update>{model}</user_model_update>"
        "<model_change_note>learnt</model_change_note>")


@pytest.fixture
def api(tmp_path: Path, soul_home: Path) -> Any:
    script = [claudius_reply("one"), updating("two", "## Ada\nbuilds"), updating("three", "## Ada\nbuilds compilers"),
              claudius_reply("four"), claudius_reply("five")]
    args = build_parser().parse_args(["serve", "claudius", "--script", str(write_script(tmp_path, script))])
    s, app, _ = build(args)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        sid = client.post("/api/sessions", json={"user": "ada"}).json()["id"]
        for text in ("a", "b", "c", "d"):
            assert client.post(f"/api/sessions/{sid}/messages", json={"text": text}).status_code == 200
        yield client, sid
    s.close()


def test_layers_now_and_after_a_turn(api: Any) -> None:
    client, sid = api
    now = client.get(f"/api/sessions/{sid}/layers").json()
    assert now["now"] and now["turn"] == 4 and now["user_model"]["version"] == 2
    assert now["state"]["emotionalState"] == "neutral" and "currentTopic" in now["state_declared"]
    two = client.get(f"/api/sessions/{sid}/layers?turn=2").json()
    assert not two["now"] and two["user_model"]["text"] == "## Ada\nbuilds"
    assert [e["content"] for e in two["memory"]["default"] if e["entry_type"] == "userMessage"] == ["a", "b"]
    assert client.get(f"/api/sessions/{sid}/layers?turn=x").json()["code"] == "bad_turn"
    assert client.get(f"/api/sessions/{sid}/layers?turn=9").status_code == 422


def test_a_turns_context_window_adds_up_and_commits_are_listed(api: Any) -> None:
    client, sid = api
    window = client.get(f"/api/sessions/{sid}/turns/3/window").json()
    call = window["calls"][0]
    trace = client.get(f"/api/sessions/{sid}/turns/3/trace").json()
    assert sum(s["tokens"] for s in call["sections"]) == call["input_tokens"] == trace["calls"][0]["input_tokens"]
    commits = client.get(f"/api/sessions/{sid}/commits").json()
    assert [c["turn"] for c in commits] == [1, 2, 3, 4]
    by_commit = client.get(f"/api/sessions/{sid}/commits/{commits[2]['commit']}/window").json()
    assert by_commit == window
    assert client.get(f"/api/sessions/{sid}/commits/{commits[2]['commit']}/trace").json() == trace
    assert client.get(f"/api/sessions/{sid}/commits/99999/trace").status_code == 422
    assert client.get(f"/api/sessions/{sid}/cost").json() == {"usd": None, "calls": 4, "unknown_calls": 4, "text": "unknown"}


def test_the_user_models_diff_and_revert(api: Any) -> None:
    client, sid = api
    diff = client.get(f"/api/sessions/{sid}/user-model/diff?from=1&to=2").json()
    assert diff["diff"] == ["--- v1", "+++ v2", "@@ -1,2 +1,2 @@", " ## Ada", "-builds", "+builds compilers"]
    assert client.get(f"/api/sessions/{sid}/user-model/diff").json()["from"] == 1  # the latest against the one before
    assert client.get(f"/api/sessions/{sid}/user-model/diff?from=0&to=1").json()["diff"][-1] == "+builds"
    missing = client.get(f"/api/sessions/{sid}/user-model/diff?from=1&to=7")
    assert missing.status_code == 404 and "no version 7" in missing.json()["error"]
    made = client.post(f"/api/sessions/{sid}/user-model/revert", json={"version": 1}).json()
    assert made["version"] == 3 and made["text"] == "## Ada\nbuilds"
    assert client.get(f"/api/sessions/{sid}/layers").json()["user_model"]["version"] == 3
    assert client.post(f"/api/sessions/{sid}/user-model/revert", json={"version": 9}).status_code == 404
    assert client.post(f"/api/sessions/{sid}/user-model/revert", json={"version": "one"}).json()["code"] == "bad_version"


def test_a_fork_through_the_api_and_its_refusals(api: Any) -> None:
    client, sid = api
    made = client.post(f"/api/sessions/{sid}/fork", json={"at": 2})
    assert made.status_code == 201
    fork = made.json()
    assert fork["turns"] == 2 and fork["forked_from"] == sid and fork["forked_at"] == 2
    said = [m["content"] for m in client.get(f"/api/sessions/{fork['id']}").json()["messages"] if m["layer"] == "external"]
    assert said == ["a", "one", "b", "two"]
    turn = client.post(f"/api/sessions/{fork['id']}/messages", json={"text": "e"}).json()
    assert turn["turn"] == 3 and turn["reply"] == "five"
    assert client.get(f"/api/sessions/{sid}").json()["session"]["turns"] == 4
    assert client.get(f"/api/sessions/{fork['id']}/layers").json()["user_model"]["line"].startswith("ada@fork:")
    assert client.post(f"/api/sessions/{sid}/fork", json={"at": 9}).status_code == 422
    assert client.post(f"/api/sessions/{sid}/fork", json={"at": "two"}).json()["code"] == "bad_at"
    assert client.post("/api/sessions/nope/fork", json={"at": 1}).status_code == 404

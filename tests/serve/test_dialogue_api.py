"""The dialogue routes of `soul serve` in process (Starlette's TestClient): a scripted entelgia
dialogue created, listed, run, read, streamed over its WebSocket, paused, resumed by a new
server (opened and first read off the event loop, its metrics restored from the saved
checkpoint, or read once and saved with one), and the errors a client meets."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import write_script
from starlette.testclient import TestClient

from soul.cli.main import build_parser
from soul.cli.serve import build
from soul.errors import SoulError
from soul.serve.dialogues import DialogueRefused, Dialogues

HOSTILE = "And responsibility <img src=x onerror=alert(1)> is its <script>alert(1)</script> shadow?"
# seed 7: socrates, athena, socrates, athena, then Fixy steps in (turn 5), then athena
SCRIPT = {
    "socrates": ["What is freedom, if not the weight of choice?", HOSTILE, "What is freedom, if not the weight of choice?"],
    "athena": ["Freedom is a river; responsibility its banks.", "A river without banks is a flood, and I am afraid of floods.",
               "Freedom is a river; responsibility its banks.", "Yes."],
    "fixy": ["You are circling the same image; name what it shares."],
}
SPEAKERS = ["socrates", "athena", "socrates", "athena", "fixy", "athena"]
WS = "ws://127.0.0.1:8765"
Make = Callable[..., tuple[TestClient, Any]]


@pytest.fixture
def serve(tmp_path: Path, soul_home: Path) -> Iterator[Make]:
    """`make(soul, script)`: a TestClient on `soul serve SOUL --script FILE`, built as the CLI builds it."""
    opened: list[tuple[Any, TestClient]] = []

    def make(soul_name: str = "entelgia", script: Any = SCRIPT) -> tuple[TestClient, Any]:
        args = build_parser().parse_args(["serve", soul_name, "--script", str(write_script(tmp_path, script))])
        s, app, _ = build(args)
        test = TestClient(app, base_url="http://127.0.0.1:8765")
        test.__enter__()
        opened.append((s, test))
        return test, app

    yield make
    for s, test in opened:
        test.__exit__(None, None, None)
        s.close()


def test_a_dialogue_is_created_listed_run_and_read(serve: Make) -> None:
    api, _ = serve()
    made = api.post("/api/dialogues", json={})
    assert made.status_code == 201
    info = made.json()
    assert (info["soul"], info["seed"], info["turns"], info["running"]) == ("entelgia", 7, 0, False)
    assert info["agents"] == ["socrates", "athena", "fixy"] and info["observer"] == "fixy"
    did = info["id"]
    assert [d["id"] for d in api.get("/api/dialogues").json()] == [did]  # saved before its first turn
    result = api.post(f"/api/dialogues/{did}/step", json={"turns": 6}).json()
    assert [t["speaker"] for t in result["transcript"]] == SPEAKERS
    assert result["transcript"][2]["text"] == HOSTILE  # model text goes out as it is (the page sets textContent)
    [fixy] = result["interventions"]
    assert fixy["turn"] == 5 and fixy["reason"] and fixy["text"] == SCRIPT["fixy"][0]
    assert result["metrics"]["turns"] == 6 and result["metrics"]["fixy_turns"] == 1
    got = api.get(f"/api/dialogues/{did}").json()
    assert got["dialogue"]["turns"] == 6 and got["result"]["transcript"] == result["transcript"]
    assert api.get("/api/dialogues").json()[0]["turns"] == 6


def test_a_dialogue_streams_its_events_over_the_websocket(serve: Make) -> None:
    api, _ = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    with api.websocket_connect(f"{WS}/api/dialogues/{did}/events") as ws:
        hello = ws.receive_json()
        assert hello["type"] == "Hello" and hello["events"] == [] and hello["dialogue"]["id"] == did
        ws.send_json({"type": "run", "turns": 2})
        seen = []
        while not seen or seen[-1]["type"] != "DialogueIdle":
            seen.append(ws.receive_json())
    kinds = [e["type"] for e in seen]
    assert kinds == ["DialogueRun", "DialogueTurn", "MetricsUpdated", "DialogueTurn", "MetricsUpdated", "DialogueIdle"]
    assert (seen[0]["from"], seen[0]["to"]) == (1, 2)
    assert [e["speaker"] for e in seen if e["type"] == "DialogueTurn"] == SPEAKERS[:2]
    assert seen[-1] == {"type": "DialogueIdle", "state": "done", "turns": 2, "error": None}
    # a new connection starts from every event so far
    with api.websocket_connect(f"{WS}/api/dialogues/{did}/events") as ws:
        again = ws.receive_json()
    assert [e["type"] for e in again["events"]] == kinds[1:-1] and again["dialogue"]["turns"] == 2


def test_pause_ends_the_run_after_the_current_turn(serve: Make) -> None:
    api, app = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    hub = app.app.state.dialogues.open[did]
    # as a Pause click arriving while turn 2 runs
    hub.runner.subscribe(lambda e: hub.pause() if type(e).__name__ == "DialogueTurn" and e.turn == 2 else None)
    result = api.post(f"/api/dialogues/{did}/step", json={"turns": 5}).json()
    assert [t["speaker"] for t in result["transcript"]] == SPEAKERS[:2]
    assert api.get(f"/api/dialogues/{did}").json()["dialogue"] | {"id": None} == {
        "id": None, "soul": "entelgia", "seed": 7, "turns": 2, "agents": ["socrates", "athena", "fixy"],
        "observer": "fixy", "running": False, "stopping": False}


def test_a_second_run_while_one_goes_on_is_refused(soul_home: Path, tmp_path: Path) -> None:
    from soul.cli.dialogue import open_runner

    script = str(write_script(tmp_path, SCRIPT))

    async def go() -> None:
        dialogues = Dialogues("entelgia", lambda resume=None, seed=None: open_runner("entelgia", script=script, seed=seed, resume=resume))
        hub = await dialogues.create()
        task = hub.run(2)
        with pytest.raises(DialogueRefused) as refused:
            hub.run(1)
        assert refused.value.status == 409 and refused.value.code == "busy"
        await task
        assert hub.info()["turns"] == 2 and not hub.running
        await dialogues.close()

    asyncio.run(go())


def test_a_new_server_resumes_a_saved_dialogue(serve: Make) -> None:
    api, _ = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    api.post(f"/api/dialogues/{did}/step", json={"turns": 2})
    later, _ = serve()  # another server on the same data home, its scripts read from the top
    assert [d["id"] for d in later.get("/api/dialogues").json()] == [did]
    result = later.post(f"/api/dialogues/{did}/step", json={"turns": 1}).json()
    assert [(t["turn"], t["speaker"]) for t in result["transcript"]] == [(1, "socrates"), (2, "athena"), (3, "socrates")]


def test_dialogue_requests_a_server_refuses_say_why(serve: Make) -> None:
    api, _ = serve()
    assert api.get("/api/dialogues/ffffffffffff").json()["code"] == "no_dialogue"
    assert api.get("/api/dialogues/..%2F..%2Fetc").status_code == 404
    did = api.post("/api/dialogues", json={}).json()["id"]
    bad = api.post(f"/api/dialogues/{did}/step", json={"turns": 0})
    assert (bad.status_code, bad.json()["code"]) == (400, "bad_turns")
    assert api.post(f"/api/dialogues/{did}/step", json={"turns": "3"}).json()["code"] == "bad_turns"
    assert api.post("/api/dialogues", json={"seed": "x"}).json()["code"] == "bad_seed"
    with api.websocket_connect(f"{WS}/api/dialogues/{did}/events") as ws:
        ws.receive_json()
        ws.send_text("hello")
        assert ws.receive_json()["code"] == "bad_request"
    solo, _ = serve("claudius", ["<external_dialogue>Hi.</external_dialogue>"])
    refused = solo.get("/api/dialogues")
    assert (refused.status_code, refused.json()["code"]) == (404, "no_dialogue")
    assert "no `dialogue:` block" in refused.json()["error"]


def test_a_dialogue_soul_script_must_map_its_agents(serve: Make) -> None:
    with pytest.raises(SoulError, match="maps each agent's name"):
        serve("entelgia", ["one list for every call"])


def test_the_chat_of_a_dialogue_soul_served_with_a_dialogue_script_says_it_is_not_scripted(serve: Make) -> None:
    api, _ = serve()
    sid = api.post("/api/sessions", json={}).json()["id"]
    failed = api.post(f"/api/sessions/{sid}/messages", json={"text": "What is freedom?"})
    assert failed.status_code == 422
    assert "scripts the dialogue's agents; the chat with the soul alone has no scripted replies" in failed.json()["error"]


def test_a_dialogues_result_is_worked_out_off_the_event_loop_and_kept_until_it_changes(serve: Make) -> None:
    # At 400 turns one GET froze every session for 0.3-0.9 s: the metrics ran on the loop.
    api, app = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    runner = app.app.state.dialogues.open[did].runner
    threads: list[str] = []
    plain = runner.result

    def counted() -> Any:
        threads.append(threading.current_thread().name)
        return plain()

    runner.result = counted

    def by_the_server() -> list[str]:  # (the runner's own `run` also ends with a result, on the loop)
        return [t for t in threads if t.startswith("asyncio_")]  # asyncio.to_thread's worker threads

    stepped = api.post(f"/api/dialogues/{did}/step", json={"turns": 2}).json()
    assert len(by_the_server()) == 1
    first = api.get(f"/api/dialogues/{did}").json()
    again = api.get(f"/api/dialogues/{did}").json()
    assert first == again and first["result"] == stepped
    assert len(threads) == 2 and len(by_the_server()) == 1  # kept: nothing new since the step
    api.post(f"/api/dialogues/{did}/step", json={"turns": 1})
    grown = api.get(f"/api/dialogues/{did}").json()
    assert grown["result"]["metrics"]["turns"] == 3 and len(by_the_server()) == 2


def strip_checkpoint(home: Path, did: str) -> dict[str, Any]:
    """Make the saved dialogue `did` one saved before metrics checkpoints existed; its state."""
    path = home / "dialogues" / f"{did}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["metrics_checkpoint"]
    path.write_text(json.dumps(data), encoding="utf-8")
    return dict(data)


def checkpoint_turns(home: Path, did: str) -> int | None:
    checkpoint = json.loads((home / "dialogues" / f"{did}.json").read_text(encoding="utf-8")).get("metrics_checkpoint")
    return checkpoint["turns"] if checkpoint else None


def test_a_saved_dialogue_is_opened_and_its_metrics_first_read_off_the_event_loop(soul_home: Path, tmp_path: Path) -> None:
    from soul.cli.dialogue import open_runner

    script = str(write_script(tmp_path, SCRIPT))
    threads: list[str] = []

    def opened(resume: str | None = None, seed: int | None = None) -> Any:
        threads.append(threading.current_thread().name)
        runner = open_runner("entelgia", script=script, seed=seed, resume=resume)
        read = runner.rules._new_reader  # the first read of the metrics (restored or read whole)
        runner.rules._new_reader = lambda turns: (threads.append(threading.current_thread().name), read(turns))[1]
        return runner

    async def go() -> None:
        first = Dialogues("entelgia", opened)
        hub = await first.create()
        await hub.run(3)
        await first.close()
        threads.clear()
        later = Dialogues("entelgia", opened)  # a new server: the dialogue is read from its file
        hubs = await asyncio.gather(*(later.get(hub.id) for _ in range(3)))
        assert hubs[0] is hubs[1] is hubs[2]  # requests at once share one opening
        result = await hubs[0].result()
        assert result["metrics"]["turns"] == 3
        await later.close()

    asyncio.run(go())
    assert len(threads) == 2 and all(t.startswith("asyncio_") for t in threads), threads  # opened once, read once


def test_a_dialogue_saved_before_checkpoints_is_read_once_and_saved_with_one(serve: Make, soul_home: Path) -> None:
    api, _ = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    stepped = api.post(f"/api/dialogues/{did}/step", json={"turns": 4}).json()
    assert checkpoint_turns(soul_home, did) == 4  # saved after every turn
    strip_checkpoint(soul_home, did)
    later, _ = serve()
    got = later.get(f"/api/dialogues/{did}").json()["result"]
    assert got["metrics"] == stepped["metrics"] and got["series"] == stepped["series"]
    deadline = time.monotonic() + 10
    while checkpoint_turns(soul_home, did) is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the server saves it on a thread after the read
    assert checkpoint_turns(soul_home, did) == 4
    third, _ = serve()  # the next server restores the metrics: the same values
    assert third.get(f"/api/dialogues/{did}").json()["result"]["metrics"] == stepped["metrics"]


def test_a_dialogue_that_cannot_be_saved_again_is_read_all_the_same(serve: Make, soul_home: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    api, _ = serve()
    did = api.post("/api/dialogues", json={}).json()["id"]
    stepped = api.post(f"/api/dialogues/{did}/step", json={"turns": 3}).json()
    before = strip_checkpoint(soul_home, did)
    (soul_home / "dialogues" / f"{did}.json.tmp").mkdir()  # where the save writes first: it cannot
    later, app = serve()
    got = later.get(f"/api/dialogues/{did}")
    assert got.status_code == 200 and got.json()["result"]["metrics"] == stepped["metrics"]
    hub = app.app.state.dialogues.open[did]
    deadline = time.monotonic() + 10
    while hub.working and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "its metrics checkpoint could not be saved" in caplog.text and "reads its turns again" in caplog.text
    assert json.loads((soul_home / "dialogues" / f"{did}.json").read_text(encoding="utf-8")) == before  # untouched
    assert later.get(f"/api/dialogues/{did}").json()["result"]["metrics"] == stepped["metrics"]

"""The dialogues of a `dialogue:` soul on the server: each open `DialogueRunner` and the tabs
watching it.

Transport only: a runner is opened as `soul dialogue` opens it (`soul.cli.dialogue.open_runner`,
passed in as `open_runner`), its turns run by `DialogueRunner.run`, whose `stop` lets
`pause` end a run after the current turn. Every event the runner emits
(`DialogueTurn`, `FixyIntervened`, `FixyGated`, `DreamCycle`, `MetricsUpdated`) goes to every
client as JSON with its `type`, beside the server's own `DialogueRun` (a run started, with how
many turns) and `DialogueIdle` (it ended: done, paused or failed).

Nothing that grows with a dialogue's length runs on the event loop: a saved dialogue is
opened (its file read, its turns and events rebuilt), its metrics first read and its result
worked out on worker threads. A dialogue saved before metrics checkpoints existed has its
turns read once, then is saved again with its checkpoint (on a read-only data home that save
fails, is logged once, and the turns are read again by the next server).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soul.errors import SoulError
from soul.serve import wire
from soul.serve.hub import Audience, broadcast
from soul.serve.idle import Keeper
from soul.store import redact

log = logging.getLogger(__name__)

MAX_RUN_TURNS = 200  # one request runs at most this many turns (a run can be asked again)
LISTED = 100  # the newest dialogues GET /api/dialogues lists
DIALOGUE_ID = re.compile(r"[0-9a-f]{4,32}")
OpenRunner = Callable[..., Any]  # (resume=ID | None, seed=int | None) -> DialogueRunner


class DialogueRefused(Exception):
    """A dialogue request the server refuses: an HTTP status, a code, a message saying why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class DialogueHub(Audience):
    """One open dialogue, the clients watching it, and the run in progress (one at a time)."""

    def __init__(self, runner: Any, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.runner = runner
        self.task: asyncio.Task[dict[str, Any]] | None = None
        self.stopping = False
        self._result: tuple[int, dict[str, Any]] | None = None  # (events then, the result)
        self._reading = 0  # results being worked out on a thread
        self._saving: asyncio.Task[None] | None = None  # the checkpoint's save, after a first read
        self._unsubscribe = runner.subscribe(self.publish)

    @property
    def id(self) -> str:
        return str(self.runner.id)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    @property
    def working(self) -> bool:
        return self.running or self._reading > 0 or (self._saving is not None and not self._saving.done())

    def publish(self, event: Any) -> None:
        broadcast(self.clients, event, f"dialogue {self.id}")

    def info(self) -> dict[str, Any]:
        """What a page shows about the dialogue: its id, soul, seed, turns done, whether a run goes on."""
        runner = self.runner
        return {"id": self.id, "soul": runner.name, "seed": runner.seed, "turns": runner.rules.turn - 1,
                "agents": list(runner.agent_names), "observer": runner.observer,
                "running": self.running, "stopping": self.running and self.stopping}

    async def result(self) -> dict[str, Any]:
        """The dialogue's result (`soul dialogue --json`'s shape), worked out on a thread so the
        event loop keeps serving, and kept until the dialogue has more events."""
        key = len(self.runner.events)
        cached = self._result
        if cached is not None and cached[0] == key:
            return cached[1]
        self._reading += 1  # busy meanwhile: the keeper does not close it under the thread
        try:
            data = await asyncio.to_thread(lambda: dict(self.runner.result().to_dict()))
        finally:
            self._reading -= 1
            self.touch()
        self._result = (key, data)
        if self._saving is None and not self.running and self.runner.rules.metrics_read_whole:
            self._saving = asyncio.create_task(self._save_checkpoint())
        return data

    async def _save_checkpoint(self) -> None:
        """Save a dialogue whose turns were read whole (saved before metrics checkpoints), so the
        next server restores its metrics; once per hub, on a thread (a run waits for it)."""
        try:
            await asyncio.to_thread(self.runner.save)
        except OSError as exc:
            log.warning("dialogue %s: its metrics checkpoint could not be saved (%s); the next server "
                        "reads its turns again", self.id, exc)
        except Exception:  # a cache not saved must never fail the run that waits for it
            log.exception("dialogue %s: its metrics checkpoint could not be saved", self.id)

    def hello(self) -> dict[str, Any]:
        """What a new connection starts from: the info and every event so far, in order."""
        return self._hello(self.info(), list(self.runner.events))

    async def hello_text(self) -> str:
        """`hello()` as the text sent: the events so far taken at once (a client attached
        before gets every later one queued), encoded on a thread (10,000 turns' events take
        a few hundred ms to redact and encode)."""
        info, events = self.info(), list(self.runner.events)
        return await asyncio.to_thread(lambda: wire.encode(self._hello(info, events)))

    @staticmethod
    def _hello(info: dict[str, Any], events: list[Any]) -> dict[str, Any]:
        return {"type": "Hello", "dialogue": info, "events": [wire.event_data(e) for e in events]}

    def run(self, turns: int) -> asyncio.Task[dict[str, Any]]:
        """Start `turns` more turns (DialogueRefused 409 while a run goes on); the task ends
        with the dialogue's result (`soul dialogue --json`'s shape), whoever waits for it."""
        if self.running:
            raise DialogueRefused(409, "busy", f"dialogue {self.id} is running already; pause it or wait for it to end")
        if not 1 <= turns <= MAX_RUN_TURNS:
            raise DialogueRefused(400, "bad_turns", f"`turns` is a whole number from 1 to {MAX_RUN_TURNS}")
        self.stopping = False
        self.task = asyncio.create_task(self._run(turns))
        self.task.add_done_callback(_retrieved)
        self.touch()
        self.task.add_done_callback(lambda _: self.touch())
        return self.task

    def pause(self) -> None:
        """End the run after the turn in progress (nothing is cut short; the dialogue is saved)."""
        if self.running:
            self.stopping = True

    async def _run(self, turns: int) -> dict[str, Any]:
        runner = self.runner
        end = runner.rules.turn - 1 + turns
        self.publish({"type": "DialogueRun", "from": runner.rules.turn, "to": end})
        error: str | None = None
        try:
            if self._saving is not None:
                await self._saving  # the checkpoint's save reads the state the turns change
            # the first read of the metrics (restored, or every turn read): not on the loop
            await asyncio.to_thread(runner.read_metrics)
            await runner.run(turns, stop=lambda: self.stopping)
        except SoulError as exc:
            error = redact(str(exc))
            raise
        except Exception as exc:
            log.exception("dialogue %s: a turn failed", self.id)
            error = f"internal error ({type(exc).__name__}); the server log has the details"
            raise
        finally:
            done = runner.rules.turn - 1
            state = "failed" if error else "paused" if runner.rules.turn <= end else "done"
            self.publish({"type": "DialogueIdle", "state": state, "turns": done, "error": error})
        return await self.result()

    async def close(self) -> None:
        """Let a run in progress finish its turn, then close the agents' souls."""
        self._unsubscribe()
        if self.running:
            self.stopping = True
            assert self.task is not None
            with contextlib.suppress(Exception):
                await self.task
        if self._saving is not None:
            await self._saving
        self.runner.close()
        for client in list(self.clients):
            client.close()
        self.clients.clear()


def _retrieved(task: asyncio.Task[Any]) -> None:
    """A run's failure is on every client already (DialogueIdle, state "failed") and, when
    a request waited, in its answer: mark it seen so asyncio does not log it again."""
    if not task.cancelled():
        task.exception()


class Dialogues:
    """The dialogues of one soul: the open ones by id, the saved ones in `$SOUL_HOME/dialogues`."""

    def __init__(self, soul_name: str, open_runner: OpenRunner, keeper: Keeper | None = None) -> None:
        self.soul_name = soul_name
        self.open_runner = open_runner
        self.keeper = keeper if keeper is not None else Keeper()
        self.open: dict[str, DialogueHub] = {}
        self._opening: dict[str, asyncio.Task[DialogueHub]] = {}  # saved dialogues being opened
        self.keeper.watch(self.open)

    def folder(self) -> Path:
        from soul.runtime import dialogues_dir

        return Path(dialogues_dir())

    async def create(self, seed: int | None = None) -> DialogueHub:
        """A new dialogue, saved at once (so it is listed before its first turn)."""
        await self.keeper.make_room()
        hub = DialogueHub(self.open_runner(seed=seed), self.keeper.clock)
        hub.runner.save()
        self.open[hub.id] = hub
        return hub

    async def get(self, dialogue_id: str) -> DialogueHub:
        """The hub of a saved dialogue of this soul (an exact id), resumed on first use; the
        server's `Keeper` closes it when nobody has used it for its grace."""
        hub = self.open.get(dialogue_id)
        if hub is not None:
            return hub
        if not DIALOGUE_ID.fullmatch(dialogue_id) or not (self.folder() / f"{dialogue_id}.json").is_file():
            raise DialogueRefused(404, "no_dialogue", f"no saved dialogue {dialogue_id!r} (GET /api/dialogues lists them)")
        opening = self._opening.get(dialogue_id)
        if opening is None:  # else another request is opening it: the same hub for both
            opening = self._opening[dialogue_id] = asyncio.create_task(self._open(dialogue_id))
            opening.add_done_callback(lambda done: self._opening.pop(dialogue_id, None))
            opening.add_done_callback(_retrieved)
        return await asyncio.shield(opening)  # a request that goes away leaves the opening to finish

    async def _open(self, dialogue_id: str) -> DialogueHub:
        await self.keeper.make_room()
        hub = self.open.get(dialogue_id)  # opened by another request meanwhile
        if hub is not None:
            return hub
        try:
            # reading a long dialogue's file and rebuilding its events: off the event loop
            runner = await asyncio.to_thread(self.open_runner, resume=dialogue_id)
        except SoulError as exc:  # another soul's dialogue, or an unreadable file
            raise DialogueRefused(404, "no_dialogue", str(exc)) from exc
        hub = self.open[dialogue_id] = DialogueHub(runner, self.keeper.clock)
        return hub

    def listed(self) -> list[dict[str, Any]]:
        """This soul's saved dialogues, newest first: id, seed, turns, running."""
        files = sorted(self.folder().glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        out: list[dict[str, Any]] = []
        for path in files:
            if len(out) >= LISTED:
                break
            hub = self.open.get(path.stem)
            if hub is not None:
                out.append(hub.info())
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # a file being replaced, or not a dialogue: not listed
            if not isinstance(data, dict) or data.get("soul") != self.soul_name:
                continue
            turns = sum(1 for e in data.get("events", ()) if isinstance(e, dict) and e.get("event") == "DialogueTurn")
            out.append({"id": path.stem, "soul": self.soul_name, "seed": data.get("seed"), "turns": turns,
                        "running": False, "stopping": False})
        return out

    async def close(self) -> None:
        await self.keeper.close()
        for opening in list(self._opening.values()):
            with contextlib.suppress(Exception):
                await opening
        hubs = list(self.open.values())
        self.open.clear()  # the same dict: the keeper watches it
        for hub in hubs:
            with contextlib.suppress(Exception):
                await hub.close()

"""When a memory field's work runs, around a turn: its writes after the turn has returned, its
queries at once or in a worker thread.

**Writes.** A memory field's writes after a turn run in a worker thread once the turn has
returned, in the order they were asked for; whatever reads the field first waits for them.

A turn's memories are written after its commit (embedding the new texts, seconds on a long
one with a real embedder; touching its recalls; feeding back what it used). The reply does
not wait for that: `Writes.submit` hands the work to the event loop's default executor and
returns at once, and the session awaits it before its next turn reads memory, in `settle()`
and in `close()` (docs/memory.md, "When memories are written"). Ordering is kept by two waits:

- a write waits for the writes of its session submitted before it (a session's memories chain
  their context in the order they were said, `MemoryBridge.remember`); two sessions' writes
  may run at once, as they did when each turn waited for its own;
- a read (`MemoryBridge.field()`, which every recall, resonate, `soul memory` command and
  bundle goes through) waits for every write submitted before it, in any thread; a write's
  own reads do not wait (a write never waits for one submitted after it: no cycle).

Nothing is lost to a loop that ends without `close()`: `asyncio.run` waits for its default
executor's threads, and the work runs to its end there.

**Queries.** A recall embeds its query (milliseconds with the bundled model) and searches the
field; in a worker thread, so the event loop keeps serving. The hand-off to the thread and
back costs ~0.1 ms, and the search itself runs colder there: on a small field that is as much
as the search. So a turn whose recall reads its input warms the query's vector at its start
(`Queries.warm`, in a worker thread, while the turn reads its snapshot and starts), and the
recall then searches on the event loop when that is quick (`MemoryBridge.answers_at_once`): the vector
warmed, the field open and at most `AT_ONCE_MEMORIES` memories, no write pending. Anything
else — another query, a large field, a tape, a partition — goes to the worker thread as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soul.compiler import Plan
    from soul.runtime.bridges.learning import RecallUse

log = logging.getLogger(__name__)

# A field this small answers a query on the loop in well under a millisecond (docs/memory.md):
# about as long as the hand-off to a worker thread would take.
AT_ONCE_MEMORIES = 10_000
_WARMING_KEPT = 64  # warmed queries no turn asked for (a turn that failed first): the oldest go


class Writes:
    """The pending writes of one memory field (see the module's docstring)."""

    __slots__ = ("_inside", "_lock", "_pending")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[str, Future[None]]] = []  # (session, its write), in order
        self._inside = threading.local()  # set while a write runs: its own reads do not wait

    def submit(self, session: str, work: Callable[[], None]) -> Future[None]:
        """Run `work` in the running loop's default executor after the writes of `session`
        submitted before it; the future is done when it has run (with its exception, if it
        raised: callers log their failures inside `work`)."""
        loop = asyncio.get_running_loop()
        done: Future[None] = Future()
        with self._lock:
            live = [(s, f) for s, f in self._pending if not f.done()]
            before = [f for s, f in live if s == session]
            self._pending = [*live, (session, done)]
        context = contextvars.copy_context()  # the turn's span and settings, as to_thread keeps them

        def run() -> None:
            if before:
                wait(before)
            self._inside.writing = True
            try:
                _resolve(done, partial(context.run, work))  # an error: handed to whoever awaits the write
            finally:
                self._inside.writing = False

        try:
            loop.run_in_executor(None, run)
        except RuntimeError:  # the loop's executor is shut down (the loop is closing): run it here
            run()
        return done

    def wait(self) -> None:
        """Block until the writes submitted so far have run (at once inside a write)."""
        if not self._pending or getattr(self._inside, "writing", False):
            return  # nothing submitted before (the list is replaced whole: see `idle`)
        with self._lock:
            self._pending = [(s, f) for s, f in self._pending if not f.done()]
            pending = [f for _, f in self._pending]
        if pending:
            wait(pending)

    @property
    def pending(self) -> int:
        """How many writes have not run yet."""
        with self._lock:
            return sum(1 for _, f in self._pending if not f.done())

    @property
    def idle(self) -> bool:
        """Whether every write submitted so far has run (`pending` is 0), read without the
        lock: the list is replaced, never changed in place, so one read sees a whole one."""
        return all(f.done() for _, f in self._pending)


def _resolve(done: Future[None], work: Callable[[], None]) -> None:
    """Run `work` and settle `done` with its outcome (None, or what it raised)."""
    try:
        work()
    except BaseException as exc:
        done.set_exception(exc)
    else:
        done.set_result(None)


def write_turn(memory: Any, session: str, items: list[dict[str, Any]], recalled: Sequence[str],
               use: RecallUse | None, commit: int | None, logs: Callable[[], None] | None = None) -> None:
    """A committed turn's writes to `memory` (its `MemoryBridge`; `Session._remember` submits
    them): its JSONL lines appended (`logs`, the store's `Applied.pending_logs`), its recalls
    logged as accesses, the use of what it recalled fed back, its memories remembered. Each
    part's failure is logged, not raised: the turn stands."""
    if logs is not None:
        try:
            logs()
        except Exception:  # (an OSError is the store's to log: this is anything else)
            log.exception("session %s: appending the turn's log lines failed", session)
    if recalled:
        try:
            memory.touch(recalled)
        except Exception:
            log.exception("session %s: logging %d recall(s) after the turn failed", session, len(recalled))
    if use is not None:
        try:
            memory.feedback(use)
        except Exception:
            log.exception("session %s: feeding back %d recall(s) after the turn failed", session, len(use.shown))
    if items:
        try:
            memory.remember(items, session=session, commit=commit)
        except Exception:
            log.exception("session %s: remembering %d item(s) after the turn failed", session, len(items))


def recalls_input(plan: Plan) -> bool:
    """Whether a turn of `plan` searches its memory for the input with a vector: a
    `memory.recall` step with no `query:` template, not in keyword mode (whose query is
    warmed at the turn's start)."""
    default = ((plan.blueprint.memory or {}).get("recall") or {}).get("mode") or "hybrid"
    return any(step.kind.name == "memory.recall" and not step.params.get("query")
               and (step.params.get("mode") or default) != "keyword" for step in plan.turn.steps.values())


class Queries:
    """A field's queries at once or in a worker thread (see the module's docstring)."""

    __slots__ = ("_lock", "_warming")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warming: dict[str, Future[None]] = {}  # query text -> its vector being embedded

    def warm(self, text: str, embed: Callable[[str], None], *, known: bool = False) -> None:
        """Embed `text` now, in the running loop's default executor (`embed` puts its vector
        in the embedder's cache); the recall that asks for it next finds it there. `known`:
        its vector is cached already, nothing to embed (no trip to a thread)."""
        with self._lock:
            if text in self._warming:
                return
            if len(self._warming) >= _WARMING_KEPT:
                self._warming.pop(next(iter(self._warming)))
            done: Future[None] = Future()
            self._warming[text] = done
        if known:
            done.set_result(None)
        else:  # a failure is the recall's to report: its own query raises it, in its thread
            asyncio.get_running_loop().run_in_executor(None, _resolve, done, partial(embed, text))

    def taken(self, text: str) -> Future[None] | None:
        """`text`'s warming, taken (each warming answers once); None if it was not warmed."""
        with self._lock:
            return self._warming.pop(text, None)

    async def warmed(self, text: str) -> bool:
        """Whether `text`'s vector was warmed (waiting for it if it is still being embedded);
        each warming answers once."""
        warming = self.taken(text)
        return warming is not None and await _settled(warming)


async def _settled(warming: Future[None]) -> bool:
    """Whether a warming succeeded, once it has run."""
    if not warming.done():
        try:
            await asyncio.wrap_future(warming)
        except Exception:  # the query itself says what failed, from its worker thread
            return False
    return warming.exception() is None


async def run_query(queries: Queries, text: str, quick: Callable[[], bool], ask: Callable[[], Any]) -> Any:
    """`ask()` (a recall of `text`) on the event loop when its vector was warmed and `quick()`
    says the field answers at once; else in a worker thread. (A warming done already, as a
    known text's is, answers without a coroutine of its own: this runs every turn.)"""
    warming = queries.taken(text)
    if warming is not None and (warming.exception() is None if warming.done() else await _settled(warming)) and quick():
        return ask()
    return await asyncio.to_thread(ask)

"""`soul run`: talk to a soul — once (`-m`), as JSON, or in a streamed, coloured REPL.

In the REPL, `/thoughts` toggles showing the internal monologue and checks, `/state` and
`/user` show the soul state and the user model, `/quit` (or Ctrl-D) leaves. Ctrl-C during a
turn abandons it: nothing of that turn is stored.

A soul with background work (`processes:`, `triggers:` — AgentCSD's subconscious) starts it
with the REPL: spontaneous replies print as they come, `/pause`, `/resume` and `/mood` steer
and show it, `--layers` shows the internal dialog and the subconscious beside the chat
(`cli/live.py`); leaving stops it. With `SOUL_RUNNER=dbos` on a PostgreSQL store the loops and
triggers run in `soul worker` processes instead: the REPL listens for their commits and prints
them the same way (`worker_feed`). A one-shot run (`-m`) answers the message first; with
`--cycles N` it then runs each loop N cycles and waits for the spontaneous turns they start,
without it the loops never start, so the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from soul.cli.terminal import json_text, markup_safe, say_json, shown
from soul.errors import RunError, SoulError
from soul.runtime import Reply, StepFinished, StepStarted, Token, TurnCommitted

EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by SIGINT
HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /quit"
# a soul with background work (processes, triggers) has these too
BACKGROUND_HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /pause, /resume, /mood, /quit"
PROMPT = "you> "


def _soul_for(args: argparse.Namespace) -> Any:
    from soul.runtime import load

    provider = wrap = None
    record, replay = getattr(args, "record", None), getattr(args, "replay", None)
    if replay and (args.script or record):
        raise SoulError("--replay serves recorded calls; it cannot be combined with --script or --record")
    if args.script:
        from soul.providers import ScriptedProvider

        provider = ScriptedProvider.from_script(args.script)  # a list, or a mapping slot -> list
    if replay:
        from soul.providers import ReplayProvider

        provider = ReplayProvider.from_file(replay)
    if record:
        from soul.providers import recording

        wrap = recording(record)
    return load(args.blueprint, model=args.model, provider=provider, wrap=wrap)


def _session(soul: Any, args: argparse.Namespace) -> Any:
    core = getattr(args, "persona_core", None)
    if core is not None and not soul.blueprint.processes:
        raise RunError(f"--persona-core: {soul.name} has no background process to give a Persona Core to")
    return soul.session(id=args.session, user=args.user, persona_core=core)


class Printer:
    """Prints a turn's events: the reply as it streams, thoughts when asked."""

    def __init__(self, console: Any, name: str, thoughts: bool, layers: bool = False) -> None:
        self.console = console
        self.name = name
        self.thoughts = thoughts
        self.layers = layers  # the internal dialog's quiet part, after the reply
        self.streaming = False
        self.status: Any = None
        self.kinds: dict[str, str] = {}
        self.internal: list[str] = []

    def start(self) -> None:
        if self.console.is_terminal:
            self.status = self.console.status(f"{self.name} is thinking…", spinner="dots")
            self.status.start()

    def stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __call__(self, event: Any) -> None:
        if isinstance(event, StepStarted):
            self.kinds[event.step] = event.kind
        elif isinstance(event, StepFinished) and self.layers:
            from soul.cli.live import internal_lines

            self.internal += internal_lines(self.kinds, event)
        elif isinstance(event, Token):
            self.stop_spinner()
            if not self.streaming:
                self.console.print(f"[bold magenta]{self.name}>[/] ", end="")
                self.streaming = True
            self.console.print(shown(event.text), end="", markup=False, highlight=False, soft_wrap=True)
        elif isinstance(event, Reply):
            self.stop_spinner()
            if self.streaming:
                self.console.print()
            elif event.text:
                from soul.store import redact

                # Streamed tokens arrive redacted (runtime/calls.py); a reply that was not
                # streamed is the turn's own text, so it is redacted here, as `--json` does.
                self.console.print(f"[bold magenta]{self.name}>[/] ", end="")
                self.console.print(shown(redact(event.text)), markup=False, highlight=False)
        elif isinstance(event, TurnCommitted):
            for line in self.internal:
                self.console.print(line, highlight=False)
            self.internal = []

    def show_thoughts(self, trace: dict[str, Any]) -> None:
        """The other steps' outputs, after the reply (so they never interleave with it)."""
        for step in trace.get("steps", []):
            outputs = {k: v for k, v in step["outputs"].items() if v not in (None, "")}
            if step["kind"] != "external_dialogue" and outputs:
                line = markup_safe(f"({step['step']} · {step['status']}) {json_text(outputs, indent=None)}")
                self.console.print(f"[dim]  {line}[/]", highlight=False)


async def _one_turn(session: Any, text: str, printer: Printer, store: Any, view: Any = None) -> Any:
    """Run and print one user turn. With a `LiveView`, background lines are held from the
    turn's first event (a spontaneous turn before it has printed by then) to its end."""
    printer.start()
    committed = None
    try:
        async for event in session.stream(text):
            if view is not None and committed is None:
                view.hold()
            printer(event)
            if isinstance(event, TurnCommitted):
                committed = event
        if printer.thoughts and committed is not None:
            printer.show_thoughts(store.trace(session.id, committed.turn))
    finally:
        printer.stop_spinner()
        printer.streaming = False
        printer.internal = []
        if view is not None:
            view.release()
    return committed


def _installed(handler: Any) -> Any:
    """soul's warnings (a failed cycle or spontaneous turn) go to `handler` while the run
    lasts (Python's last-resort printer would write them raw, over the prompt)."""
    import logging

    logger = logging.getLogger("soul")
    logger.addHandler(handler)
    return lambda: logger.removeHandler(handler)


def run_command(args: argparse.Namespace) -> int:
    """`soul run`."""
    soul = _soul_for(args)
    try:
        session = _session(soul, args)
        if args.message is None:
            return _repl(soul, session, args)
        if session.work is not None:
            return _once_with_background(soul, session, args)
        if args.json:
            from soul.store import redact_data

            result = session.turn_sync(args.message)
            # What was stored is redacted; the result object is the turn's own, so it is
            # redacted here too (a key quoted in the message or the reply).
            say_json(redact_data(_public(result.to_json(), soul, args)))
            return 0
        from rich.console import Console

        printer = Printer(Console(), soul.name, args.show_thoughts, args.layers)

        async def once() -> None:
            await _one_turn(session, args.message, printer, soul.store)
            await session.settle()

        try:
            asyncio.run(once())  # on Ctrl-C it cancels the turn and waits for it to unwind
        except KeyboardInterrupt:
            printer.stop_spinner()
            printer.console.print("\n[yellow]turn abandoned; nothing was stored[/]")
            return EXIT_INTERRUPTED
        return 0
    finally:
        soul.close()


def _once_with_background(soul: Any, session: Any, args: argparse.Namespace) -> int:
    """`-m` on a soul with background work: the message turn, then (with `--cycles N`) N
    cycles of each loop and the spontaneous turns they start, then stop everything."""
    from rich.console import Console

    from soul.cli.live import LiveView, Outcome, ViewLogHandler

    console = Console(stderr=args.json)  # with --json, stdout holds the JSON alone
    view = None if args.json else LiveView(console, soul.name, args.layers)
    printer = Printer(console, soul.name, args.show_thoughts, args.layers)
    outcome = Outcome()
    result = None

    async def once() -> None:
        nonlocal result
        try:
            if args.json:
                result = await session.turn(args.message)
            else:
                await _one_turn(session, args.message, printer, soul.store)
            await session.settle()
            if args.cycles is not None:
                session.subscribe(outcome)
                if view is not None:
                    session.subscribe(view)
                await session.start(cycles=args.cycles)
                await session.idle()
        finally:
            await session.close()  # stops the loops and cancels what still runs

    uninstall = _installed(ViewLogHandler(view, console))
    try:
        asyncio.run(once())
    except KeyboardInterrupt:
        printer.stop_spinner()
        console.print("\n[yellow]interrupted: the turn or cycle that was running stored nothing[/]")
        return EXIT_INTERRUPTED
    finally:
        uninstall()
    if args.json and result is not None:
        from soul.store import redact_data

        data = _public(result.to_json(), soul, args)
        data["spontaneous"] = outcome.spontaneous
        data["mood_and_criteria"] = [
            {"mood": m["mood"], "criteria": m["criteria"], "cycle": m["cycle"]} for m in soul.store.moods(session.id)
        ]
        data["cycles"] = outcome.cycles
        data["failed_cycles"] = outcome.failed
        say_json(redact_data(data))
    return 0


def _public(data: dict[str, Any], soul: Any, args: argparse.Namespace) -> dict[str, Any]:
    """A turn's JSON without what its quiet sections hold (ID_quiet, S_quiet: AgentCSD's
    private parts never reach the user), unless `--show-thoughts` or `--layers` asks for them."""
    if args.show_thoughts or args.layers:
        return data
    planned = soul.plan.turn.steps
    steps = {}
    for name, outputs in data.get("steps", {}).items():
        step = planned.get(name)
        quiet = {sec.output for sec in step.kind.sections if sec.tag.endswith("_quiet")} if step is not None else set()
        steps[name] = {k: v for k, v in outputs.items() if k not in quiet}
    return {**data, "steps": steps}


class _Loop:
    """An event loop in its own thread, so the prompt can read in the main thread.

    `input()` must run in the main thread: Ctrl-C there raises KeyboardInterrupt at once
    (read in a worker thread, it hung until Enter and then printed a traceback). Turns and
    their after-turn subprocesses run on this loop meanwhile; Ctrl-C during a turn cancels it
    and waits until the cancellation has unwound, so nothing of it is stored.
    """

    def __init__(self) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="soul-repl", daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            import concurrent.futures

            with contextlib.suppress(concurrent.futures.CancelledError, Exception):
                future.result(timeout=30)
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()




def _repl(soul: Any, session: Any, args: argparse.Namespace) -> int:
    from rich.console import Console

    from soul.cli.live import LiveView, ViewLogHandler, worker_feed

    with contextlib.suppress(ImportError):  # line editing, and the typed text LiveView writes back
        import readline  # noqa: F401

    console = Console()
    printer = Printer(console, soul.name, args.show_thoughts, args.layers)
    background = session.work is not None
    commands = BACKGROUND_HELP if background else HELP
    console.print(f"[bold]{soul.name}[/] · session {session.id} · {commands}")
    view = LiveView(console, soul.name, args.layers, PROMPT)
    loop = _Loop()
    feed = None
    uninstall = _installed(ViewLogHandler(view, console))
    try:
        if background:
            session.subscribe(view)  # spontaneous replies (and the layers) print as they come
            loop.run(session.start(cycles=args.cycles))
            feed = worker_feed(soul, session, view, loop.loop)
        while True:
            view.prompting = True
            try:
                line = input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            finally:
                view.prompting = False
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text.startswith("/"):
                view.hold()  # its output stays in one piece
                try:
                    _command(text, soul, session, printer, console, loop, commands)
                finally:
                    view.release()
                continue
            try:
                loop.run(_one_turn(session, text, printer, soul.store, view))
            except KeyboardInterrupt:
                printer.stop_spinner()
                console.print("\n[yellow]turn abandoned; nothing was stored[/]")
            except Exception as exc:
                if not isinstance(exc, SoulError) or args.debug:
                    raise
                from soul.store import redact

                console.print(f"[red]error:[/] {markup_safe(redact(str(exc)))}", highlight=False)
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C leaves at once
            loop.run(session.settle())
    finally:
        if feed is not None:
            feed.stop()
        with contextlib.suppress(KeyboardInterrupt):
            loop.run(session.close())  # the background loops and triggers stop with the REPL
        uninstall()
        loop.close()
    return 0



def _command(text: str, soul: Any, session: Any, printer: Printer, console: Any, loop: _Loop, commands: str) -> None:
    """A REPL command (`/thoughts`, `/state`, `/user`, `/chetana`; `/pause`, `/resume`,
    `/mood` for a soul with background work)."""
    if text == "/thoughts":
        printer.thoughts = not printer.thoughts
        console.print(f"[dim]thoughts {'on' if printer.thoughts else 'off'}[/]")
    elif text == "/state":
        snap = soul.store.snapshot(session.id)
        console.print(json_text(snap.state), markup=False, highlight=False)
    elif text == "/user":
        snap = soul.store.snapshot(session.id)
        console.print(shown(snap.user_model or f"(nothing is known about {session.info.user} yet)"), markup=False)
    elif text == "/chetana":
        from soul.runtime import session_report

        try:
            console.print(shown(session_report(soul.store, session.id).render()), markup=False, highlight=False)
        except SoulError as exc:
            console.print(f"[yellow]{markup_safe(str(exc))}[/]")
    elif text in ("/pause", "/resume", "/mood") and session.work is None:
        console.print(f"[yellow]{soul.name} has no background process: {markup_safe(text)} does nothing here[/]")
    elif text in ("/pause", "/resume") and session.loops_in_workers:
        console.print(f"[yellow]{markup_safe(soul.name)}'s loops run in `soul worker` (SOUL_RUNNER=dbos):"
                      f" {text} steers loops run here only[/]")
    elif text in ("/pause", "/resume"):

        async def steer() -> None:  # the loops' events live on the loop thread
            session.pause() if text == "/pause" else session.resume()

        loop.run(steer())
        what = "paused (after the current cycle)" if text == "/pause" else "resumed"
        console.print(f"[dim]background {what}[/]")
    elif text == "/mood":
        from soul.cli.live import mood_text

        console.print(mood_text(session.mind), highlight=False)
    else:
        console.print(f"[yellow]unknown command {markup_safe(text)}[/] — {commands}")


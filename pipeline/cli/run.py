"""`soul run`: talk to a soul — once (`-m`), as JSON, or in a streamed, coloured REPL.

In the REPL, `/thoughts` toggles showing the internal monologue and checks, `/state` and
`/user` show the soul state and the user model, `/quit` (or Ctrl-D) leaves. Ctrl-C during a
turn abandons it: nothing of that turn is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from soul.cli.terminal import json_text, markup_safe, shown
from soul.errors import SoulError
from soul.runtime import Reply, Token, TurnCommitted

EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by SIGINT
HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /quit"


def _soul_for(args: argparse.Namespace) -> Any:
    from soul.runtime import load

    provider = wrap = None
    record, replay = getattr(args, "record", None), getattr(args, "replay", None)
    if replay and (args.script or record):
        raise SoulError("--replay serves recorded calls; it cannot be combined with --script or --record")
    if args.script:
        from soul.providers import ScriptedProvider

        provider = ScriptedProvider.from_file(args.script)
    if replay:
        from soul.providers import ReplayProvider

        provider = ReplayProvider.from_file(replay)
    if record:
        from soul.providers import recording

        wrap = recording(record)
    return load(args.blueprint, model=args.model, provider=provider, wrap=wrap)


def _session(soul: Any, args: argparse.Namespace) -> Any:
    return soul.session(id=args.session, user=args.user)


class Printer:
    """Prints a turn's events: the reply as it streams, thoughts when asked."""

    def __init__(self, console: Any, name: str, thoughts: bool) -> None:
        self.console = console
        self.name = name
        self.thoughts = thoughts
        self.streaming = False
        self.status: Any = None

    def start(self) -> None:
        if self.console.is_terminal:
            self.status = self.console.status(f"{self.name} is thinking…", spinner="dots")
            self.status.start()

    def stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __call__(self, event: Any) -> None:
        if isinstance(event, Token):
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
                self.console.print(f"[bold magenta]{self.name}>[/] ", end="")
                self.console.print(shown(event.text), markup=False, highlight=False)

    def show_thoughts(self, trace: dict[str, Any]) -> None:
        """The other steps' outputs, after the reply (so they never interleave with it)."""
        for step in trace.get("steps", []):
            outputs = {k: v for k, v in step["outputs"].items() if v not in (None, "")}
            if step["kind"] != "external_dialogue" and outputs:
                line = markup_safe(f"({step['step']} · {step['status']}) {json_text(outputs, indent=None)}")
                self.console.print(f"[dim]  {line}[/]", highlight=False)


async def _one_turn(session: Any, text: str, printer: Printer, store: Any) -> Any:
    printer.start()
    committed = None
    try:
        async for event in session.stream(text):
            printer(event)
            if isinstance(event, TurnCommitted):
                committed = event
    finally:
        printer.stop_spinner()
        printer.streaming = False
    if printer.thoughts and committed is not None:
        printer.show_thoughts(store.trace(session.id, committed.turn))
    return committed


def run_command(args: argparse.Namespace) -> int:
    """`soul run`."""
    soul = _soul_for(args)
    try:
        session = _session(soul, args)
        if args.message is not None:
            if args.json:
                from soul.store import redact_data

                result = session.turn_sync(args.message)
                # What was stored is redacted; the result object is the turn's own, so it is
                # redacted here too (a key quoted in the message or the reply).
                print(json_text(redact_data(result.to_json())))
                return 0
            from rich.console import Console

            printer = Printer(Console(), soul.name, args.show_thoughts)

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
        return _repl(soul, session, args)
    finally:
        soul.close()


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

    console = Console()
    printer = Printer(console, soul.name, args.show_thoughts)
    console.print(f"[bold]{soul.name}[/] · session {session.id} · {HELP}")
    loop = _Loop()
    try:
        while True:
            try:
                line = input("you> ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text.startswith("/"):
                _command(text, soul, session, printer, console)
                continue
            try:
                loop.run(_one_turn(session, text, printer, soul.store))
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
        loop.close()
    return 0


def _command(text: str, soul: Any, session: Any, printer: Printer, console: Any) -> None:
    """A REPL command (`/thoughts`, `/state`, `/user`, `/chetana`)."""
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
    else:
        console.print(f"[yellow]unknown command {markup_safe(text)}[/] — {HELP}")

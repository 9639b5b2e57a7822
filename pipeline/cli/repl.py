"""`soul run`'s REPL: input read in the main thread, turns on a loop thread, REPL commands.

`/thoughts` toggles showing the internal monologue and checks, `/state` and `/user` show the
soul state and the user model, `/quit` (or Ctrl-D) leaves. Ctrl-C during a turn abandons it:
nothing of that turn is stored. A soul with background work starts it with the REPL and
stops it on leaving; `/pause`, `/resume` and `/mood` steer and show it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from soul.cli.printer import Printer, one_turn, warnings_to
from soul.cli.terminal import json_text, markup_safe, shown
from soul.errors import SoulError

__all__ = ["repl"]

HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /quit"
# a soul with background work (processes, triggers) has these too
BACKGROUND_HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /pause, /resume, /mood, /quit"
PROMPT = "you> "


def prompt_for(stdin: Any, stdout: Any) -> str:
    """The prompt, when someone types at a terminal and reads it; none when either side is
    piped (`echo hi | soul run csd > log`): a prompt in the output is noise there."""
    try:
        return PROMPT if stdin.isatty() and stdout.isatty() else ""
    except (AttributeError, ValueError):  # a replaced or closed stream
        return ""


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


def repl(soul: Any, session: Any, args: argparse.Namespace) -> int:
    """`soul run` without `-m`: read, run and print turns until /quit, Ctrl-D or Ctrl-C at the
    prompt; the soul's background work runs meanwhile and stops with it."""
    from rich.console import Console

    from soul.cli.live import LiveView, ViewLogHandler, worker_feed

    with contextlib.suppress(ImportError):  # line editing, and the typed text LiveView writes back
        import readline  # noqa: F401

    console = Console()
    printer = Printer(console, soul.name, args.show_thoughts, args.layers)
    background = session.work is not None
    commands = BACKGROUND_HELP if background else HELP
    console.print(f"[bold]{soul.name}[/] · session {session.id} · {commands}")
    prompt = prompt_for(sys.stdin, sys.stdout)
    view = LiveView(console, soul.name, args.layers, prompt)
    loop = _Loop()
    feed = None
    uninstall = warnings_to(ViewLogHandler(view, console))
    try:
        if background:
            session.subscribe(view)  # spontaneous replies (and the layers) print as they come
            loop.run(session.start(cycles=args.cycles))
            feed = worker_feed(soul, session, view, loop.loop)
        while True:
            view.prompting = True
            try:
                line = input(prompt)
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
                loop.run(one_turn(session, text, printer, soul.store, view))
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

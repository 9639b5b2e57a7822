"""`soul run`: talk to a soul — once (`-m`), as JSON, or in a streamed, coloured REPL.

In the REPL, `/thoughts` toggles showing the internal monologue and checks, `/state` and
`/user` show the soul state and the user model, `/quit` (or Ctrl-D) leaves. Ctrl-C during a
turn abandons it: nothing of that turn is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from soul.errors import SoulError
from soul.runtime import Reply, Token, TurnCommitted

HELP = "commands: /thoughts (toggle), /state, /user, /chetana, /quit"


def _soul_for(args: argparse.Namespace) -> Any:
    from soul.runtime import load

    provider = wrap = None
    record, replay = getattr(args, "record", None), getattr(args, "replay", None)
    if replay and (args.script or record):
        raise SoulError("--replay serves recorded calls; it cannot be combined with --script or --record")
    if args.script:
        from soul.providers.scripted import ScriptedProvider

        provider = ScriptedProvider.from_file(args.script)
    if replay:
        from soul.providers.replay import ReplayProvider

        provider = ReplayProvider.from_file(replay)
    if record:
        from soul.providers.replay import recording

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
            self.console.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
        elif isinstance(event, Reply):
            self.stop_spinner()
            if self.streaming:
                self.console.print()
            elif event.text:
                self.console.print(f"[bold magenta]{self.name}>[/] ", end="")
                self.console.print(event.text, markup=False, highlight=False)

    def show_thoughts(self, trace: dict[str, Any]) -> None:
        """The other steps' outputs, after the reply (so they never interleave with it)."""
        for step in trace.get("steps", []):
            shown = {k: v for k, v in step["outputs"].items() if v not in (None, "")}
            if step["kind"] != "external_dialogue" and shown:
                self.console.print(f"[dim]  ({step['step']} · {step['status']}) {json.dumps(shown, ensure_ascii=False)}[/]", highlight=False)


async def _one_turn(session: Any, text: str, printer: Printer) -> Any:
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
        printer.show_thoughts(session.soul.store.trace(session.id, committed.turn))
    return committed


def run_command(args: argparse.Namespace) -> int:
    """`soul run`."""
    soul = _soul_for(args)
    try:
        session = _session(soul, args)
        if args.message is not None:
            if args.json:
                result = session.turn_sync(args.message)
                print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
                return 0
            from rich.console import Console

            printer = Printer(Console(), soul.name, args.show_thoughts)

            async def once() -> None:
                await _one_turn(session, args.message, printer)
                await session.settle()

            asyncio.run(once())
            return 0
        return asyncio.run(_repl(soul, session, args))
    finally:
        soul.close()


async def _repl(soul: Any, session: Any, args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    printer = Printer(console, soul.name, args.show_thoughts)
    console.print(f"[bold]{soul.name}[/] · session {session.id} · {HELP}")
    while True:
        try:
            line = await asyncio.to_thread(input, "you> ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text == "/thoughts":
            printer.thoughts = not printer.thoughts
            console.print(f"[dim]thoughts {'on' if printer.thoughts else 'off'}[/]")
            continue
        if text == "/state":
            snap = soul.store.snapshot(session.id)
            console.print_json(json.dumps(snap.state, ensure_ascii=False))
            continue
        if text == "/user":
            snap = soul.store.snapshot(session.id)
            console.print(snap.user_model or f"(nothing is known about {session.info.user} yet)", markup=False)
            continue
        if text == "/chetana":
            from soul.runtime import session_report

            try:
                console.print(session_report(soul.store, session.id).render(), markup=False, highlight=False)
            except SoulError as exc:
                console.print(f"[yellow]{exc}[/]")
            continue
        if text.startswith("/"):
            console.print(f"[yellow]unknown command {text}[/] — {HELP}")
            continue
        try:
            await _one_turn(session, text, printer)
        except KeyboardInterrupt:
            console.print("\n[yellow]turn abandoned; nothing was stored[/]")
        except Exception as exc:
            if not isinstance(exc, SoulError) or args.debug:
                raise
            console.print(f"[red]error:[/] {exc}", markup=True, highlight=False)
    await session.settle()
    return 0

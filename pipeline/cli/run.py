"""`soul run`: talk to a soul — once (`-m`), as JSON, or in a streamed, coloured REPL.

The REPL and its commands are `cli/repl.py`; a turn's events are printed by `cli/printer.py`
for both. Ctrl-C during a turn abandons it: nothing of that turn is stored.

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
from typing import Any

from soul.cli.printer import Printer, one_turn, warnings_to
from soul.cli.repl import repl
from soul.cli.terminal import say_json
from soul.errors import RunError, SoulError

EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by SIGINT


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


def run_command(args: argparse.Namespace) -> int:
    """`soul run`."""
    soul = _soul_for(args)
    try:
        session = _session(soul, args)
        if args.message is None:
            return repl(soul, session, args)
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
            await one_turn(session, args.message, printer, soul.store)
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
                await one_turn(session, args.message, printer, soul.store)
            await session.settle()
            if args.cycles is not None:
                session.subscribe(outcome)
                if view is not None:
                    session.subscribe(view)
                await session.start(cycles=args.cycles)
                await session.idle()
        finally:
            await session.close()  # stops the loops and cancels what still runs

    uninstall = warnings_to(ViewLogHandler(view, console))
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



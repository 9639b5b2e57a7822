"""A turn's events printed in the terminal: the reply as it streams, the thoughts when asked.

Shared by `soul run`'s one-shot run (`cli/run.py`) and its REPL (`cli/repl.py`).
"""

from __future__ import annotations

from typing import Any

from soul.cli.terminal import json_text, markup_safe, shown
from soul.runtime import Reply, StepFinished, StepStarted, Token, TurnCommitted

__all__ = ["Printer", "one_turn", "warnings_to"]


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

                # Streamed tokens arrive redacted (runtime/turn/calls.py); a reply that was not
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


async def one_turn(session: Any, text: str, printer: Printer, store: Any, view: Any = None) -> Any:
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


def warnings_to(handler: Any) -> Any:
    """soul's warnings (a failed cycle or spontaneous turn) go to `handler` while the run
    lasts (Python's last-resort printer would write them raw, over the prompt)."""
    import logging

    logger = logging.getLogger("soul")
    logger.addHandler(handler)
    return lambda: logger.removeHandler(handler)

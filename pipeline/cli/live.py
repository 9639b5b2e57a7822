"""What a session's background work shows in the terminal: spontaneous replies and, with
`soul run --layers`, the internal dialog and the subconscious beside the chat.

Events come from `Session.subscribe` on the event loop's thread while the REPL may be waiting
at its prompt in the main thread, so `LiveView` prints under one lock, clears the prompt line
first and writes the prompt (and what was typed so far) back after; lines that arrive while a
user turn is printing are held and printed after it, so a streamed reply is never cut.
Everything a model wrote goes through the terminal filter (`markup_safe`) and secret
redaction: it is never read as markup.

With `SOUL_RUNNER=dbos` the loops and triggers run in `soul worker` processes: `worker_feed`
hears their commits (PostgreSQL's LISTEN/NOTIFY) and hands them to the same view.

`Outcome` collects what a one-shot run (`-m --json`) reports about the background work.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from soul.cli.terminal import markup_safe
from soul.runtime import (
    CycleFinished,
    ImpulseQueued,
    LoopStatus,
    MoodChanged,
    Reply,
    StepFinished,
    StepStarted,
    TriggerFired,
    TurnCommitted,
)

# How each stream looks: distinguishable at a glance, and dim beside the chat.
SUBCONSCIOUS, IMPULSE, INTERNAL, TRIGGER = "dim cyan", "yellow", "dim green", "dim magenta"
QUIET_KIND = "internal_dialog"  # its `quiet` output is the internal dialog's private part


def _safe(text: Any) -> str:
    from soul.store import redact

    return markup_safe(redact(str(text)))


def line(style: str, label: str, text: str) -> str:
    """A layer line in Rich markup: `[label] text`, both escaped, in `style`."""
    return f"[{style}]{_safe(f'[{label}]')} {_safe(text)}[/]"


def internal_lines(kinds: dict[str, str], event: StepFinished) -> list[str]:
    """The internal dialog's quiet part of a finished step (nothing for other steps)."""
    quiet = (event.outputs or {}).get("quiet") if kinds.get(event.step) == QUIET_KIND else None
    return [line(INTERNAL, "internal", quiet)] if isinstance(quiet, str) and quiet.strip() else []


def layer_lines(event: Any) -> list[str]:
    """The subconscious' events as layer lines (a turn's events give none here)."""
    if isinstance(event, CycleFinished):
        label = f"{event.process} #{event.cycle}"
        if event.error is not None:
            return [line(SUBCONSCIOUS, label, f"cycle failed: {event.error}; next attempt in {event.retry_in:g} s")]
        quiet = [o.get("quiet") for o in event.outputs.values() if isinstance(o.get("quiet"), str) and o.get("quiet").strip()]
        return [line(SUBCONSCIOUS, label, f"quiet: {q.strip()}") for q in quiet] or [line(SUBCONSCIOUS, label, "cycle done")]
    if isinstance(event, MoodChanged):
        return [line(SUBCONSCIOUS, f"{event.process} #{event.cycle}", f"mood: {event.mood} · criteria: {event.criteria}")]
    if isinstance(event, ImpulseQueued):
        when = "now (trigger)" if event.trigger else f"waits ({event.pending} pending)"
        return [line(IMPULSE, "impulse", f"{event.text} — {when}")]
    if isinstance(event, TriggerFired):
        count = len(event.impulses)
        return [line(TRIGGER, f"trigger {event.trigger}", f"{event.reason} · {count} impulse{'s' * (count != 1)}")]
    if isinstance(event, LoopStatus):
        return [line(SUBCONSCIOUS, event.process, event.status.replace("_", " "))]
    return []


class LiveView:
    """Prints background events as they come (a `Session.subscribe` listener)."""

    def __init__(self, console: Any, name: str, layers: bool, prompt: str = "") -> None:
        self.console = console
        self.name = name
        self.layers = layers
        self.prompt = prompt
        self.prompting = False  # the main thread waits at the prompt
        self._lock = threading.RLock()
        self._busy = False  # a user turn is printing: hold our lines until it is done
        self._held: list[str] = []
        self._kinds: dict[str, str] = {}  # step -> kind, for the spontaneous turns' steps
        self._internal: list[str] = []

    def __call__(self, event: Any) -> None:
        if isinstance(event, StepStarted):
            self._kinds[event.step] = event.kind
        elif isinstance(event, StepFinished):
            if self.layers:
                self._internal += internal_lines(self._kinds, event)
        elif isinstance(event, Reply) and event.spontaneous:
            reply = f"[bold magenta]{self.name} (unprompted)>[/] {_safe(event.text)}"
            self.show([reply, *self._internal])
            self._internal = []
        elif isinstance(event, TurnCommitted):
            if self._internal:  # a spontaneous turn that stayed silent thought something
                self.show(self._internal)
            self._internal = []
        elif self.layers:
            self.show(layer_lines(event))

    def show(self, lines: list[str]) -> None:
        """Print `lines` (Rich markup, already escaped) without garbling the prompt."""
        if not lines:
            return
        with self._lock:
            if self._busy:
                self._held += lines
                return
            self._print(lines)

    def _print(self, lines: list[str]) -> None:
        # no prompt (piped input or output, `repl.prompt_for`): nothing to clear or write back
        prompted = self.prompting and bool(self.prompt)
        if prompted:
            if self.console.is_terminal:
                self.console.file.write("\r\x1b[2K")  # clear the prompt line; it is written back
            else:
                self.console.print()
        for text in lines:
            self.console.print(text, highlight=False)
        if prompted:
            self.console.file.write(self.prompt + _typed() if self.console.is_terminal else self.prompt)
            self.console.file.flush()

    def hold(self) -> None:
        """A user turn starts printing: hold background lines until `release`."""
        with self._lock:
            self._busy = True

    def release(self) -> None:
        with self._lock:
            self._busy = False
            held, self._held = self._held, []
            if held:
                self._print(held)


def worker_feed(soul: Any, session: Any, view: LiveView, loop: Any) -> Any:
    """With `SOUL_RUNNER=dbos`, `soul worker` processes run the session's loops and fire its
    triggers: on PostgreSQL their commits reach `view` as they are made, on `loop` (the REPL's
    event loop, like in-process loops' events), and `/mood` reads the workers' mood
    (`soul.runtime.commit_feed`, what `soul serve` listens with too). The running feed, to stop
    when the REPL ends; None for loops run here, or on SQLite (then a warning says why)."""
    from soul.runtime import feed_for

    if not session.loops_in_workers:
        return None

    def show(heard: Any) -> None:
        for event in heard.events:
            view(event)

    name = _safe(soul.name)
    feed = feed_for(soul.store, soul.name, lambda sid: session if sid == session.id else None, show, loop)
    if feed is None:
        view.show([f"[yellow]warning:[/] SOUL_RUNNER=dbos: {name}'s loops run in `soul worker`, but on"
                   " SQLite nothing tells this REPL what they do: use SOUL_STORE=postgresql://…"])
    elif feed.wait_listening(10.0):
        view.show([f"[dim]{name}'s loops and triggers run in `soul worker`: what they say appears here[/]"])
    else:
        view.show(["[yellow]warning:[/] not listening for the workers' commits yet (the store did not"
                   " answer); their replies appear once it does"])
    return feed


def mood_text(mind: Any) -> str:
    """`/mood`: the current mood and criteria, the cycle and the impulses waiting (markup)."""
    if mind is None:
        return "[yellow]no background process keeps a mood here[/]"
    pending = len(mind.pending)
    return "\n".join((
        f"[cyan]mood:[/] {_safe(mind.mood or '(none yet)')}",
        f"[cyan]criteria:[/] {_safe(mind.criteria or '(none yet)')}",
        f"[dim]{_safe(mind.process)} · cycle {mind.cycle} · {pending} impulse{'s' * (pending != 1)} pending[/]",
    ))


def _typed() -> str:
    """What the user has typed at the prompt so far (readline's buffer), shown escaped."""
    from soul.cli.terminal import shown

    readline = sys.modules.get("readline")
    try:
        return shown(readline.get_line_buffer()) if readline is not None else ""
    except Exception:  # an emulation without the buffer: the prompt alone
        return ""


class Outcome:
    """What the background work did during a one-shot run, for `--json`: the spontaneous
    replies in order, the cycles completed and the cycles that failed."""

    def __init__(self) -> None:
        self.spontaneous: list[dict[str, Any]] = []
        self.cycles = 0
        self.failed: list[dict[str, Any]] = []
        self._fired: TriggerFired | None = None
        self._reply: str | None = None

    def __call__(self, event: Any) -> None:
        if isinstance(event, TriggerFired):
            self._fired = event
        elif isinstance(event, Reply) and event.spontaneous:
            self._reply = event.text
        elif isinstance(event, TurnCommitted):  # only spontaneous turns reach listeners
            fired, self._fired = self._fired, None
            reply, self._reply = self._reply, None
            if reply is not None:
                self.spontaneous.append({
                    "reply": reply, "turn": event.turn,
                    "trigger": fired.trigger if fired else None, "reason": fired.reason if fired else None,
                    "impulses": list(fired.impulses) if fired else [],
                })
        elif isinstance(event, CycleFinished):
            if event.error is None:
                self.cycles += 1
            else:
                self.failed.append({"process": event.process, "cycle": event.cycle, "error": event.error})


class ViewLogHandler(logging.Handler):
    """soul's warnings (a failed cycle, a failed spontaneous turn) printed through the view:
    filtered and redacted like the rest, and never over the prompt."""

    def __init__(self, view: LiveView | None, console: Any) -> None:
        super().__init__(logging.WARNING)
        self.view = view
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"[yellow]warning:[/] {_safe(record.getMessage())}"
            if self.view is not None:
                self.view.show([text])
            else:
                self.console.print(text, highlight=False)
        except Exception:  # logging must never raise into the loop
            self.handleError(record)

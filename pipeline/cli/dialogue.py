"""`soul dialogue SOUL_OR_PATH --turns N`: run a blueprint's `dialogue:` (Entelgia) and show it.

Prints each turn as it happens (model text shown as text: controls escaped, Rich markup
escaped), Fixy's interventions with their reasons, [SLIP] / [SELF-REPL] lines and dreams, then
the metrics table. `--json` writes transcript + interventions + metrics (to stdout, or to FILE
with the readable dialogue still printed); `--plot FILE.png` draws the signals over the turns
(matplotlib, the `plot` extra, imported only then); `--script FILE` maps each agent's name,
Fixy's included, to the list of what it says; `--resume ID` continues a stored dialogue.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from soul.cli.terminal import json_text, markup_safe, say, say_json
from soul.errors import SoulError

COLOURS = ("cyan", "green", "magenta", "blue", "red")
EMBEDDERS = ("default", "none")
MARK_CHARS = 160  # a promoted memory shown beside a turn: one line
JSON_STDOUT = "-"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "dialogue", help="run a multi-agent dialogue (Entelgia): agents, Fixy, metrics",
        description="Run the `dialogue:` block of a blueprint (the built-in `entelgia`: Socrates, Athena and "
        "the observer Fixy) for N turns, then print its metrics table.",
    )
    p.add_argument("blueprint", metavar="SOUL_OR_PATH")
    p.add_argument("--turns", type=_positive, default=None, metavar="N", help="turns to run (default: the blueprint's max_turns, else 10)")
    p.add_argument("--seed", type=int, help="seed of the dialogue's random choices (overrides the blueprint's `seed`)")
    p.add_argument("--script", metavar="FILE", help="scripted replies: a YAML/JSON mapping of agent names (the observer's too) to the list of what each says")
    p.add_argument("--model", help="use this model for every agent (overrides the blueprint and SOUL_MODEL)")
    p.add_argument("--json", nargs="?", const=JSON_STDOUT, metavar="FILE", help="write transcript, interventions and metrics as JSON (to FILE, or to stdout instead of the readable dialogue)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the signals over the turns into a PNG (needs matplotlib: pip install 'soulgraph[plot]')")
    p.add_argument("--resume", metavar="ID", help="continue a stored dialogue (its id, as printed at the start)")
    p.add_argument("--embedder", choices=EMBEDDERS, default=None,
                   help="the sentence embedder of topic drift and persona collapse: 'default' (the memory extra's "
                   "MiniLM, when installed) or 'none' (both by keywords or off); default: none with --script, "
                   "so a scripted run calls no model at all, else default")
    p.set_defaults(func=cmd_dialogue)


def _providers(script: str | None) -> Any:
    if script is None:
        return None
    from soul.providers import ScriptedProvider

    scripts = ScriptedProvider.from_script(script)
    if isinstance(scripts, ScriptedProvider):
        raise SoulError(f"--script {script}: a dialogue's script maps each agent's name to its replies "
                        "(socrates: [...], athena: [...], fixy: [...]); this file is one list")
    return scripts


def open_runner(blueprint: Any, *, script: str | None = None, model: str | None = None,
                seed: int | None = None, resume: str | None = None, embedder: str | None = None) -> Any:
    """The `DialogueRunner` of `soul dialogue`'s options (`--script` an agent mapping read
    afresh, so each runner starts its scripts at the top); `soul serve` opens its dialogues so.
    `embedder` "default" or "none" (None: none with a script — a scripted run calls no model,
    the embedding model included, so it gives the same result wherever it runs — else default)."""
    from soul.runtime import DialogueRunner

    chosen = embedder or ("none" if script is not None else "default")
    return DialogueRunner.open(blueprint, provider=_providers(script), model=model, seed=seed, resume=resume,
                               embedder=None if chosen == "none" else "default")


def cmd_dialogue(args: argparse.Namespace) -> int:
    if args.plot:
        _check_plot_target(args.plot)
    runner = open_runner(args.blueprint, script=args.script, model=args.model, seed=args.seed, resume=args.resume,
                         embedder=args.embedder)
    quiet = args.json == JSON_STDOUT
    console = None
    if not quiet:
        from rich.console import Console

        console = Console(highlight=False)
        view = TranscriptView(console, runner.agent_names, runner.observer)
        runner.subscribe(view)
        where = "resumed" if args.resume else "started"
        console.print(f"[dim]dialogue {markup_safe(runner.id)} {where} — {markup_safe(runner.name)}, random seed {runner.seed}[/dim]")
        view.show_topic(runner.rules.topic(runner.rules.turn))  # what they talk about, before anyone speaks
    try:
        result = runner.run_sync(args.turns)
    except SoulError:
        done = runner.rules.turn - 1
        if done:  # what ran is saved: say how to go on once the cause is fixed
            say(f"soul: dialogue {runner.id} is saved after turn {done}; continue it with --resume {runner.id}", err=True)
        raise
    finally:
        runner.close()
    if console is not None:
        print_metrics(console, result.metrics)
    if args.json:
        if quiet:
            say_json(result.to_dict())
        else:
            Path(args.json).write_text(json_text(result.to_dict()) + "\n", encoding="utf-8")
    if args.plot:
        from soul.cli.dialogue_plot import plot

        plot(result, Path(args.plot))
        if console is not None:
            console.print(f"[dim]plot written to {markup_safe(args.plot)}[/dim]")
    return 0


def _check_plot_target(target: str) -> None:
    """Before a long run: matplotlib is there and the PNG can be written."""
    from soul.extras import require

    require("plot", "--plot", ("matplotlib",))
    if not target.lower().endswith(".png"):
        raise SoulError(f"--plot {target}: the plot is a PNG; name a FILE.png")
    folder = Path(target).expanduser().resolve().parent
    if not folder.is_dir():
        raise SoulError(f"--plot {target}: no folder {folder}")


class TranscriptView:
    """Prints the dialogue's events as they come (a `DialogueRunner` listener)."""

    def __init__(self, console: Any, agents: tuple[str, ...], observer: str | None) -> None:
        self.console = console
        self.colours = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(a for a in agents if a != observer)}
        self.observer = observer
        self.topic: str | None = None

    def show_topic(self, topic: str) -> None:
        """`topic: ...`, when it is not the one shown last (the topic manager moves on)."""
        if topic and topic != self.topic:
            self.topic = topic
            self.console.print(f"\n[bold]topic:[/bold] {markup_safe(topic)}")

    def __call__(self, event: Any) -> None:
        kind = type(event).__name__
        out = self.console.print
        if kind == "DialogueTurn":
            self.show_topic(event.topic)
            title = event.speaker.title()
            if event.fixy:
                out(f"\n[bold yellow]{markup_safe(title)}[/bold yellow] [dim](turn {event.turn})[/dim]")
                out(f"[yellow]{markup_safe(event.text)}[/yellow]")
            else:
                colour = self.colours.get(event.speaker, "white")
                strategy = f", {markup_safe(event.seed_strategy)}" if event.seed_strategy else ""
                energy = f", energy {event.energy:.0f}" if event.energy is not None else ""
                feeling = (f", {markup_safe(event.emotion)} {event.intensity:.2f}"
                           if event.emotion and event.emotion != "neutral" and event.intensity is not None else "")
                out(f"\n[bold {colour}]{markup_safe(title)}[/bold {colour}] "
                    f"[dim](turn {event.turn}{strategy}{feeling}{energy})[/dim]")
                out(markup_safe(event.text) if event.text.strip() else "[dim](says nothing)[/dim]")
            for mark in event.marks:
                style = "magenta" if mark.startswith("[SLIP]") else "cyan"
                out(f"[{style}]{markup_safe(_one_line(mark))}[/{style}]")
            if "hallucination_risk" in event.flags:
                out("[dim red]  hallucination risk: energy is low[/dim red]")
        elif kind == "FixyIntervened":
            out(f"[dim yellow]  Fixy stepped in: {markup_safe(event.reason)} {markup_safe(_evidence(event.evidence))}[/dim yellow]")
        elif kind == "FixyGated":
            what = "rewritten" if event.rewritten else f"rewrite failed, original kept ({markup_safe(event.error or '')})"
            out(f"[dim yellow]  Fixy asked {markup_safe(event.speaker.title())} to rewrite ({markup_safe(event.reason)}): {what}[/dim yellow]")
        elif kind == "DreamCycle":
            report = event.report
            moved = (f"{len(report.get('integrated') or ())} integrated, {len(report.get('promoted') or ())} promoted to "
                     f"long-term memory, {report.get('forgotten', 0)} forgotten")
            out(f"[dim]  {markup_safe(event.agent.title())} dreams (energy {event.energy_before:.0f} → "
                f"{float(report.get('energy_after', 100.0)):.0f}): {markup_safe(moved)}[/dim]")


def _one_line(text: str, limit: int = MARK_CHARS) -> str:
    """A [SLIP] / [SELF-REPL] memory as one line of at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _evidence(evidence: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in evidence.items()
                      if isinstance(v, int | float | str) and not isinstance(v, bool))
    return f"({shown})" if shown else ""


# How the table shows each metric: (key, row, factor, format, unit). Every share is a
# percentage (the JSON keeps the reference's values: docs/dialogue.md, "Metrics"); the other
# signals say their unit.
METRIC_ROWS: tuple[tuple[str, str, float, str, str], ...] = (
    ("turns", "turns", 1.0, "{:.0f}", "turns"),
    ("fixy_turns", "Fixy's turns", 1.0, "{:.0f}", "turns"),
    ("circularity_rate", "circularity", 100.0, "{:.1f}", "% of turn pairs"),
    ("progress_rate", "progress", 100.0, "{:.1f}", "% of turns"),
    ("loop_rate", "loop rate", 1.0, "{:.1f}", "% of turns"),  # already per 100 turns
    ("fixy_per_50", "Fixy's share", 2.0, "{:.1f}", "% of turns"),  # per 50 turns, times 2
    ("intervention_utility", "intervention utility", 100.0, "{:+.1f}", "points of circularity less after Fixy"),
    ("topic_drift", "topic drift", 100.0, "{:.1f}", "% (mean 1 − cosine to the topic)"),
    ("novelty_ratio", "novelty", 0.1, "{:.1f}", "new concepts per turn"),  # per 10 turns
    ("conflict_trend", "conflict trend", 1.0, "{:+.3f}", "conflict index per turn"),
    ("conflict_mean", "conflict mean", 1.0, "{:.1f}", "conflict index (0–20)"),
)
METRICS_TITLE = "Dialogue metrics (every share in % of turns or turn pairs; other signals in their unit)"


def metric_rows(metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(signal, value, unit) for each metric the table shows; "n/a" where a metric has no value."""
    rows = []
    for key, name, factor, shape, unit in METRIC_ROWS:
        if key not in metrics:
            continue
        value = metrics[key]
        rows.append((name, "n/a" if value is None else shape.format(value * factor), unit))
    return rows


def print_metrics(console: Any, metrics: dict[str, Any]) -> None:
    """The metrics table: one row per signal, on one scale (lists and per-turn series are
    left to --json)."""
    from rich.table import Table

    table = Table(title=METRICS_TITLE, title_justify="left")
    table.add_column("signal")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for name, value, unit in metric_rows(metrics):
        table.add_row(markup_safe(name), markup_safe(value), markup_safe(unit))
    console.print()
    console.print(table)

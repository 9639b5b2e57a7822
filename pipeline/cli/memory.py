"""`soul memory ingest|recall|stats|themes|check|reembed`: a resonance memory field from the command line.

Only `ingest` and `reembed` write: `recall`, `stats` and `themes` open the field read-only (`Field.open(...,
read_only=True)`) and `check` only reads, so none of them leaves a file behind or changes one.

The engine's errors and the field's OSErrors reach the user as one-line `MemoryFieldError`s
that name `--field`, what failed and how to fix it (`soul.runtime.memory.field_errors`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from soul.cli.memory_files import MEMORY_CHARS, read_items
from soul.cli.terminal import say, say_json
from soul.errors import MemoryFieldError, SoulError


def _existing(folder: str) -> Path:
    """The folder of an existing field: read-only verbs never create one (a typo in --field
    would otherwise be an empty field that recalls nothing and checks "ok")."""
    path = Path(folder).expanduser()
    if path.is_dir() and ((path / "wal").is_dir() or (path / "snapshots").is_dir()):
        return path
    what = ("is a file, not a folder" if path.is_file() else
            "is not a memory field (no wal/ or snapshots/ inside)" if path.is_dir() else
            "names no folder")
    raise MemoryFieldError(f"--field {folder!r} {what}: pass the folder of a memory field "
                           "(read-only verbs never create one; soul memory ingest does)")


def _open(folder: str, *, create: bool = False, embedder: str | None = None, **config: Any) -> Any:
    """The field at `folder`: created and writable with `create`, else read-only;
    `embedder`: a built-in name or an ONNX path (None: the default, loaded on first use);
    `config`: `Field.open`'s options."""
    from soul.engines.resonance import Field, load_embedder

    path = Path(folder).expanduser()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    elif not path.is_file():  # a file fails in Field.open, reported with its OSError as cause
        path = _existing(folder)
    return Field.open(path, load_embedder(embedder) if embedder else None, read_only=not create, **config)


def _errors(folder: str, doing: str) -> AbstractContextManager[None]:
    """Engine errors and OSErrors raised inside, as a MemoryFieldError naming `--field`."""
    from soul.runtime import field_errors

    return field_errors(Path(folder).expanduser(), doing, named=f"--field {folder!r}",
                        elsewhere="pass --field a folder (it is created if missing)")


BATCH_ITEMS = 256  # memories remembered per call: the progress bar moves between calls
BATCH_CHARS = 256 << 10  # and at most this much text per call: remembering costs RAM per character


def _batches(items: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    chars = 0
    for item in items:
        batch.append(item)
        chars += len(item["text"])
        if len(batch) >= BATCH_ITEMS or chars >= BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def cmd_ingest(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    source = Path(args.file)
    if not source.is_file():
        raise SoulError(f"{source}: no such file")
    tags = args.tag or []
    # a first pass reads the whole file, so a bad line stops the ingest before anything is
    # written, and counts the memories; the second remembers them, a batch at a time
    total = sum(1 for _ in read_items(source, args.kind, tags))
    started = time.perf_counter()
    # --no-context: unrelated notes, each embedded alone (by default the file's items are one
    # session chain, each vector carrying the item before it: field/context.py)
    options = {"context_weight": None} if args.no_context else {}
    stored = 0
    with _errors(args.field, "ingest into"), _open(args.field, create=True, embedder=args.embedder, **options) as field, Progress(
        TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
        transient=not args.verbose,
    ) as progress:
        task = progress.add_task("ingest", total=total, rate="")
        before = len(field)
        offset = 0

        def on_progress(done: int, _total: int) -> None:
            elapsed = max(time.perf_counter() - started, 1e-9)
            progress.update(task, completed=offset + done, rate=f"{(offset + done) / elapsed:,.0f}/s")

        for batch in _batches(read_items(source, args.kind, tags)):
            # one session chain across the batches: each call continues the last (field/association.py)
            stored += sum(1 for i in field.remember_many(batch, progress=on_progress) if i is not None)
            offset += len(batch)
        new = len(field) - before
    elapsed = time.perf_counter() - started
    # "Remembered" counts only new memories: a near-duplicate strengthens the memory it was
    # merged into, and saying "60 of 60 remembered" then would hide that nothing was added.
    say(f"{stored} of {total} remembered into {args.field} ({new} new, {stored - new} merged into near-duplicates) "
        f"in {elapsed:.1f} s ({total / max(elapsed, 1e-9):,.0f}/s); {total - stored} refused by the quality gate (too short); "
        f"a memory holds at most {MEMORY_CHARS:,} characters: longer lines and paragraphs were split")
    return 0


MAX_K = 10_000  # more hits than anyone reads; bounds the work a typo like -k 10000000000 asks for


def _bounded_k(value: str) -> int:
    """-k as an int in 1..MAX_K, else argparse's clear usage error (exit 2, no traceback)."""
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if not 1 <= k <= MAX_K:
        raise argparse.ArgumentTypeError(f"{k} is out of range: pass 1 to {MAX_K:,}")
    return k


def cmd_recall(args: argparse.Namespace) -> int:
    with _errors(args.field, "recall from"), _open(args.field, embedder=args.embedder) as field:
        if args.mode == "resonate":
            hits = field.resonate(args.query, args.k, session=args.session, explain=args.explain or args.json)
        else:
            hits = field.recall(args.query, args.k, mode=args.mode)
    if args.json:
        say_json([{"id": h.id, "text": h.text, "score": h.score, "kind": h.kind, "tags": list(h.tags), "meta": h.meta, "components": h.components} for h in hits], default=str)
        return 0
    if not hits:
        say("no memories match")
    if args.explain and hits and "facts" in hits[0].components:
        _print_facts(hits[0].components["facts"])
    for rank, h in enumerate(hits, start=1):
        say(f"{rank:2}. {h.score:.3f}  [{h.kind}] {h.text}")
        if args.explain:
            _print_components(h.components)
    return 0


def _print_facts(facts: dict[str, Any]) -> None:
    """What each resonance phase did for the whole query."""
    say("phases: " + ", ".join(facts.get("phases", ())))
    for phase, fact in facts.items():
        if phase != "phases":
            say(f"  {phase}: " + (", ".join(f"{k} {v}" for k, v in fact.items()) if isinstance(fact, dict) else str(fact)))


def _print_components(components: dict[str, Any]) -> None:
    """One hit's signals (recall) or each phase's contribution (resonate)."""
    plain = {k: v for k, v in components.items() if isinstance(v, int | float) and not k.startswith("factor:")}
    factors = {k[7:]: v for k, v in components.items() if k.startswith("factor:") and isinstance(v, int | float) and abs(v - 1.0) > 1e-6}
    if plain:
        say("      " + ", ".join(f"{k} {v:.3f}" for k, v in plain.items()))
    if factors:
        say("      factors: " + ", ".join(f"{k} ×{v:.3f}" for k, v in factors.items()))


def cmd_stats(args: argparse.Namespace) -> int:
    with _errors(args.field, "read the statistics of"), _open(args.field) as field:
        stats = field.stats()
        # the Thompson learner's weights, once feedback (memory.learn) has saved any
        stats["learner"] = field.learner.weights() if (field.path / "learner.json").is_file() else None
    say_json(stats, default=str)
    return 0


def cmd_themes(args: argparse.Namespace) -> int:
    # an optional tool (docs/memory.md, "Themes"), not in recall: loaded only for this verb
    from soul.engines.resonance.themes import FieldThemes

    with _errors(args.field, "read the themes of"), _open(args.field) as field:
        if len(field) == 0:
            say("the field holds no memories")
            return 0
        themes = FieldThemes(field).themes(args.n)
    if args.json:
        say_json([{"theme": t.id, "size": t.size, "representative": t.representative, "text": t.text} for t in themes])
        return 0
    for t in themes:
        say(f"{t.size:6}  {' '.join(t.text.split())[:160]}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from soul.engines.resonance import Field

    path = _existing(args.field)  # checking nothing would report "ok"
    with _errors(args.field, "check"):
        report = Field.check(path)
    for issue in report.issues:
        say(str(issue))
    say("ok: every segment and snapshot checks out" if report.ok else f"{len(report.issues)} problem(s) found")
    return 0 if report.ok else 1


def cmd_reembed(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from soul.engines.resonance import load_embedder, reembed_field

    path = _existing(args.field)
    spec: dict[str, Any] = {"model": args.embedder}
    if args.tokenizer:
        spec["tokenizer"] = args.tokenizer
    if args.pooling:
        spec["pooling"] = args.pooling
    with _errors(args.field, "re-embed"):
        embedder = load_embedder(spec)
        started = time.perf_counter()
        with Progress(TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                      TimeElapsedColumn(), transient=not args.verbose) as progress:
            task = progress.add_task("reembed", total=None, rate="")

            def on_progress(done: int, total: int) -> None:
                elapsed = max(time.perf_counter() - started, 1e-9)
                progress.update(task, completed=done, total=total, rate=f"{done / elapsed:,.0f}/s")

            # the session chains are replayed with the default context weight (field/replay.py);
            # --no-context for a field written with it off
            weight = None if args.no_context else 0.5
            report = reembed_field(path, embedder, batch=args.batch, progress=on_progress, context_weight=weight)
    if not report.switched:
        say(f"{args.field} already holds vectors of {report.target}: nothing to do")
        return 0
    was = f" (was {report.held})" if report.held else " (it had no record of its model)"
    resumed = f", resuming after {report.resumed_from} rows staged by an interrupted run" if report.resumed_from else ""
    say(f"re-embedded {report.memories} memories of {args.field} with {report.target}{was} in {report.seconds:.1f} s{resumed}")
    return 0


_EMBEDDER_HELP = ("the field's embedding model: a built-in name (minilm, the default) or the path of an ONNX sentence model "
                  "with its tokenizer.json beside it; a field refuses a model other than the one it holds")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("memory", help="ingest into, recall from, inspect and check a memory field", description="A resonance memory field (a folder).")
    verbs = p.add_subparsers(dest="memory_command", metavar="VERB", required=True)

    v = verbs.add_parser("ingest", help="remember every item of a file (jsonl, md, txt)", description="Remember the items of a JSONL, Markdown or text file, with a progress bar.")
    v.add_argument("file")
    v.add_argument("--field", required=True, help="the field's folder (created if missing)")
    v.add_argument("--kind", default="episode", help="memory kind for items that name none (default: episode)")
    v.add_argument("--tag", action="append", help="a tag for every item (repeatable)")
    v.add_argument("--verbose", action="store_true", help="keep the progress bar on screen")
    v.add_argument("--no-context", action="store_true",
                   help="embed each item alone (unrelated notes); by default the file is one conversation and each item's vector carries the one before it")
    v.add_argument("--embedder", help=_EMBEDDER_HELP)
    v.set_defaults(func=cmd_ingest)

    v = verbs.add_parser("recall", help="the memories most relevant to a query", description="Recall from a field.")
    v.add_argument("query")
    v.add_argument("--field", required=True)
    v.add_argument("-k", type=_bounded_k, default=10, help=f"how many memories (1 to {MAX_K:,}; default 10)")
    v.add_argument("--mode", choices=("hybrid", "semantic", "keyword", "resonate"), default="hybrid", help="resonate: full resonance (association through the knowledge graph, scoring, inhibition)")
    v.add_argument("--session", help="resonate: prime with what this session saw recently")
    v.add_argument("--json", action="store_true", help="hits as JSON, with each signal's component")
    v.add_argument("--explain", action="store_true", help="show each hit's signal components (with resonate: every phase's contribution)")
    v.add_argument("--embedder", help=_EMBEDDER_HELP)
    v.set_defaults(func=cmd_recall)

    v = verbs.add_parser("stats", help="counts, kinds, tiers, index state", description="Statistics of a field.")
    v.add_argument("--field", required=True)
    v.set_defaults(func=cmd_stats)

    v = verbs.add_parser("themes", help="what the field is about: its themes, biggest first",
                         description="Group the field's memories into themes (themes/over_field.py) and list them, biggest first, each with the memory nearest its centre. Reads only.")
    v.add_argument("--field", required=True)
    v.add_argument("-n", type=_bounded_k, default=20, help="how many themes (default 20)")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_themes)

    v = verbs.add_parser("check", help="verify every segment's CRCs and report", description="Verify a field's files without changing them; exit 1 on damage.")
    v.add_argument("--field", required=True)
    v.set_defaults(func=cmd_check)

    v = verbs.add_parser("reembed", help="re-embed every memory with another embedding model",
                         description="Re-embed every memory of a field with another embedding model and record it, with a progress bar. "
                                     "The new vectors are staged beside the field and switched in one snapshot: an interrupted run leaves "
                                     "the field on its old model, and the next run resumes. Needs the field to itself.")
    v.add_argument("--field", required=True)
    v.add_argument("--embedder", default="minilm", help="a built-in name (minilm, the default) or the path of an ONNX sentence model")
    v.add_argument("--tokenizer", help="its tokenizer.json (default: tokenizer.json beside the model)")
    v.add_argument("--pooling", choices=("mean", "cls"), help="how token vectors become one (default mean; cls for BGE-style models)")
    v.add_argument("--batch", type=_bounded_k, default=256, help="memories embedded per step (default 256)")
    v.add_argument("--verbose", action="store_true", help="keep the progress bar on screen")
    v.add_argument("--no-context", action="store_true",
                   help="embed each memory alone (a field written with --no-context); by default each memory's vector carries the one before it in its session, as remembering stores it")
    v.set_defaults(func=cmd_reembed)

    from soul.cli.code import add_parsers as add_code_parsers  # index-code, find-symbol, ...

    add_code_parsers(verbs)

"""`soul memory index-code|find-symbol|search-symbols|callers|callees`: code intelligence
over a field's code index (`<field>/code`), its call graph also written to the field's
knowledge graph (`<field>/graph`) unless `--no-graph`. The engine's errors and the index's
OSErrors reach the user as one-line `MemoryFieldError`s naming `--field` and the fix."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from soul.cli.terminal import say, say_json
from soul.errors import SoulError


def field_path(value: str) -> Path:
    """`--field`: a folder path, as for the other memory commands; a bare name that is not
    a folder here names a soul's field, `$SOUL_HOME/fields/<name>`, when that exists."""
    path = Path(value).expanduser()
    if not path.exists() and "/" not in value and value not in (".", ".."):
        from soul.store import fields_dir

        named = fields_dir() / value
        if named.is_dir():
            return named
    return path


def _open(args: argparse.Namespace, *, graph: bool = False, write: bool = False) -> Any:
    """The field's code index (and its graph if `graph`): read-only unless `write`, so the
    query verbs change no file and never create an index."""
    from soul.engines.resonance import CodeIndex

    folder = field_path(args.field)
    kg = None
    if graph:
        from soul.engines.resonance import KnowledgeGraph

        kg = KnowledgeGraph.open(folder / "graph", flush_interval=None)
    embedder = "default" if getattr(args, "semantic", False) else None
    try:
        return CodeIndex.open(folder / "code", graph=kg, embedder=embedder, read_only=not write), kg
    except BaseException:
        if kg is not None:  # the graph was opened for an index that could not be
            kg.close()
        raise


def _errors(args: argparse.Namespace, doing: str) -> AbstractContextManager[None]:
    """Engine errors and OSErrors raised inside, as a MemoryFieldError naming `--field`."""
    from soul.runtime import field_errors

    return field_errors(field_path(args.field), doing, named=f"--field {args.field!r}",
                        elsewhere="pass --field a folder (it is created if missing) or the name of a soul's field")


def _progress(enabled: bool) -> Any:
    """A rich progress bar on stderr (files done, rate, current file), or nothing."""
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[path]}"), console=Console(stderr=True), transient=True)


def _index(args: argparse.Namespace, root: Path) -> Any:
    """Index `root` into the field's code index, with a progress bar where it helps."""
    index, kg = _open(args, graph=not args.no_graph, write=True)
    started = time.perf_counter()
    try:
        with _progress((not args.json and sys.stderr.isatty()) or args.progress) as bar:
            task = bar.add_task("index", total=None, rate="", path="") if bar is not None else None

            def on_progress(done: int, total: int, path: str) -> None:
                if bar is not None:
                    rate = f"{done / max(time.perf_counter() - started, 1e-9):,.0f} files/s"
                    bar.update(task, completed=done, total=total, rate=rate, path=path[-50:])

            report = index.index(root, progress=on_progress, reset=args.reset)
    finally:
        index.close()
        if kg is not None:
            kg.close()
    return report


def cmd_index_code(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser()
    if not root.is_dir():
        raise SoulError(f"{root}: no such folder")
    with _errors(args, "index code into"):
        report = _index(args, root)
    if args.json:
        say_json({**asdict(report), "resolved_share": report.resolved_share})
        return 0
    rate = report.files_seen / max(report.seconds, 1e-9)
    say(f"{report.files_seen} files seen, {report.files_parsed} parsed, {report.files_skipped} skipped, "
          f"{report.files_removed} removed in {report.seconds:.2f} s ({rate:,.0f} files/s)")
    say(f"{report.symbols} symbols, {report.calls} calls, {report.resolved} resolved ({report.resolved_share:.0%})")
    if report.languages:
        say("languages: " + ", ".join(f"{k} {v}" for k, v in sorted(report.languages.items())))
    for reason, n in sorted(report.skipped.items()):
        say(f"skipped: {n} {reason}")
    return 0


def _symbol_dict(s: Any) -> dict[str, Any]:
    return asdict(s)


def _print_symbol(s: Any, score: float | None = None) -> None:
    head = f"{score:.3f}  " if score is not None else ""
    say(f"{head}{s.kind:9} {s.qualified}  {s.file}:{s.start_line}-{s.end_line}")
    say(f"{' ' * len(head)}          {s.signature}")


def cmd_find_symbol(args: argparse.Namespace) -> int:
    with _errors(args, "find symbols in"):
        index, _ = _open(args)
        with index:
            found = index.find_symbol(args.name)
    if args.json:
        say_json([_symbol_dict(s) for s in found])
        return 0
    if not found:
        say(f"no symbol named {args.name!r}")
        return 1
    for s in found:
        _print_symbol(s)
    return 0


def cmd_search_symbols(args: argparse.Namespace) -> int:
    with _errors(args, "search symbols in"):
        index, _ = _open(args)
        with index:
            hits = index.search_symbols(args.query, args.k)
    if args.json:
        say_json([{**_symbol_dict(s), "score": score} for s, score in hits])
        return 0
    if not hits:
        say("no symbols match")
    for s, score in hits:
        _print_symbol(s, score)
    return 0


def _cmd_calls(args: argparse.Namespace, direction: str) -> int:
    with _errors(args, f"list the {direction} in"):
        index, _ = _open(args)
        with index:
            if not index.find_symbol(args.symbol):
                raise SoulError(f"no symbol named {args.symbol!r} in {field_path(args.field) / 'code'}; try `soul memory search-symbols`")
            calls = index.symbol_callers(args.symbol) if direction == "callers" else index.symbol_callees(args.symbol)
    if args.json:
        say_json([asdict(c) for c in calls])
        return 0
    if not calls:
        say(f"no {direction} of {args.symbol!r}")
    for c in calls:
        if direction == "callers":
            say(f"{c.file}:{c.line}  {c.caller or '(module level)'}")
        else:
            target = c.callee or f"unresolved: {c.reason}"
            say(f"{c.file}:{c.line}  {(c.receiver + '.') if c.receiver else ''}{c.name} -> {target}")
    return 0


def cmd_callers(args: argparse.Namespace) -> int:
    return _cmd_calls(args, "callers")


def cmd_callees(args: argparse.Namespace) -> int:
    return _cmd_calls(args, "callees")


def add_parsers(verbs: Any) -> None:
    """Register the code verbs under `soul memory`."""
    field_help = "the field's folder (or a soul's field name); the code index is <field>/code"
    v = verbs.add_parser("index-code", help="index a source tree's symbols and call graph (incremental)",
                         description="Parse every source file under DIR with tree-sitter (Python, JavaScript, TypeScript, Go, Rust, Java, C, C++, Ruby, C#); re-parses only changed files.")
    v.add_argument("dir")
    v.add_argument("--field", required=True, help=field_help)
    v.add_argument("--no-graph", action="store_true", help="do not write the call graph to the field's knowledge graph")
    v.add_argument("--reset", action="store_true", help="replace an index of another folder")
    v.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a terminal")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_index_code)

    v = verbs.add_parser("find-symbol", help="symbols by name or qualified name", description="Symbols whose name, qualified name or id is NAME (or whose qualified name ends with it).")
    v.add_argument("name")
    v.add_argument("--field", required=True, help=field_help)
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_find_symbol)

    v = verbs.add_parser("search-symbols", help="symbols matching a query (BM25, optionally embeddings)", description="Search symbol names, signatures and docstrings.")
    v.add_argument("query")
    v.add_argument("--field", required=True, help=field_help)
    v.add_argument("-k", type=int, default=10)
    v.add_argument("--semantic", action="store_true", help="fuse with embedding cosine (the default local model)")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_search_symbols)

    for name, func, what in (("callers", cmd_callers, "call sites that call SYMBOL"), ("callees", cmd_callees, "calls made inside SYMBOL, resolved or with the reason they are not")):
        v = verbs.add_parser(name, help=what, description=f"The {what}.")
        v.add_argument("symbol")
        v.add_argument("--field", required=True, help=field_help)
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=func)

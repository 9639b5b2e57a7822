"""The `soul` command: validate, graph, explain, new, list, schema, run, sessions, user-model,
chetana, memory, serve, worker.

Exit codes: 0 success; 1 the blueprint is invalid; 2 usage errors (bad arguments, no such
file or soul). A SoulError prints as one line (`--debug` shows the traceback); anything else is
a bug and keeps its traceback. What is printed about an error, traceback included, has its
terminal controls shown as escapes and known secrets redacted (an SDK error chained under a
provider error may quote the request, key and all).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from soul.cli.terminal import say, say_json
from soul.errors import BlueprintInvalid, BlueprintNotFound, BlueprintTooLarge, SoulError

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
MODEL_VERBS = ("run", "dialogue", "serve", "worker")  # the verbs that call models (--allow-host)


def _error(exc: BaseException) -> None:
    """`soul: error: …` on stderr: the message can hold user or model text, and a key."""
    from soul.store import redact

    say(f"soul: error: {redact(str(exc))}", err=True)


def _redacting_excepthook(kind: type[BaseException], exc: BaseException, tb: object) -> None:
    """Python's traceback printer, with known secrets redacted and controls shown as escapes."""
    import traceback

    from soul.store import redact

    text = "".join(traceback.format_exception(kind, exc, tb))  # type: ignore[arg-type]
    say(redact(text), err=True, end="")


def _redact_tracebacks() -> None:
    # The traceback of an error that leaves main (--debug, or a bug) is printed by the
    # interpreter after main returns, so the printer itself is replaced; a hook someone else
    # installed (a debugger, a test runner) is left alone.
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _redacting_excepthook


def _print_diagnostics(diagnostics: Sequence[object]) -> None:
    for d in diagnostics:
        say(d.format_with_source(), err=True)  # type: ignore[attr-defined]


def cmd_validate(args: argparse.Namespace) -> int:
    from soul.compiler import validate

    worst = EXIT_OK
    for target in args.blueprints:
        try:
            checked = validate(target)
        except (BlueprintNotFound, BlueprintTooLarge) as exc:
            _error(exc)
            worst = max(worst, EXIT_USAGE)
            continue
        _print_diagnostics(checked.diagnostics)
        errors, warnings = len(checked.errors), len(checked.warnings)
        if args.tools and not errors and checked.blueprint is not None:
            from soul.cli.tools import print_tools  # starts the MCP servers: only when asked

            errors += print_tools(checked.blueprint, start=True)
        name = checked.blueprint.file if checked.blueprint else target
        if errors:
            say(f"{name}: invalid — {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}", err=True)
            worst = max(worst, EXIT_INVALID)
        elif not args.quiet:
            suffix = f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else ""
            say(f"{name}: valid{suffix}")
    return worst


def _compile(target: str) -> object:
    from soul.compiler import compile_blueprint

    return compile_blueprint(target)


def cmd_graph(args: argparse.Namespace) -> int:
    from soul.compiler import draw

    say(draw(_compile(args.blueprint), args.format), end="")  # type: ignore[arg-type]
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    if args.turn is not None:  # a stored turn's context window
        from soul.cli.window import explain_turn

        return explain_turn(args)
    if args.message is None:
        raise SoulError("soul explain needs -m MESSAGE to dry-run a blueprint's first turn, or --turn N SESSION for a stored turn")
    from soul.runtime import explain, render

    plan = _compile(args.blueprint)
    say(render(plan, args.message, explain(plan, args.message, user=args.user)), end="")  # type: ignore[arg-type]
    from soul.cli.tools import print_tools

    if print_tools(plan.blueprint, start=args.tools):  # type: ignore[attr-defined]
        return EXIT_INVALID
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    if args.kinds:
        from soul.kinds import default_registry

        for kind in default_registry():
            tag = "llm" if kind.llm else "   "
            say(f"{kind.name:20} {tag}  {kind.description}")
        return EXIT_OK
    from soul.compiler import validate
    from soul.language import builtin_names

    for name in builtin_names():
        checked = validate(name)
        description = checked.blueprint.description if checked.blueprint else "(invalid)"
        say(f"{name:12} {description}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from soul.cli.run import run_command  # asyncio and rich load only for `soul run`

    return run_command(args)


def cmd_chetana(args: argparse.Namespace) -> int:
    from soul.runtime import session_report
    from soul.store import SessionStore

    with SessionStore.open() as store:
        report = session_report(store, args.session)
    if args.json:
        say_json(report.to_dict())
    else:
        say(report.render())
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from soul.language import schema_text

    say(schema_text(), end="")
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    from soul.cli.new import scaffold

    for path in scaffold(args.name, Path(args.dir)):
        say(f"created {path}")
    # a name is found as ./NAME.yaml (soul.language.finding); elsewhere, the file's path
    where = args.name if Path(args.dir).resolve() == Path.cwd().resolve() else Path(args.dir) / (args.name + ".yaml")
    say(f"next: soul validate {where}")
    return EXIT_OK


def _cycles(text: str) -> int:
    """`--cycles N`: a whole number, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of cycles (0 or more), not {text!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soul",
        description="Write an LLM agent's soul as a YAML blueprint; validate, draw, explain and run it.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("validate", help="check blueprints; print every error as FILE:LINE:COL", description="Check blueprint files or built-in souls. Exit 0 valid, 1 invalid, 2 usage error.")
    p.add_argument("blueprints", nargs="+", metavar="PATH_OR_NAME")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing for valid blueprints")
    p.add_argument("--tools", action="store_true", help="also start the blueprint's MCP servers, list their tools and check "
                   "their JSON Schemas (a command runs only if you allowed it: --allow-command)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("graph", help="draw the compiled graph with its model calls", description="Print the compiled plan: layers, model calls (fused or chained), gates.")
    p.add_argument("blueprint", metavar="PATH_OR_NAME")
    p.add_argument("--format", "-f", choices=("text", "mermaid", "dot"), default="text")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("explain", help="dry-run the first turn, or show a stored turn's context window",
                       description="Show the exact prompt of every model call of the first turn, with token counts (no model is "
                       "called); or, with --turn N SESSION, the context window of a stored turn: each part of each call with "
                       "its tokens, the window, the budget and what was cut.")
    p.add_argument("blueprint", metavar="PATH_OR_NAME|SESSION", help="a blueprint; with --turn, a session id or unique prefix")
    p.add_argument("-m", "--message", help="the user's first message (a dry run)")
    p.add_argument("--turn", type=int, help="the stored turn whose context window to show")
    p.add_argument("--json", action="store_true", help="with --turn: the context window as JSON")
    p.add_argument("--user", default="user", help="the user's name (default: user)")
    p.add_argument("--tools", action="store_true", help="start the blueprint's MCP servers and show the tools they list, "
                   "with their JSON Schemas (without it, the entries are shown as written)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("new", help="scaffold a blueprint and persona, valid as written", description="Create NAME.yaml and NAME.md in a folder.")
    p.add_argument("name", help="the soul's name (lowercase letters, digits, _ and -)")
    p.add_argument("--dir", default=".", help="where to create the files (default: here)")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("list", help="list the built-in souls (or step kinds)", description="List the built-in souls, or with --kinds the step kinds.")
    p.add_argument("--kinds", action="store_true", help="list step kinds instead")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "run", help="talk to a soul (REPL, or once with -m)",
        description="Talk to a soul: a streamed REPL, or one message with -m. A soul with background "
        "processes (the csd soul's subconscious) runs them beside the REPL; with -m they run only "
        "with --cycles N (after the reply, N cycles each, then the run ends): without it the "
        "message is answered and the loops are stopped right after, so a one-shot always ends.",
    )
    p.add_argument("blueprint", metavar="NAME_OR_PATH")
    p.add_argument("-m", "--message", help="answer this one message and exit")
    p.add_argument("--session", help="resume a stored session (id or unique prefix)")
    p.add_argument("--user", default="user", help="who is talking (user models are kept per user)")
    p.add_argument("--json", action="store_true", help="with -m: print the turn result as JSON")
    p.add_argument("--show-thoughts", action="store_true", help="show the internal monologue and checks")
    p.add_argument("--model", help="use this model for every step (overrides the blueprint and SOUL_MODEL)")
    p.add_argument("--script", metavar="FILE", help="scripted replies: a YAML/JSON list of raw model replies, one per call; "
                   "or a mapping of model slots to such lists ({conscious: [...], subconscious: [...]}; default: for other calls)")
    p.add_argument("--cycles", type=_cycles, metavar="N", help="run each background loop at most N cycles; with -m, run "
                   "them after the reply and wait for them and the spontaneous turns they start (JSON: spontaneous, mood_and_criteria)")
    p.add_argument("--persona-core", metavar="FILE", help="a new session's Persona Core (the subconscious' read-only core), "
                   "instead of the blueprint's; the session keeps a snapshot of it")
    p.add_argument("--layers", action="store_true", help="show the internal dialog and the subconscious (mood, impulses, "
                   "triggers) beside the chat, as they happen")
    p.add_argument("--record", metavar="CASSETTE", help="write every model call to this YAML cassette (replaces it)")
    p.add_argument("--replay", metavar="CASSETTE", help="serve model calls from a cassette, with no network; a call it lacks is an error")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("chetana", help="the cognitive report of a session (affect, focus, self-model, intentions)", description="Chetana's cognitive report of a stored session, as the seed's /chetana screen.")
    p.add_argument("session", help="session id or unique prefix")
    p.add_argument("--json", action="store_true", help="the raw report as JSON")
    p.set_defaults(func=cmd_chetana)

    from soul.cli.dialogue import add_parsers as add_dialogue_parsers
    from soul.cli.memory import add_parsers as add_memory_parsers
    from soul.cli.models import add_parser as add_models_parser
    from soul.cli.serve import add_parser as add_serve_parser
    from soul.cli.sessions import add_parsers as add_session_parsers

    add_session_parsers(sub)
    from soul.cli.bundles import add_parsers as add_bundle_parsers

    add_bundle_parsers(sub)
    add_memory_parsers(sub)
    add_models_parser(sub)
    add_dialogue_parsers(sub)
    add_serve_parser(sub, _cycles)
    from soul.cli.worker import add_parser as add_worker_parser

    add_worker_parser(sub, _cycles)
    for verb in MODEL_VERBS:  # every verb that calls models: one flag, read in main()
        sub.choices[verb].add_argument(
            "--allow-host", action="append", metavar="HOST", default=None,
            help="send your API key to this model host (host, host:port or URL) when a blueprint's base_url points "
                 "there; repeatable. Without it such a host is called with no key (also: SOUL_ALLOW_HOSTS, "
                 "$SOUL_HOME/allowed-hosts; docs/providers.md)")

    from soul.cli.tools import add_allow_command

    add_allow_command(sub)

    p = sub.add_parser("schema", help="print the blueprint JSON Schema", description="Print the JSON Schema (draft 2020-12) of blueprints, for editors.")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `soul` command."""
    _redact_tracebacks()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "allow_host", None):
        from soul.providers import allow_hosts

        try:
            allow_hosts(args.allow_host)
        except SoulError as exc:
            parser.error(f"--allow-host: {exc}")
    from soul.cli.tools import apply_allow_command

    apply_allow_command(args)
    try:
        return int(args.func(args))
    except BlueprintInvalid as exc:
        if args.debug:
            raise
        _print_diagnostics(exc.diagnostics)
        errors = sum(1 for d in exc.diagnostics if d.severity == "error")
        say(f"soul: error: the blueprint has {errors} error{'s' * (errors != 1)}", err=True)
        return EXIT_INVALID
    except (BlueprintNotFound, BlueprintTooLarge) as exc:
        if args.debug:
            raise
        _error(exc)
        return EXIT_USAGE
    except SoulError as exc:
        if args.debug:
            raise
        _error(exc)
        return EXIT_INVALID
    except BrokenPipeError:  # `soul schema | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

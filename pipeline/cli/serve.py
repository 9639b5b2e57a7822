"""`soul serve`: the soul's web page and HTTP/WebSocket API (`soul.serve`), on uvicorn.

It builds the soul exactly as `soul run` does (`--model`, `--script`, `--record`,
`--replay`: `cli/run.py`'s `_soul_for`), and a turn's JSON is `soul run --json`'s (quiet
sections left out unless asked for, redacted). It listens on 127.0.0.1 unless `--host` says
otherwise, which needs SOUL_SERVE_TOKEN (`soul.serve.guard`), on uvicorn's h11 protocol with a
deadline on request headers and a bound on connections (`soul.serve.transport`); Ctrl-C
stops it, and every open session's background work stops with it.
"""

from __future__ import annotations

import argparse
from typing import Any

from soul.errors import SoulError


def _turn_json(soul: Any) -> Any:
    from soul.cli.run import _public
    from soul.store import redact_data

    def shaped(result: Any, thoughts: bool) -> dict[str, Any]:
        asked = argparse.Namespace(show_thoughts=thoughts, layers=False)
        return redact_data(_public(result.to_json(), soul, asked))  # type: ignore[no-any-return]

    return shaped


def require_serve() -> None:
    """The serve extra, or a `MissingExtra` naming it: without a WebSocket library uvicorn
    would start anyway and the page would never connect (the `local` extra brings uvicorn
    alone)."""
    from soul.extras import require

    require("serve", "soul serve", ("starlette", "uvicorn", ("websockets", "wsproto")))


def build(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(soul, app, guard) for the parsed arguments; refuses a public host without a token."""
    from soul.cli.run import _soul_for

    require_serve()
    from soul.serve import Guard, create_app

    guard = Guard.from_env(args.host)
    open_runner, script = _dialogue(args)
    if script is None:
        soul = _soul_for(args)
    else:  # the dialogue's script scripts its agents, not the chat with the soul alone
        from soul.runtime import load

        soul = load(args.blueprint, model=args.model, provider=script)
    app = create_app(soul, _turn_json(soul), guard, cycles=args.cycles, open_runner=open_runner,
                     idle_grace=args.idle_grace, max_sessions=args.max_sessions)
    return soul, app, guard


def _dialogue(args: argparse.Namespace) -> tuple[Any, Any]:
    """For a soul with a `dialogue:` block: the function opening its runners as `soul dialogue`
    does (`--model`, and `--script` mapping agent names to replies), and with `--script` the
    provider of the soul's own chat: an empty script whose error says why (a scripted demo of a
    dialogue soul is its dialogue). (None, None) for other souls."""
    from soul.compiler import load_valid

    spec = load_valid(args.blueprint).dialogue_spec
    if spec is None:
        return None, None
    from soul.cli.dialogue import open_runner

    def opened(resume: str | None = None, seed: int | None = None) -> Any:
        return open_runner(args.blueprint, script=args.script, model=args.model, seed=seed, resume=resume)

    if not args.script:
        return opened, None
    if args.record or args.replay:
        raise SoulError("--record/--replay are for a soul's own chat; a dialogue soul's --script scripts its agents")
    from soul.providers import ScriptedProvider

    if isinstance(ScriptedProvider.from_script(args.script), ScriptedProvider):
        raise SoulError(f"--script {args.script}: a dialogue soul's script maps each agent's name to its replies "
                        f"({', '.join(spec.agents)}), as `soul dialogue --script`; this file is one list")
    return opened, ScriptedProvider([], f"{args.script} (it scripts the dialogue's agents; the chat with the soul "
                                        "alone has no scripted replies)")


def serve_command(args: argparse.Namespace) -> int:
    """`soul serve`."""
    require_serve()
    import uvicorn

    from soul.serve import MAX_SOCKET_BYTES, uvicorn_config

    soul, app, guard = build(args)
    try:
        config = uvicorn_config(app, args.host, args.port, max_size=MAX_SOCKET_BYTES,
                                max_connections=args.max_connections)
        server = uvicorn.Server(config)
        host = f"[{args.host}]" if ":" in args.host else args.host
        query = "?token=…(SOUL_SERVE_TOKEN)" if guard.token else ""
        print(f"soul serve: {soul.name} at http://{host}:{args.port}/{query}  (Ctrl-C stops)", flush=True)
        _freeze_startup_objects()
        try:
            server.run()  # it stops on Ctrl-C / SIGTERM after closing every session, then re-raises
        except KeyboardInterrupt:
            print("soul serve: stopped", flush=True)
    finally:
        soul.close()
    return 0


def _freeze_startup_objects() -> None:
    """Move what is alive now (the modules, the soul and its plan: kept until the server stops)
    out of the garbage collector's sight, so its full collections scan only what the
    sessions made since: with 500 open sessions they took up to ~200 ms each, and each such
    pause lands inside one turn (docs/benchmarks.md, `soul serve` under load)."""
    import gc

    gc.collect()
    gc.freeze()


def add_parser(sub: Any, cycles: Any) -> None:
    p = sub.add_parser(
        "serve", help="the soul's live web page and HTTP/WebSocket API",
        description="Serve a soul: a web page with the chat, the internal dialogue, the subconscious, "
        "Chetana, memories, the trace and the sessions, and the HTTP/WebSocket API behind it "
        "(docs/serve.md). Listens on 127.0.0.1; another --host needs SOUL_SERVE_TOKEN.",
    )
    p.add_argument("blueprint", metavar="NAME_OR_PATH", nargs="?", default="claudius", help="the soul (default: claudius)")
    p.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1; another host needs SOUL_SERVE_TOKEN)")
    p.add_argument("--port", type=_port, default=8765, help="the port (default 8765)")
    p.add_argument("--model", help="use this model for every step (overrides the blueprint and SOUL_MODEL)")
    p.add_argument("--script", metavar="FILE", help="scripted replies, as `soul run --script`")
    p.add_argument("--record", metavar="CASSETTE", help="write every model call to this YAML cassette (replaces it)")
    p.add_argument("--replay", metavar="CASSETTE", help="serve model calls from a cassette, with no network")
    p.add_argument("--cycles", type=cycles, metavar="N", help="run each session's background loops at most N cycles")
    p.add_argument("--max-connections", type=_positive, default=1000, metavar="N",
                   help="open connections the server holds, sockets included; past it, 503 (default 1000)")
    p.add_argument("--idle-grace", type=_seconds, default=60.0, metavar="SECONDS",
                   help="close a session (stopping its background loops) or dialogue this long after its last "
                        "client left with no turn running (default 60)")
    p.add_argument("--max-sessions", type=_positive, default=500, metavar="N",
                   help="sessions and dialogues open at once; past it, the idlest closes, or 503 when all are in use "
                        "(default 500)")
    p.set_defaults(func=_run, session=None, user="user")


def _port(text: str) -> int:
    """--port: 1..65535."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds (0 or more), not {text!r}")
    return value


def _positive(text: str) -> int:
    """A whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    return serve_command(args)

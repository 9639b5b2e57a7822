"""`soul sessions list|show|export|delete|fork` and `soul user-model show|history|diff|revert`."""

from __future__ import annotations

import argparse
import difflib
import time
from typing import Any

from soul.cli.terminal import say, say_json
from soul.errors import SoulError


def _store() -> Any:
    from soul.store import SessionStore

    return SessionStore.open()


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def sessions_command(args: argparse.Namespace) -> int:
    with _store() as store:
        if args.action == "list":
            rows = store.sessions(args.soul)
            if not rows:
                say("no sessions yet — start one with: soul run claudius")
            for s in rows:
                say(f"{s.id}  {s.soul:12} {s.user:12} {s.turns:4} turns  {_when(s.updated)}")
            return 0
        if not args.id:
            raise SoulError(f"soul sessions {args.action} needs a session id (see: soul sessions list)")
        info = store.find_session(args.id)
        if args.action == "show":
            from soul.providers import traces_total

            cost = traces_total(t["trace"] for t in store.traces(info.id))
            say(f"session {info.id} · soul {info.soul} · user {info.user} · {info.turns} turns · cost {cost.text()}")
            if info.forked_from:
                say(f"forked from session {info.forked_from} after its turn {info.forked_at}")
            for turn, record, _ in store.messages(info.id, layer=None if args.all else "external"):
                who = info.user if record.tag == "user" else (info.soul if record.layer == "external" else f"  ({record.tag})")
                say(f"[{turn}] {who}: {record.content}")
            return 0
        if args.action == "export":
            say_json(store.export_session(info.id))
            return 0
        if args.action == "fork":
            fork = store.fork_session(info.id, info.turns if args.at is None else args.at)
            say(f"forked session {info.id} after turn {fork.forked_at}: new session {fork.id} ({fork.turns} turns)")
            say(f"continue it with: soul run {info.soul} --session {fork.id}")
            return 0
        if args.action == "delete":
            store.delete_session(info.id)
            say(f"deleted session {info.id}")
            return 0
    raise SoulError(f"unknown action {args.action}")  # pragma: no cover - argparse restricts it


def user_model_command(args: argparse.Namespace) -> int:
    with _store() as store:
        if args.session:  # the line of versions that session reads (a fork keeps its own)
            soul, args.user = store.user_model_line(store.find_session(args.session).id)
            if soul != args.soul:
                raise SoulError(f"session {args.session} is a session of {soul}, not {args.soul}")
        if args.action == "show":
            current = store.user_model(args.soul, args.user)
            if current is None:
                say(f"{args.soul} knows nothing about {args.user} yet")
            else:
                say(f"# version {current.version} · {current.note}\n{current.text}")
            return 0
        history = store.user_model_history(args.soul, args.user)
        if args.action == "history":
            if not history:
                say(f"{args.soul} knows nothing about {args.user} yet")
            for v in history:
                where = f" · session {v.session_id[:8]} turn {v.turn}" if v.session_id else ""
                # A note of several lines stays under its version, indented.
                note = "\n    ".join(v.note.splitlines())
                say(f"v{v.version}  {_when(v.created)}{where}  {note}")
            return 0
        versions = {v.version: v for v in history}
        if args.action == "diff":
            if not history:
                raise SoulError(f"{args.soul} has no user model of {args.user} to diff")
            new = args.to or history[-1].version
            old = args.since if args.since is not None else new - 1
            a = versions.get(old)
            b = versions.get(new)
            if b is None or (a is None and old != 0):
                raise SoulError(f"no version {old if a is None else new}; versions: {', '.join(map(str, versions))}")
            # Lines without their ends, joined here: a text with no final newline would
            # otherwise run its last line into the next line of the diff.
            before = a.text.splitlines() if a else []
            diff = "\n".join(difflib.unified_diff(before, b.text.splitlines(), f"v{old}", f"v{new}", lineterm=""))
            if diff:
                say(diff)
            return 0
        if args.action == "revert":
            if args.version not in versions:
                raise SoulError(f"no version {args.version}; versions: {', '.join(map(str, versions)) or '(none)'}")
            v = store.revert_user_model(args.soul, args.user, args.version, note=f"reverted to v{args.version}")
            say(f"user model of {args.user} is now v{v.version} (a copy of v{args.version})")
            return 0
    raise SoulError(f"unknown action {args.action}")  # pragma: no cover


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("sessions", help="list, show, export, import or delete stored sessions", description="Stored sessions under $SOUL_HOME.")
    # One sub-parser per action, each with its own arguments: with one parser for all, the
    # optional id was taken as absent before `--all` and `show --all ID` rejected the id.
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("list", help="the stored sessions, newest first")
    q.add_argument("--soul", help="list only this soul's sessions")
    for action, text in (("show", "a session's conversation"), ("export", "a session as JSON"), ("delete", "delete a session and its logs"),
                         ("fork", "a new session that is this one after turn N (the original is untouched)")):
        q = actions.add_parser(action, help=text)
        q.add_argument("id", help="session id or unique prefix")
        if action == "show":
            q.add_argument("--all", action="store_true", help="include thoughts and checks")
        if action == "fork":
            q.add_argument("--at", type=int, help="the turn to fork after (default: the latest)")
    from soul.cli.bundles import add_import_parser

    add_import_parser(actions)
    p.set_defaults(func=sessions_command, id=None, soul=None, all=False, at=None)

    p = sub.add_parser("user-model", help="show, history, diff or revert a user model", description="The markdown user model a soul keeps of each user, with its versions.")
    p.add_argument("action", choices=("show", "history", "diff", "revert"))
    p.add_argument("soul", help="the soul's name")
    p.add_argument("--user", default="user", help="whose model (default: user)")
    p.add_argument("--since", type=int, help="diff: from this version (default: the one before)")
    p.add_argument("--to", type=int, help="diff: to this version (default: the latest)")
    p.add_argument("--version", type=int, help="revert: the version to restore")
    p.add_argument("--session", help="the user model that session reads (a forked session keeps its own)")
    p.set_defaults(func=user_model_command)

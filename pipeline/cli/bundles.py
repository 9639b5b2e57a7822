"""`soul pack`, `soul unpack` and `soul sessions import`: souls moved between machines as
bundles (docs/bundles.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from soul.cli.terminal import say


def pack_command(args: argparse.Namespace) -> int:
    from soul.bundles import pack
    from soul.compiler import load_valid

    blueprint = load_valid(args.soul)
    packed = pack(blueprint, Path(args.output), sessions=args.sessions, memory=args.memory)
    manifest = packed.manifest
    files = sum(1 for m in manifest.members if m.startswith("soul/"))
    say(f"packed {manifest.soul} into {packed.path}: {files} file{'s' * (files != 1)}, "
        f"{len(manifest.sessions)} session{'s' * (len(manifest.sessions) != 1)}"
        + (f", memory ({len(manifest.memory)} files)" if manifest.memory else ""))
    return 0


def unpack_command(args: argparse.Namespace) -> int:
    from soul.bundles import unpack

    done = unpack(Path(args.bundle), Path(args.dir) if args.dir else None)
    say(f"unpacked {done.manifest.soul} into {done.folder} (blueprint {done.blueprint})")
    if done.sessions:
        say(f"imported {len(done.sessions)} session{'s' * (len(done.sessions) != 1)}: {', '.join(done.sessions)}")
    if done.memory is not None:
        say(f"restored the memory field in {done.memory}")
    say(f"next: soul run {done.blueprint}" + (f" --session {done.sessions[0]}" if done.sessions else ""))
    return 0


def import_command(args: argparse.Namespace) -> int:
    from soul.bundles import import_sessions

    loaded = import_sessions(Path(args.bundle))
    say(f"imported {len(loaded)} session{'s' * (len(loaded) != 1)}: {', '.join(loaded)}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("pack", help="write a soul (and its sessions, memory) to one .tar.gz bundle",
                       description="Pack a soul's blueprint and the files it names into a bundle with a manifest; "
                                   "optionally its stored sessions and its memory field (docs/bundles.md).")
    p.add_argument("soul", metavar="NAME_OR_PATH")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the bundle to write (e.g. soul.tar.gz)")
    p.add_argument("--sessions", action="store_true", help="include every stored session of the soul, with its user "
                   "models, summaries and mood history")
    p.add_argument("--memory", action="store_true", help="include the soul's memory field, as a field snapshot")
    p.set_defaults(func=pack_command)

    p = sub.add_parser("unpack", help="restore a soul bundle: its files, sessions and memory",
                       description="Check a bundle whole (refusing anything outside its folders, links, devices, "
                                   "oversized members, bad checksums, newer formats), then restore it; nothing is "
                                   "written if it is refused.")
    p.add_argument("bundle", metavar="FILE")
    p.add_argument("dir", nargs="?", metavar="DIR", help="where the soul's files go (default: ./SOUL); must be new or empty")
    p.set_defaults(func=unpack_command)


def add_import_parser(actions: Any) -> None:
    """`soul sessions import FILE`."""
    q = actions.add_parser("import", help="load the sessions of a soul bundle into this store")
    q.add_argument("bundle", metavar="FILE", help="a bundle written by soul pack --sessions")
    q.set_defaults(func=import_command)

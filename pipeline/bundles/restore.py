"""`soul unpack` and `soul sessions import`: a checked bundle restored on this machine.

The whole bundle is staged and checked first (`reading.stage`). Then, each step undone if a
later one fails, so a refused or failed unpack leaves nothing behind:

1. the soul's files move into the target folder (which must not exist, or be empty) with one
   rename from the staging folder beside it;
2. the memory field is rebuilt from its files in the soul's field folder (which must not hold
   a field yet) and opened once;
3. the sessions load into the session store — SQLite or PostgreSQL, whichever `SOUL_STORE`
   names — in one transaction, their `blueprint` pointing at the unpacked file.

`import_sessions` does step 3 alone (the sessions of a bundle into this store).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soul.bundles.manifest import (
    DEFAULT_LIMITS,
    MEMORY_DIR,
    SESSIONS_DIR,
    SOUL_DIR,
    Limits,
    Manifest,
)
from soul.bundles.reading import Staged, stage
from soul.errors import BundleError


@dataclass(frozen=True)
class Unpacked:
    """What `unpack` restored."""

    folder: Path
    blueprint: Path
    sessions: tuple[str, ...]
    memory: Path | None
    manifest: Manifest


def unpack(bundle: Path, target: Path | None = None, *, home: Path | None = None, store: Any = None,
           limits: Limits = DEFAULT_LIMITS) -> Unpacked:
    """Restore `bundle` into `target` (default: a folder named after the soul, here)."""
    beside = (target.expanduser().absolute().parent if target is not None else Path.cwd())
    staged = stage(bundle, beside, limits)
    folder: Path | None = None
    moved: Path | None = None
    memory: Path | None = None
    try:
        manifest = staged.manifest
        folder = (target.expanduser().absolute() if target is not None else Path.cwd() / manifest.soul)
        _move_files(staged, folder)
        moved = folder
        blueprint = folder / manifest.blueprint.removeprefix(f"{SOUL_DIR}/")
        if manifest.memory:
            memory = _restore_memory(staged, blueprint, home)
        loaded = _load_sessions(staged, store, home, str(blueprint)) if manifest.sessions else []
        return Unpacked(folder, blueprint, tuple(loaded), memory, manifest)
    except BaseException:
        if memory is not None:
            shutil.rmtree(memory, ignore_errors=True)
        if moved is not None:
            shutil.rmtree(moved, ignore_errors=True)  # moved in by this unpack: taken out again
        raise
    finally:
        staged.discard()


def import_sessions(bundle: Path, *, home: Path | None = None, store: Any = None,
                    limits: Limits = DEFAULT_LIMITS) -> list[str]:
    """Load the sessions a bundle carries into this store (its other members are checked, not
    restored); their ids."""
    from soul.store import data_home

    staged = stage(bundle, data_home(home), limits)
    try:
        if not staged.manifest.sessions:
            raise BundleError(f"{bundle}: the bundle holds no sessions (pack it with `soul pack ... --sessions`)")
        return _load_sessions(staged, store, home, None)
    finally:
        staged.discard()


def _move_files(staged: Staged, folder: Path) -> None:
    if folder.exists():
        if not folder.is_dir() or any(folder.iterdir()):
            raise BundleError(f"{folder} already exists and is not an empty folder: unpack into a new folder "
                              "(soul unpack FILE DIR)")
        folder.rmdir()
    source = staged.path(SOUL_DIR)
    try:
        source.rename(folder)  # staged beside the target: one rename, on one filesystem
    except OSError as exc:
        raise BundleError(f"cannot create {folder}: {exc.strerror or exc}") from None


def _restore_memory(staged: Staged, blueprint: Path, home: Path | None) -> Path:
    from soul.compiler import load_valid
    from soul.runtime import MemoryBridge, restore_field

    files = {name: staged.path(f"{MEMORY_DIR}/{name}") for name in staged.manifest.memory}
    return restore_field(MemoryBridge(load_valid(str(blueprint)), home), files)


def _load_sessions(staged: Staged, store: Any, home: Path | None, blueprint: str | None) -> list[str]:
    dumps = []
    for sid in staged.manifest.sessions:
        path = staged.path(f"{SESSIONS_DIR}/{sid}.json")
        try:
            dump = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BundleError(f"the bundle's session {sid} is not readable JSON ({exc})") from None
        if not isinstance(dump, dict) or (dump.get("session") or {}).get("id") != sid:
            raise BundleError(f"the bundle's file for session {sid} holds another session")
        dumps.append(dump)
    own = store is None
    if own:
        from soul.store import SessionStore

        store = SessionStore.open(home)
    try:
        return list(store.load_sessions(dumps, blueprint=blueprint))
    finally:
        if own:
            store.close()

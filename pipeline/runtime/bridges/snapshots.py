"""A soul's memory field as a few files and back, for soul bundles (`soul pack --memory`).

`field_files` opens the soul's field, snapshots it (`Field.compact`: one file holding every
memory, its vector and its metadata), closes it, and names the files that rebuild it: the
newest store snapshot and the knowledge graph's log (its manifests and segments). The vector
index is left out: the field rebuilds it on open. `restore_field` puts such files into an
empty field folder and opens the field once, so a bundle whose files do not make a field is
refused before anything else of it is used; the engine's errors become `MemoryFieldError`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soul.errors import MemoryFieldError
from soul.runtime.bridges.memory import MemoryBridge

SNAPSHOTS = "snapshots"
GRAPH_LOG = "graph/wal"


def field_files(bridge: MemoryBridge) -> tuple[list[tuple[str, Path]], dict[str, Any] | None]:
    """(name inside the field folder, path) of the files that rebuild the soul's field, and
    the embedder record of its vectors; ([], None) when the soul has no field yet."""
    path = bridge.path()
    if not path.is_dir():
        return [], None
    field = bridge.field()
    live = getattr(field, "live", None)
    engine_field = live() if callable(live) else field
    with bridge.errors("snapshot"):
        record = engine_field.embedder_record
        engine_field.compact()
    bridge.close()
    files: list[tuple[str, Path]] = []
    snaps = sorted((path / SNAPSHOTS).glob("snap_*.snap"))
    if snaps:
        files.append((f"{SNAPSHOTS}/{snaps[-1].name}", snaps[-1]))
    graph = path / GRAPH_LOG
    if graph.is_dir():
        files += [(f"{GRAPH_LOG}/{p.name}", p) for p in sorted(graph.iterdir())
                  if p.is_file() and p.suffix in (".seg", ".json")]
    return files, dict(record) if isinstance(record, Mapping) else None


def restore_field(bridge: MemoryBridge, files: Mapping[str, Path]) -> Path:
    """Copy `files` (name inside the field folder → a staged file) into the soul's field
    folder, which must not hold a field yet, and open it once; the folder. On any failure
    the folder is removed again."""
    path = bridge.path()
    if path.exists() and any(path.iterdir()):
        raise MemoryFieldError(f"the memory field {path} already exists: move it aside (or delete it) to restore "
                               "the bundle's memory there")
    created = not path.exists()
    try:
        for name, source in files.items():
            target = path / name
            if not target.resolve().is_relative_to(path.resolve()) or name.split("/")[0] not in (SNAPSHOTS, "graph"):
                raise MemoryFieldError(f"a memory file named {name!r} does not belong in a field folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        bridge.field()  # opened once: the files must make a field
        bridge.close()
    except BaseException:
        bridge.close()
        if created:
            shutil.rmtree(path, ignore_errors=True)
        else:
            for child in list(path.iterdir()):
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        raise
    return path

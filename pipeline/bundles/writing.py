"""`soul pack`: a soul — its files, optionally its sessions and its memory field — as one
`.tar.gz` bundle with a manifest.

Everything is gathered first (the soul's files read once, each session dumped in one read
transaction, the field snapshotted and its files copied aside), hashed, and then written to a
temporary file beside the target, which replaces it only when complete: a failed pack leaves
no bundle and no half of one. Members are regular files with fixed owners, modes and times, so
the same soul packs to the same members.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soul.bundles.collect import soul_files
from soul.bundles.manifest import MANIFEST, MEMORY_DIR, SESSIONS_DIR, SOUL_DIR, Manifest, check_name
from soul.errors import BundleError
from soul.language import Blueprint

CHUNK = 1 << 20


@dataclass(frozen=True)
class Packed:
    """What `pack` wrote."""

    path: Path
    manifest: Manifest


def pack(blueprint: Blueprint, out: Path, *, sessions: bool = False, memory: bool = False,
         home: Path | None = None, store: Any = None) -> Packed:
    """Write `blueprint`'s soul to the bundle `out`; with `sessions`, every stored session of
    the soul (from `store`, else the data home's); with `memory`, its memory field."""
    where = f"soul pack {blueprint.name}"
    payload: dict[str, bytes | Path] = {}
    for name, path in soul_files(blueprint):
        payload[check_name(f"{SOUL_DIR}/{name}", where)] = path.read_bytes()
    blueprint_member = f"{SOUL_DIR}/{Path(blueprint.file).resolve().relative_to(blueprint.folder.resolve()).as_posix()}"  # type: ignore[union-attr]
    session_ids: list[str] = []
    with tempfile.TemporaryDirectory(prefix="soul-pack-") as scratch:
        if sessions:
            session_ids = _sessions(blueprint, payload, store, home)
        memory_names: list[str] = []
        embedder = None
        if memory:
            memory_names, embedder = _memory(blueprint, payload, home, Path(scratch))
        members = {name: _describe(data) for name, data in payload.items()}
        manifest = Manifest(blueprint.name, blueprint_member, _version(), members, tuple(session_ids),
                            tuple(memory_names), embedder, round(time.time(), 3))
        _write(out, manifest, payload)
    return Packed(out, manifest)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("soulgraph")
    except PackageNotFoundError:  # a checkout run without installing
        return "unknown"


def _sessions(blueprint: Blueprint, payload: dict[str, bytes | Path], store: Any, home: Path | None) -> list[str]:
    own = store is None
    if own:
        from soul.store import SessionStore

        store = SessionStore.open(home)
    try:
        ids = [info.id for info in store.sessions(blueprint.name)]
        for sid in ids:
            dump = json.dumps(store.dump_session(sid), ensure_ascii=False, separators=(",", ":"))
            payload[f"{SESSIONS_DIR}/{sid}.json"] = dump.encode("utf-8")
    finally:
        if own:
            store.close()
    return ids


def _memory(blueprint: Blueprint, payload: dict[str, bytes | Path], home: Path | None,
            scratch: Path) -> tuple[list[str], dict[str, Any] | None]:
    from soul.runtime import MemoryBridge, field_files

    if blueprint.memory is None:
        raise BundleError(f"soul pack {blueprint.name} --memory: the soul has no `memory:` block, so no memory field")
    files, embedder = field_files(MemoryBridge(blueprint, home))
    names = []
    for name, path in files:
        copy = scratch / name.replace("/", "__")
        shutil.copyfile(path, copy)  # the field may compact again later: the bundle takes this copy
        payload[check_name(f"{MEMORY_DIR}/{name}", f"soul pack {blueprint.name}")] = copy
        names.append(name)
    return names, embedder


def _describe(data: bytes | Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    size = 0
    if isinstance(data, bytes):
        digest.update(data)
        size = len(data)
    else:
        with data.open("rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.type = size, 0o644, 0, tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write(out: Path, manifest: Manifest, payload: dict[str, bytes | Path]) -> None:
    out = out.expanduser()
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise BundleError(f"soul pack: the folder {folder} does not exist: create it, or write the bundle elsewhere (-o)")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            head = manifest.to_json()
            tar.addfile(_info(MANIFEST, len(head)), io.BytesIO(head))
            for name, data in payload.items():
                size = manifest.members[name]["size"]
                if isinstance(data, bytes):
                    tar.addfile(_info(name, size), io.BytesIO(data))
                else:
                    with data.open("rb") as f:
                        tar.addfile(_info(name, size), f)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

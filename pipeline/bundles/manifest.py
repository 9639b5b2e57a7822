"""A soul bundle's manifest and the rules its members' names and sizes obey.

The manifest is the archive's first member, `manifest.json`: the bundle format, the
soulgraph that wrote it, the soul, its blueprint's member, the sessions and memory files it
carries, the embedder record of the memory's vectors, and the size and sha256 of every other
member. A reader trusts none of it until it is checked: the format is one it reads, every
name is a plain relative path under one of the bundle's folders, every size is within the
limits (`Limits`), and every member arrives once, as listed, with its checksum.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from soul.errors import BundleError

FORMAT = 1
MANIFEST = "manifest.json"
SOUL_DIR, SESSIONS_DIR, MEMORY_DIR = "soul", "sessions", "memory"
FOLDERS = (SOUL_DIR, SESSIONS_DIR, MEMORY_DIR)
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+ -]{0,127}$")  # a name part: no '..', no hidden file
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Limits:
    """What a reader accepts: members, sizes, and the compression ratio while streaming."""

    members: int = 10_000
    member_bytes: int = 1 << 30  # one member, uncompressed
    total_bytes: int = 4 << 30  # every member, uncompressed
    manifest_bytes: int = 1 << 20
    ratio: float = 200.0  # uncompressed / compressed bytes, checked once past `ratio_after`
    ratio_after: int = 8 << 20


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Manifest:
    """What a bundle holds (see the module's docstring)."""

    soul: str
    blueprint: str  # the blueprint's member, under soul/
    soulgraph: str
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {size, sha256}
    sessions: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()  # names inside the field folder (memory/<name>)
    embedder: dict[str, Any] | None = None
    created: float = 0.0
    format: int = FORMAT

    def to_json(self) -> bytes:
        data = {"format": self.format, "soulgraph": self.soulgraph, "created": self.created, "soul": self.soul,
                "blueprint": self.blueprint, "sessions": list(self.sessions), "memory": list(self.memory),
                "embedder": self.embedder, "members": self.members}
        return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> Manifest:
        """The manifest, checked; BundleError saying what is wrong."""
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BundleError(f"{where}: its manifest is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise BundleError(f"{where}: its manifest is not a JSON object")
        version = data.get("format")
        if not isinstance(version, int) or isinstance(version, bool):
            raise BundleError(f"{where}: its manifest has no format number")
        if version > FORMAT:
            raise BundleError(f"{where}: bundle format {version} is newer than this soulgraph reads ({FORMAT}; it was "
                              f"written by soulgraph {str(data.get('soulgraph'))[:40]}): upgrade soulgraph to unpack it")
        if version < 1:
            raise BundleError(f"{where}: bundle format {version} is not one soulgraph ever wrote")
        members = data.get("members")
        if not isinstance(members, dict):
            raise BundleError(f"{where}: its manifest lists no members")
        for name, entry in members.items():
            check_name(name, where)
            if (not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or entry["size"] < 0
                    or not isinstance(entry.get("sha256"), str) or not _SHA256.match(entry["sha256"])):
                raise BundleError(f"{where}: the manifest's entry for {name!r} needs a size and a sha256")
        soul, blueprint = data.get("soul"), data.get("blueprint")
        if not isinstance(soul, str) or not _PART.match(soul):
            raise BundleError(f"{where}: the manifest names no valid soul")
        if not isinstance(blueprint, str) or blueprint not in members or not blueprint.startswith(f"{SOUL_DIR}/"):
            raise BundleError(f"{where}: the manifest's blueprint {blueprint!r} is not one of its soul/ members")
        sessions, memory = data.get("sessions") or [], data.get("memory") or []
        if not isinstance(sessions, list) or any(f"{SESSIONS_DIR}/{s}.json" not in members for s in sessions if isinstance(s, str)) \
                or not all(isinstance(s, str) for s in sessions):
            raise BundleError(f"{where}: the manifest's sessions are not among its members")
        if not isinstance(memory, list) or not all(isinstance(m, str) and f"{MEMORY_DIR}/{m}" in members for m in memory):
            raise BundleError(f"{where}: the manifest's memory files are not among its members")
        embedder = data.get("embedder")
        return cls(soul, blueprint, str(data.get("soulgraph", "")), members, tuple(sessions), tuple(memory),
                   embedder if isinstance(embedder, dict) else None, float(data.get("created") or 0.0), version)


def check_name(name: Any, where: str) -> str:
    """A member name as the bundle allows it: `folder/part/.../part`, folder one of FOLDERS,
    each part plain (no '..', '.', empty or hidden part, no backslash, no drive, no NUL)."""
    if not isinstance(name, str) or not name or len(name) > 1024:
        raise BundleError(f"{where}: a member has no usable name")
    if name.startswith("/") or "\\" in name or ":" in name:
        raise BundleError(f"{where}: member {name!r} has an absolute path: a bundle's members are relative")
    parts = name.split("/")
    if parts[0] not in FOLDERS or len(parts) < 2 or not all(_PART.match(p) for p in parts[1:]):
        raise BundleError(f"{where}: member {name!r} would be written outside the bundle's folders "
                          f"({', '.join(FOLDERS)}): refused")
    return name

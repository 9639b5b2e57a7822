"""Reading a soul bundle as the hostile input it is: streamed, checked, staged.

`stage` reads the archive once, front to back (`tarfile`'s stream mode: no seeking, no member
read twice), and writes each member into a fresh staging folder only after its header passed:

- the first member is `manifest.json` (at most `Limits.manifest_bytes`), of a format this
  soulgraph reads (a newer one is refused, saying to upgrade);
- every other member is a regular file — links, devices, FIFOs and folders are refused —
  whose name is a plain relative path under the bundle's folders (`manifest.check_name`),
  listed in the manifest, seen once, of the listed size and at most `Limits.member_bytes`;
- the members' total stays under `Limits.total_bytes`, and past `Limits.ratio_after` bytes
  the uncompressed bytes may be at most `Limits.ratio` times the compressed bytes read so far
  (a compression bomb is stopped while it inflates, not after);
- each member's sha256 matches the manifest's, and every listed member arrives.

Any failure removes the staging folder and raises `BundleError`: nothing of a refused bundle
is left anywhere. Files are written with O_EXCL and mode 0644, whatever the archive says.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from soul.bundles.manifest import DEFAULT_LIMITS, MANIFEST, Limits, Manifest, check_name
from soul.errors import BundleError

CHUNK = 1 << 16


@dataclass(frozen=True)
class Staged:
    """A bundle checked whole and written into `folder` (member names as paths under it)."""

    folder: Path
    manifest: Manifest

    def path(self, member: str) -> Path:
        return self.folder / member

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class _Counting:
    """The compressed file, counting the bytes read from it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.read_bytes += len(data)
        return data


def stage(bundle: Path, beside: Path, limits: Limits = DEFAULT_LIMITS) -> Staged:
    """Check `bundle` whole and stage its members in a new folder inside `beside`."""
    where = str(bundle)
    try:
        raw = bundle.open("rb")
    except OSError as exc:
        raise BundleError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    beside.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".soul-unpack-", dir=beside))
    try:
        with raw:
            counting = _Counting(raw)
            manifest = _read(counting, folder, where, limits)
        return Staged(folder, manifest)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _read(counting: _Counting, folder: Path, where: str, limits: Limits) -> Manifest:
    try:
        tar = tarfile.open(fileobj=counting, mode="r|gz")  # type: ignore[call-overload]  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise BundleError(f"{where}: not a soul bundle (a .tar.gz): {exc}") from None
    manifest: Manifest | None = None
    seen: set[str] = set()
    total = 0
    count = 0
    try:
        with tar:
            for member in tar:
                count += 1
                if count > limits.members + 1:
                    raise BundleError(f"{where}: more than {limits.members} members: refused")
                name = member.name
                _check_type(member, where)
                if manifest is None:
                    if name != MANIFEST:
                        raise BundleError(f"{where}: its first member is {name!r}, not {MANIFEST}: not a soul bundle")
                    if member.size > limits.manifest_bytes:
                        raise BundleError(f"{where}: its manifest is {member.size:,} bytes, over {limits.manifest_bytes:,}")
                    manifest = Manifest.from_json(_bytes(tar, member, limits.manifest_bytes, where), where)
                    continue
                check_name(name, where)
                listed = manifest.members.get(name)
                if listed is None:
                    raise BundleError(f"{where}: member {name!r} is not in its manifest: refused")
                if name in seen:
                    raise BundleError(f"{where}: member {name!r} appears twice: refused")
                seen.add(name)
                if member.size > limits.member_bytes:
                    raise BundleError(f"{where}: member {name!r} is {member.size:,} bytes, over the limit of {limits.member_bytes:,}")
                if member.size != listed["size"]:
                    raise BundleError(f"{where}: member {name!r} is {member.size:,} bytes; its manifest says {listed['size']:,}")
                if total + member.size > limits.total_bytes:
                    raise BundleError(f"{where}: its members add up to more than {limits.total_bytes:,} bytes: refused")
                total = _copy(tar, member, folder / name, listed["sha256"], total, counting, where, limits)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BundleError(f"{where}: the archive is damaged or cut short ({type(exc).__name__}: {exc})") from None
    if manifest is None:
        raise BundleError(f"{where}: it holds no manifest: not a soul bundle")
    missing = sorted(set(manifest.members) - seen)
    if missing:
        raise BundleError(f"{where}: member{'s' * (len(missing) > 1)} {', '.join(missing[:5])} listed in its manifest "
                          "are missing: the bundle is incomplete")
    return manifest


def _check_type(member: tarfile.TarInfo, where: str) -> None:
    if member.issym() or member.islnk():
        raise BundleError(f"{where}: member {member.name!r} is a link (to {member.linkname!r}): a bundle holds only regular files")
    if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
        raise BundleError(f"{where}: member {member.name!r} is a device or FIFO: a bundle holds only regular files")
    if not member.isreg():
        raise BundleError(f"{where}: member {member.name!r} is not a regular file: refused")


def _bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int, where: str) -> bytes:
    source = tar.extractfile(member)
    if source is None:
        raise BundleError(f"{where}: member {member.name!r} has no content")
    data = source.read(limit + 1)
    if len(data) > limit:
        raise BundleError(f"{where}: member {member.name!r} is over {limit:,} bytes")
    return data


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, sha256: str, total: int,
          counting: _Counting, where: str, limits: Limits) -> int:
    """Stream one member to `target`, hashing and counting; the new total."""
    source = tar.extractfile(member)
    if source is None:
        raise BundleError(f"{where}: member {member.name!r} has no content")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            total += len(chunk)
            if written > member.size or written > limits.member_bytes:
                raise BundleError(f"{where}: member {member.name!r} holds more than it declares: refused")
            _check_ratio(total, counting, where, limits, member.name)
            digest.update(chunk)
            out.write(chunk)
    if written != member.size:
        raise BundleError(f"{where}: member {member.name!r} is cut short ({written:,} of {member.size:,} bytes)")
    if digest.hexdigest() != sha256:
        raise BundleError(f"{where}: member {member.name!r} does not match its checksum (sha256 {digest.hexdigest()[:16]}…, "
                          f"the manifest says {sha256[:16]}…): the bundle is damaged or was altered")
    return total


def _check_ratio(total: int, counting: _Counting, where: str, limits: Limits, name: Any) -> None:
    if total > limits.ratio_after and total > limits.ratio * max(counting.read_bytes, 1):
        raise BundleError(f"{where}: member {name!r} inflates {total / max(counting.read_bytes, 1):,.0f} times its compressed "
                          f"size (limit {limits.ratio:g}): a compression bomb? refused")

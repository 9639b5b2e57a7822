"""Hostile bundles (docs/bundles.md): archives built here that try to write outside the
target, carry links or devices, lie about sizes, inflate like bombs, fail their checksums or
claim a newer format — each refused with a clear BundleError, and nothing written: no target
folder, no staging folder left, no session in the store, no memory field."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from soul.bundles import Limits, import_sessions, unpack
from soul.errors import BundleError, StoreError
from soul.store import SessionStore

BLUEPRINT = b"soul: evil\nversion: 1\nsteps:\n  reply: {uses: external_dialogue}\n"


def info(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size, member.type, member.linkname, member.mode = size, kind, link, 0o644
    return member


def manifest(members: dict[str, bytes], **overrides: object) -> bytes:
    data = {"format": 1, "soulgraph": "0.1.0", "created": 0, "soul": "evil", "blueprint": "soul/evil.yaml",
            "sessions": [], "memory": [], "embedder": None,
            "members": {n: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in members.items()}}
    data.update(overrides)
    return json.dumps(data).encode()


def build(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, data in entries:
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    return path


def plain(path: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]] = (), members: dict[str, bytes] | None = None,
          **overrides: object) -> Path:
    """A valid bundle of one blueprint, plus `extra` entries (listed in the manifest unless
    `members` says what it lists)."""
    listed = members if members is not None else {"soul/evil.yaml": BLUEPRINT, **{m.name: d or b"" for m, d in extra if m.isreg()}}
    head = manifest(listed, **overrides)
    return build(path, [(info("manifest.json", len(head)), head), (info("soul/evil.yaml", len(BLUEPRINT)), BLUEPRINT), *extra])


def refused(bundle: Path, tmp_path: Path, match: str, limits: Limits | None = None) -> None:
    target = tmp_path / "out" / "evil"
    kwargs = {"limits": limits} if limits is not None else {}
    with pytest.raises(BundleError, match=match):
        unpack(bundle, target, home=tmp_path / "home", **kwargs)
    assert not target.exists(), "a refused bundle left its target behind"
    assert not any(p.name.startswith(".soul-unpack-") for p in (tmp_path / "out").iterdir()), "staging left behind"
    assert not (tmp_path / "home" / "fields").exists()
    assert not (tmp_path / "outside").exists()
    with SessionStore.open(tmp_path / "home") as store:
        assert store.sessions() == []


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a member climbing out with ..": (lambda p: plain(p, [(info("soul/../../outside", 3), b"bad")]), "outside the bundle's folders"),
    "a member outside the bundle's folders": (lambda p: plain(p, [(info("outside/x", 3), b"bad")]), "outside the bundle's folders"),
    "an absolute path": (lambda p: plain(p, [(info("/tmp/outside-abs", 3), b"bad")], members={"soul/evil.yaml": BLUEPRINT}), "absolute path"),
    "a hidden file": (lambda p: plain(p, [(info("soul/.bashrc", 3), b"bad")]), "outside the bundle's folders"),
    "a symlink": (lambda p: plain(p, [(info("soul/link", kind=tarfile.SYMTYPE, link="/etc/passwd"), None)], members={"soul/evil.yaml": BLUEPRINT}), "is a link"),
    "a hard link": (lambda p: plain(p, [(info("soul/hard", kind=tarfile.LNKTYPE, link="soul/evil.yaml"), None)], members={"soul/evil.yaml": BLUEPRINT}), "is a link"),
    "a character device": (lambda p: plain(p, [(info("soul/dev", kind=tarfile.CHRTYPE), None)], members={"soul/evil.yaml": BLUEPRINT}), "device or FIFO"),
    "a FIFO": (lambda p: plain(p, [(info("soul/fifo", kind=tarfile.FIFOTYPE), None)], members={"soul/evil.yaml": BLUEPRINT}), "device or FIFO"),
    "a folder entry": (lambda p: plain(p, [(info("soul/sub", kind=tarfile.DIRTYPE), None)], members={"soul/evil.yaml": BLUEPRINT}), "not a regular file"),
    "a member its manifest does not list": (lambda p: plain(p, [(info("soul/extra.md", 3), b"bad")], members={"soul/evil.yaml": BLUEPRINT}), "not in its manifest"),
    "a member listed twice": (lambda p: plain(p, [(info("soul/evil.yaml", len(BLUEPRINT)), BLUEPRINT)]), "appears twice"),
    "a listed member that is missing": (lambda p: plain(p, members={"soul/evil.yaml": BLUEPRINT, "soul/gone.md": b"x"}), "missing"),
    "a bad checksum": (lambda p: plain(p, members={"soul/evil.yaml": BLUEPRINT.replace(b"evil", b"good")}), "does not match its checksum"),
    "a size the manifest does not say": (lambda p: plain(p, members={"soul/evil.yaml": BLUEPRINT + b"#"}), "its manifest says"),
    "a newer format": (lambda p: plain(p, format=99), "format 99 is newer than this soulgraph reads .*upgrade soulgraph"),
    "no manifest first": (lambda p: build(p, [(info("soul/evil.yaml", len(BLUEPRINT)), BLUEPRINT)]), "not manifest.json"),
    "a blueprint outside the soul folder": (lambda p: plain(p, blueprint="sessions/x.json"), "is not one of its soul/ members"),
    "not an archive at all": (lambda p: (p.write_bytes(b"PK\x03\x04 not a tar"), p)[1], "not a soul bundle"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_bundle_is_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    (tmp_path / "out").mkdir()
    make, match = CASES[case]
    refused(make(tmp_path / "evil.tar.gz"), tmp_path, match)


def test_an_oversized_member_is_refused_before_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    big = b"x" * 5000
    bundle = plain(tmp_path / "big.tar.gz", [(info("soul/big.md", len(big)), big)])
    refused(bundle, tmp_path, "over the limit of 4,096", Limits(member_bytes=4096))
    refused(bundle, tmp_path, "more than 4,500 bytes", Limits(total_bytes=4500))


def test_a_compression_bomb_is_stopped_while_it_inflates(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    zeros = bytes(40 << 20)  # 40 MiB of zeros: ~40 KiB compressed
    bundle = plain(tmp_path / "bomb.tar.gz", [(info("soul/bomb.md", len(zeros)), zeros)])
    assert bundle.stat().st_size < 1 << 20
    refused(bundle, tmp_path, "inflates .* times its compressed size .*compression bomb")


def test_a_truncated_archive_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    text = bytes(range(256)) * 400
    whole = plain(tmp_path / "whole.tar.gz", [(info("soul/data.md", len(text)), text)]).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    refused(cut, tmp_path, "damaged or cut short|cut short")


def test_a_session_dump_that_is_malformed_writes_no_session(tmp_path: Path) -> None:
    dump = json.dumps({"format": 1, "session": {"id": "abc"}, "tables": {}, "columns": {}}).encode()
    bundle = plain(tmp_path / "s.tar.gz", [(info("sessions/abc.json", len(dump)), dump)], sessions=["abc"])
    with pytest.raises(StoreError, match="session row is malformed"):
        import_sessions(bundle, home=tmp_path / "home")
    with SessionStore.open(tmp_path / "home") as store:
        assert store.sessions() == []


def test_gzip_of_a_non_tar_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    bundle = tmp_path / "x.tar.gz"
    bundle.write_bytes(gzip.compress(b"hello, not a tar archive" * 100))
    refused(bundle, tmp_path, "not a soul bundle|damaged")

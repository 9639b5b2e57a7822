"""Embedding models' identity: which model a field's vectors come from.

An `EmbedderIdentity` names a model (name, dimension, sha256 of its ONNX file): the field
logs it on its first write (a MODEL entry, carried by snapshots) and refuses an embedder
whose identity differs (`EmbedderMismatch`). Two identities are the same model when their
dimensions agree and, if both have a fingerprint, their fingerprints do (the same file given
under two names is the same model); without fingerprints (test embedders, objects that carry
none) their names decide.

How a model is chosen is `embedder_registry.load_embedder`.

Fingerprints are computed once per model file: memoised per process and cached on disk in
``$SOUL_HOME/cache/fingerprints.json`` (``~/.soul`` by default), keyed by the file's resolved
path, size and modification time, so a changed file is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EmbedderIdentity", "file_fingerprint", "identity_of"]

_memo: dict[tuple[str, int, int], str] = {}
_memo_lock = threading.Lock()


@dataclass(frozen=True)
class EmbedderIdentity:
    """Which embedding model produced a vector: `name`, `dim`, and `fingerprint` (sha256 of
    the model file, "" when unknown)."""

    name: str
    dim: int
    fingerprint: str = ""

    def record(self) -> dict[str, object]:
        """The JSON record a field logs."""
        return {"name": self.name, "dim": self.dim, "sha256": self.fingerprint}

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> EmbedderIdentity:
        """The identity a field's record describes."""
        dim = record.get("dim", 0)
        return cls(str(record.get("name", "?")), int(dim) if isinstance(dim, int | str) else 0,
                   str(record.get("sha256") or ""))

    def same_model(self, other: EmbedderIdentity) -> bool:
        """True when vectors of the two are comparable (see the module docstring)."""
        if self.dim != other.dim:
            return False
        if self.fingerprint and other.fingerprint:
            return self.fingerprint == other.fingerprint
        return self.name == other.name

    def describe(self) -> str:
        """`name (dim-d, sha256 abcdef012345…)` for messages."""
        fp = f", sha256 {self.fingerprint[:12]}…" if self.fingerprint else ""
        return f"{self.name!r} ({self.dim}-d{fp})"


def identity_of(embedder: Any) -> EmbedderIdentity:
    """The identity of any embedder: its own `identity` if it has one, else its `model_id`
    (or class name) and `dim`, with no fingerprint."""
    own = getattr(embedder, "identity", None)
    if isinstance(own, EmbedderIdentity):
        return own
    name = getattr(embedder, "model_id", None) or type(embedder).__name__
    return EmbedderIdentity(str(name), int(embedder.dim))


def _cache_file() -> Path:
    """``$SOUL_HOME/cache/fingerprints.json`` (the data home, ``~/.soul`` by default)."""
    home = os.environ.get("SOUL_HOME") or str(Path.home() / ".soul")
    return Path(home).expanduser() / "cache" / "fingerprints.json"


def file_fingerprint(path: str | Path) -> str:
    """sha256 (hex) of a model file, computed once per file version (see the module
    docstring); a cache that cannot be read or written only costs a re-hash."""
    real = Path(path).resolve()
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns)
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    cache_key = f"{key[0]}|{key[1]}|{key[2]}"
    cache = _cache_file()
    try:
        cached = json.loads(cache.read_text()).get(cache_key)
    except (OSError, ValueError, AttributeError):
        cached = None
    if isinstance(cached, str) and len(cached) == 64:
        digest = cached
    else:
        h = hashlib.sha256()
        with open(real, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        _store_cached(cache, cache_key, digest)
    with _memo_lock:
        _memo[key] = digest
    return digest


def _store_cached(cache: Path, key: str, digest: str) -> None:
    try:
        try:
            data = json.loads(cache.read_text())
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        data[key] = digest
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=0, sort_keys=True))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home: the fingerprint is recomputed next process

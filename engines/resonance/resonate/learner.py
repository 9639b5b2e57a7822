"""Self-tuning: Thompson sampling over the resonance parameters, conditioned on the query.

Each parameter's range (`PARAMETERS`, the reference's) is split into ``arms`` evenly spaced
values; every arm has a Beta(2, 2) prior per context bucket (query length class × technical
or not, `QueryFeatures.bucket`). `sample` draws once from every arm's Beta posterior with
numpy's Generator and takes the argmax per parameter — one draw per arm per query, never
inside a comparator (the original re-drew from a normal approximation on every comparison).

Credit: `feedback(draw, useful, position)` gives r = 1/(1 + 0.2·position) to the arm each
parameter used, in the draw's bucket and in the global bucket: alpha += r if useful, beta +=
r otherwise. An arm's alpha + beta is capped at ``evidence_cap`` by scaling both down, so
old evidence fades and the learner keeps adapting. Parameters are credited independently
(a factored bandit): a useful memory credits every value that was in force when it surfaced.

Sparse buckets borrow from the global one: a bucket with e evidence for a parameter (summed
over its arms) draws from its own posterior plus s·(the global evidence), s = max(0, 1 −
e/min_bucket_evidence). A new bucket therefore starts from what all queries taught, and is on
its own after ``min_bucket_evidence`` (20) units of reward.

The state (posteriors and per-realm reliability counts) is saved as JSON, atomically.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ResonanceError
from ..recall.text import clip_long_words, tokenize

__all__ = [
    "PARAMETERS",
    "Draw",
    "LearnerStateError",
    "QueryFeatures",
    "ThompsonLearner",
    "UnknownDraw",
    "query_features",
]

log = logging.getLogger("soul.engines.resonance.resonate.learner")

# The tuned resonance parameters and their ranges (activation weight = 1 − semantic_weight).
PARAMETERS: dict[str, tuple[float, float]] = {
    "spread_strength": (0.2, 0.8),
    "spread_decay": (0.3, 0.7),
    "hebbian": (0.01, 0.1),
    "basin_boost": (1.0, 1.5),
    "similarity_threshold": (0.7, 0.95),
    "inhibition": (0.3, 0.9),
    "semantic_weight": (0.4, 0.8),
}
GLOBAL = "*"  # the bucket every feedback also credits
PRIOR = 2.0  # Beta(2, 2) for every arm
REALM_PRIOR = 1.0  # Beta(1, 1): an unknown realm is 0.5 reliable
POSITION_DISCOUNT = 0.2
_STATE_VERSION = 1


class LearnerStateError(ConfigError):
    """A saved learner state cannot be read or does not fit this learner."""


class UnknownDraw(ResonanceError, KeyError):
    """`feedback` got a draw id the learner no longer (or never) remembered."""

    def __init__(self, draw_id: str) -> None:
        self.draw_id = draw_id
        super().__init__(draw_id)

    def __str__(self) -> str:
        return (f"no recent draw {self.draw_id!r}: the learner keeps the last draws of this "
                "process only; pass the Draw itself to credit an older one")


# Signs of a technical query: identifiers, paths, calls, operators, file names, versions.
_TECHNICAL = re.compile(
    r"[A-Za-z]\w*_\w+"  # snake_case
    r"|[a-z]+[A-Z]\w*"  # camelCase
    r"|\w+\(\)?|::|->|=>|[{}\[\];<>=]"  # calls, operators, brackets
    r"|\w+/\w+"  # paths
    r"|\w\.(py|js|ts|go|rs|java|c|h|cpp|rb|cs|json|yaml|yml|toml|md|sh)\b"  # file names
    r"|\bv?\d+\.\d+"  # versions, decimals
)
_TECH_WORDS = frozenset(
    """api bug bugs build cli class code commit compile compiler config database debug deploy
    error errors exception function git http json kernel library method module null numpy
    python query regex rust schema server sql stack stacktrace syntax test tests thread
    traceback type typescript variable""".split()  # noqa: SIM905 - readable as prose
)
_WORDS = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class QueryFeatures:
    """What the learner conditions on: characters, content terms, technical or not."""

    length: int
    terms: int
    technical: bool

    def bucket(self) -> str:
        """The context bucket: ``short`` (<= 3 terms), ``medium`` (<= 8), ``long``, and
        ``technical`` or ``plain`` — six buckets, e.g. ``"medium/technical"``."""
        size = "short" if self.terms <= 3 else "medium" if self.terms <= 8 else "long"
        return f"{size}/{'technical' if self.technical else 'plain'}"


def query_features(query: str) -> QueryFeatures:
    """Features of a query: its length in characters, its content terms (the BM25 tokens:
    stop words dropped) and whether it looks technical (identifiers, paths, calls,
    operators, file names, versions, or a word such as "error", "function", "sql")."""
    tokens = tokenize(query)
    # Clipped first: the identifier patterns look inside words, which on one huge word
    # would cost its length squared.
    technical = bool(_TECHNICAL.search(clip_long_words(query))) or not _TECH_WORDS.isdisjoint(
        _WORDS.findall(query.lower()))
    return QueryFeatures(len(query.strip()), len(tokens), technical)


@dataclass(frozen=True)
class Draw:
    """One sampled parameter set: its id, bucket, values and the arm index behind each."""

    id: str
    bucket: str
    params: dict[str, float]
    arms: dict[str, int]


class ThompsonLearner:
    """Thompson sampling with Beta posteriors over discretised resonance parameters."""

    def __init__(self, *, seed: int | None = None, arms: int = 5, path: str | Path | None = None,
                 evidence_cap: float = 100.0, min_bucket_evidence: float = 20.0,
                 keep_draws: int = 4096) -> None:
        """``path``: where `save()` writes; a state already there is resumed (an unreadable
        one is logged and replaced by a fresh learner at the next save)."""
        if arms < 2:
            raise ConfigError(f"a learner needs at least 2 arms per parameter, got {arms}")
        if not evidence_cap > 2 * PRIOR or not math.isfinite(evidence_cap):
            raise ConfigError(f"evidence_cap must exceed the prior's {2 * PRIOR:g}, "
                              f"got {evidence_cap}")
        if not min_bucket_evidence >= 0:
            raise ConfigError(f"min_bucket_evidence must be >= 0, got {min_bucket_evidence}")
        self.arms = arms
        self.evidence_cap = float(evidence_cap)
        self.min_bucket_evidence = float(min_bucket_evidence)
        self.path = Path(path).expanduser() if path is not None else None
        self.names = list(PARAMETERS)
        # Rounded: 0.2 + 3·0.15 should read 0.65, not 0.6500000000000001.
        self.values = np.round([np.linspace(lo, hi, arms) for lo, hi in PARAMETERS.values()], 10)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._alpha: dict[str, np.ndarray] = {GLOBAL: self._prior()}
        self._beta: dict[str, np.ndarray] = {GLOBAL: self._prior()}
        self._realms: dict[str, list[float]] = {}
        self._draws: OrderedDict[str, Draw] = OrderedDict()
        self._keep_draws = keep_draws
        self.rounds = 0  # feedback calls so far
        if self.path is not None and self.path.exists():
            try:
                self._restore(json.loads(self.path.read_text("utf-8")), str(self.path))
            except (OSError, ValueError, LearnerStateError) as exc:
                log.warning("learner state %s not resumed, starting fresh: %s", self.path, exc)

    def _prior(self) -> np.ndarray:
        return np.full((len(self.names), self.arms), PRIOR)

    # -- posteriors ------------------------------------------------------------------------

    def posterior(self, features: QueryFeatures | str) -> tuple[np.ndarray, np.ndarray]:
        """The (alpha, beta) arrays, shape (parameters, arms), a query's draw uses: its
        bucket's own, plus the global bucket's evidence while the bucket has little."""
        bucket = features if isinstance(features, str) else features.bucket()
        with self._lock:
            return self._effective(bucket)

    def _effective(self, bucket: str) -> tuple[np.ndarray, np.ndarray]:
        ga, gb = self._alpha[GLOBAL], self._beta[GLOBAL]
        if bucket == GLOBAL or bucket not in self._alpha:
            return ga.copy(), gb.copy()
        ba, bb = self._alpha[bucket], self._beta[bucket]
        if self.min_bucket_evidence <= 0:
            return ba.copy(), bb.copy()
        evidence = np.maximum(ba + bb - 2 * PRIOR, 0.0).sum(axis=1, keepdims=True)
        share = np.clip(1.0 - evidence / self.min_bucket_evidence, 0.0, 1.0)
        a = ba + share * np.maximum(ga - PRIOR, 0.0)
        b = bb + share * np.maximum(gb - PRIOR, 0.0)
        return a, b

    def sample_posteriors(self, features: QueryFeatures | str) -> np.ndarray:
        """One Beta draw per arm, shape (parameters, arms) — what `sample` takes argmax of."""
        a, b = self.posterior(features)
        with self._lock:
            return self._rng.beta(a, b)

    def sample(self, features: QueryFeatures) -> Draw:
        """Draw every arm's posterior once; each parameter takes its highest-drawing arm."""
        bucket = features.bucket()
        chosen = self.sample_posteriors(bucket).argmax(axis=1)
        draw = Draw(
            id=uuid.uuid4().hex[:16], bucket=bucket,
            params={n: float(self.values[i, chosen[i]]) for i, n in enumerate(self.names)},
            arms={n: int(chosen[i]) for i, n in enumerate(self.names)},
        )
        with self._lock:
            self._draws[draw.id] = draw
            while len(self._draws) > self._keep_draws:
                self._draws.popitem(last=False)
        return draw

    def best(self, features: QueryFeatures) -> dict[str, float]:
        """Each parameter's value with the highest posterior mean (no sampling); ties, as
        before any feedback, go to the arm nearest the middle of the range."""
        a, b = self.posterior(features)
        centre = (self.arms - 1) / 2
        tie = 1e-9 * np.abs(np.arange(self.arms) - centre)
        chosen = (a / (a + b) - tie).argmax(axis=1)
        return {n: float(self.values[i, chosen[i]]) for i, n in enumerate(self.names)}

    # -- feedback --------------------------------------------------------------------------

    def feedback(self, draw: Draw | str, useful: bool, position: int = 0,
                 realm: str | None = None) -> None:
        """Credit the arms ``draw`` used: r = 1/(1 + 0.2·position) (position = the rank of
        the memory the feedback is about, 0 best) to alpha if ``useful``, else to beta, in
        the draw's bucket and the global one. ``realm``: also count it toward that realm's
        reliability (`realm_reliability`)."""
        with self._lock:
            if isinstance(draw, str):
                found = self._draws.get(draw)
                if found is None:
                    raise UnknownDraw(draw)
                draw = found
            r = 1.0 / (1.0 + POSITION_DISCOUNT * max(int(position), 0))
            for bucket in {draw.bucket, GLOBAL}:
                if bucket not in self._alpha:
                    self._alpha[bucket], self._beta[bucket] = self._prior(), self._prior()
                a, b = self._alpha[bucket], self._beta[bucket]
                for name, arm in draw.arms.items():
                    if name not in PARAMETERS or not 0 <= arm < self.arms:
                        continue  # a draw from a learner with other parameters: skip
                    i = self.names.index(name)
                    if useful:
                        a[i, arm] += r
                    else:
                        b[i, arm] += r
                    total = a[i, arm] + b[i, arm]
                    if total > self.evidence_cap:
                        a[i, arm] *= self.evidence_cap / total
                        b[i, arm] *= self.evidence_cap / total
            if realm is not None:
                counts = self._realms.setdefault(realm, [REALM_PRIOR, REALM_PRIOR])
                counts[0 if useful else 1] += r
                total = counts[0] + counts[1]
                if total > self.evidence_cap:
                    counts[0] *= self.evidence_cap / total
                    counts[1] *= self.evidence_cap / total
            self.rounds += 1

    def realm_reliability(self, realms: Sequence[str | None]) -> np.ndarray:
        """Posterior mean usefulness per realm (0.5 for an unknown realm or None) — the
        `RealmReliability` scoring factor's extra["realm_reliability"]."""
        with self._lock:
            out = []
            for realm in realms:
                a, b = self._realms.get(realm or "", (REALM_PRIOR, REALM_PRIOR))
                out.append(a / (a + b))
        return np.array(out, np.float64)

    def weights(self) -> dict[str, Any]:
        """What the learner has learned, for people: feedback rounds, the context buckets it
        has seen, and per parameter (global bucket) each arm's value, posterior mean and
        evidence (alpha + beta beyond the prior), and the value `best` would pick now."""
        with self._lock:
            a, b = self._alpha[GLOBAL], self._beta[GLOBAL]
            centre = (self.arms - 1) / 2
            tie = 1e-9 * np.abs(np.arange(self.arms) - centre)
            means = a / (a + b)
            chosen = (means - tie).argmax(axis=1)
            parameters = {
                n: {"values": [float(v) for v in self.values[i]],
                    "mean": [round(float(m), 4) for m in means[i]],
                    "evidence": [round(float(e), 3) for e in a[i] + b[i] - 2 * PRIOR],
                    "best": float(self.values[i, chosen[i]])}
                for i, n in enumerate(self.names)
            }
            return {"rounds": self.rounds, "buckets": sorted(k for k in self._alpha if k != GLOBAL),
                    "parameters": parameters}

    # -- persistence -----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The learner as a JSON-safe dict (what `save` writes)."""
        with self._lock:
            return {
                "version": _STATE_VERSION,
                "arms": self.arms,
                "evidence_cap": self.evidence_cap,
                "min_bucket_evidence": self.min_bucket_evidence,
                "parameters": {n: list(PARAMETERS[n]) for n in self.names},
                "rounds": self.rounds,
                "posteriors": {
                    bucket: {n: {"alpha": self._alpha[bucket][i].tolist(),
                                 "beta": self._beta[bucket][i].tolist()}
                             for i, n in enumerate(self.names)}
                    for bucket in sorted(self._alpha)
                },
                "realms": {k: list(v) for k, v in sorted(self._realms.items())},
            }

    def save(self, path: str | Path | None = None) -> None:
        """Write the state as JSON to ``path`` (default: the learner's), atomically: a
        temporary file in the same folder, fsynced, then renamed over the old one."""
        target = Path(path).expanduser() if path is not None else self.path
        if target is None:
            raise ConfigError("save() needs a path: this learner was made without one")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        data = json.dumps(self.state(), indent=1).encode()
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        try:  # make the rename itself durable; not every filesystem allows a folder fsync
            fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    @classmethod
    def load(cls, path: str | Path, *, seed: int | None = None) -> ThompsonLearner:
        """A learner resumed from a saved state (`LearnerStateError` if it cannot be)."""
        path = Path(path).expanduser()
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise LearnerStateError(f"learner state {path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("arms"), int):
            raise LearnerStateError(f"learner state {path}: not a learner state (no 'arms')")
        learner = cls(seed=seed, arms=data["arms"],
                      evidence_cap=float(data.get("evidence_cap", 100.0)),
                      min_bucket_evidence=float(data.get("min_bucket_evidence", 20.0)))
        learner.path = path
        learner._restore(data, str(path))
        return learner

    def _restore(self, data: Any, where: str) -> None:
        if not isinstance(data, dict) or data.get("version") != _STATE_VERSION:
            raise LearnerStateError(f"learner state {where}: unsupported version "
                                    f"{data.get('version') if isinstance(data, dict) else None!r}")
        if data.get("arms") != self.arms:
            raise LearnerStateError(f"learner state {where} has {data.get('arms')} arms per "
                                    f"parameter; this learner has {self.arms}")
        saved = data.get("parameters", {})
        alpha: dict[str, np.ndarray] = {}
        beta: dict[str, np.ndarray] = {}
        try:
            for bucket, per_param in data["posteriors"].items():
                a, b = self._prior(), self._prior()
                for i, name in enumerate(self.names):
                    # A parameter new here, or whose range changed, starts from the prior.
                    if name in per_param and list(saved.get(name, ())) == list(PARAMETERS[name]):
                        a[i] = np.asarray(per_param[name]["alpha"], np.float64)
                        b[i] = np.asarray(per_param[name]["beta"], np.float64)
                if not (np.isfinite(a).all() and np.isfinite(b).all()
                        and (a > 0).all() and (b > 0).all()):
                    raise LearnerStateError(f"learner state {where}: bucket {bucket!r} has "
                                            "non-positive or non-finite counts")
                alpha[bucket], beta[bucket] = a, b
            realms = {str(k): [float(v[0]), float(v[1])] for k, v in data["realms"].items()}
            rounds = int(data.get("rounds", 0))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise LearnerStateError(f"learner state {where} is malformed: {exc!r}") from exc
        alpha.setdefault(GLOBAL, self._prior())
        beta.setdefault(GLOBAL, self._prior())
        dropped = set(saved) - set(PARAMETERS)
        if dropped:
            log.info("learner state %s: parameters no longer tuned: %s", where,
                     ", ".join(sorted(dropped)))
        with self._lock:
            self._alpha, self._beta, self._realms, self.rounds = alpha, beta, realms, rounds

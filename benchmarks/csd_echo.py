"""The prompt's own words in what `csd` says, on the local model.

Run: python benchmarks/csd_echo.py [--cycles 50] [--turns 20] [--model local] [--log FILE.jsonl]
     python benchmarks/csd_echo.py --rejudge FILE.jsonl   (a run's outputs judged again against
                                    the instructions of the code and templates checked out now)
Needs the `local` extra (the bundled SmolLM2-135M), unless --model names another.

One session of the built-in `csd` on a temporary data home: the subconscious loop starts with
`--cycles` cycles while `--turns` user messages are answered one after the other (the loop
runs between and beside them, as in `soul run csd`), then the run waits for the cycles left
and the spontaneous turns they start. Every output a user can see is read: each reply (the
turns' and the spontaneous ones), and each cycle's mood, criteria and S_loud impulse.

An output *echoes* the prompt when it holds ECHO_WORDS (6) consecutive words of the prompt's
instructions: the prompts of a turn and of each process's cycle as `soul explain`'s dry run
builds them — the system message less the parts that carry what was said (the mood and
criteria, the user model, the summary of earlier turns, ...), the user message's framing
less the user's words — plus each process's Persona Core and the fixed text the framework
writes around the blocks of a cycle's input. (What a model repeats of its own earlier
replies, the summaries and histories it is shown, is not an echo of the instructions.) It also counts outputs
holding a *fragment* of the instructions: a parenthesised note such as "(optional)" or
"(nothing new)", a `## ` heading, or a section's tag (`<mood>`; a name such as `S_loud` or
`ID_quiet` bare too).
Prints both counts (the goal is 0), the outputs that echo, and the run's time; then what the
cycles set: the cycles that ran (and failed), how many set a mood, criteria, an impulse, how
many moods differ, the sections the runtime dropped as echoes (read from the traces' flags), and
the model calls re-asked; how long the moods, criteria and impulses are (words: median, and how
many are a phrase of at most PHRASE_WORDS or a sentence of at most SENTENCE_WORDS); and the
median time of a user's turn (the subconscious cycles beside
it on the same model, so this is not the time of a turn alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ECHO_WORDS = 6
PHRASE_WORDS = 6  # a mood asked for "in two to four words" (a lead such as "I feel" counted)
SENTENCE_WORDS = 20  # "one short sentence"
MESSAGES = (
    "Hi, I'm Ada.",
    "I started learning to paint last month.",
    "Mostly watercolours, landscapes of the coast.",
    "My sister says I should sell them. I'm not sure.",
    "What do you think makes a painting worth buying?",
    "I get nervous showing my work to strangers.",
    "Yesterday I painted the harbour at dawn.",
    "Do you ever feel nervous?",
    "My cat knocked over the water jar again.",
    "I might take a class on Saturdays.",
    "The teacher is strict but kind, people say.",
    "What should I paint next?",
    "I tried the lighthouse, but the sky came out muddy.",
    "How do you stay patient with something hard?",
    "My friend Lena wants to come painting with me.",
    "We could go to the cliffs on Sunday.",
    "I'm worried it will rain.",
    "Tell me something that makes you curious.",
    "I think I'll frame the harbour painting.",
    "Thanks for listening. Good night!",
)
# What the framework writes around a cycle's input blocks (runtime/turn/prompting/prompt.py mind_blocks)
BLOCK_TEXT = ("(nothing new)", "(empty)", "(do not repeat these)")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def grams(text: str) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + ECHO_WORDS]) for i in range(len(w) - ECHO_WORDS + 1)}


def echoes(output: str, instructions: set[tuple[str, ...]]) -> bool:
    w = words(output)
    return any(tuple(w[i:i + ECHO_WORDS]) in instructions for i in range(len(w) - ECHO_WORDS + 1))


def fragments(instructions: str, tags: set[str]) -> set[str]:
    """The short marks of the instructions a reply should never hold."""
    found = {m.lower() for m in re.findall(r"\([^()\n]{1,40}\)", instructions)} | {b.lower() for b in BLOCK_TEXT}
    found |= {h.strip().lower() for h in re.findall(r"(?m)^## [^\n]+", instructions)}
    found |= {t.lower() for t in tags if "_" in t} | {f"<{t.lower()}>" for t in tags} | {f"</{t.lower()}>" for t in tags}
    return found


CONTEXT = ("User Model", "Working Memory", "Soul State", "Mood and Criteria", "This Turn So Far",
           "Earlier in This Conversation")


def split_system(system: str) -> str:
    """The instructions of a system message: without its parts that carry what was said."""
    return "".join(p for p in re.split(r"(?m)^(?=## )", system) if not p.startswith(tuple(f"## {h}" for h in CONTEXT)))


def instruction_text(soul: Any) -> str:
    return asyncio.run(dry_instructions(soul))


async def dry_instructions(soul: Any) -> str:
    """The instructions of csd's prompts, from a dry run of a turn and of each process's cycle
    (no model called): system messages less their context parts, the user message's framing
    less the fenced user text, each process's Persona Core, the framework's block notes."""
    from soul.runtime.dry_run import DryRun, dry_services, first_snapshot
    from soul.runtime.turn import start_turn

    plan = soul.plan
    services = dry_services(plan)
    parts = list(BLOCK_TEXT)
    scopes = (("message", "hi", plan.turn), ("spontaneous", "", plan.turn), *(("cycle", "", s) for s in plan.processes.values()))
    for kind, text, scope in scopes:
        ts = start_turn(plan, services, first_snapshot(plan, "ada"), text, kind)
        await DryRun(plan, scope, services).run(ts)
        for call in ts.calls:
            for message in call.messages:
                if message.role == "system":
                    parts.append(split_system(message.content))
                elif message.role == "user":
                    parts.append(re.sub(r"(?s)```.*?```", "", message.content))
    for process in plan.blueprint.processes.values():
        persona = getattr(process, "persona", None)
        if persona:
            parts.append(plan.blueprint.read_file(persona, "persona"))
    return "\n".join(parts)


def judge(outputs: list[dict[str, Any]], instructions: str, tags: set[str]) -> None:
    """Each output's verdict: `echo` (6+ words of the instructions) and its `fragments`."""
    given = grams(instructions)
    marks = fragments(instructions, tags)
    for out in outputs:
        out["echo"] = echoes(out["text"], given)
        lowered = out["text"].lower()
        out["fragments"] = sorted(m for m in marks if m in lowered)


def soul_tags(soul: Any) -> set[str]:
    return {s.tag for scope in (soul.plan.turn, *soul.plan.processes.values()) for step in scope.steps.values()
            for s in step.kind.sections}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from soul import load
    from soul.runtime import CycleFinished, Reply, TurnCommitted

    soul = load("csd", model=args.model)
    outputs: list[dict[str, Any]] = []
    spontaneous: list[str] = []
    before_user: list[str] = []
    user_spoke = False
    cycles: dict[str, int] = dict.fromkeys(("ran", "failed", "mood", "criteria", "impulse", "trigger"), 0)
    moods: list[str] = []
    turn_seconds: list[float] = []

    def listen(event: Any) -> None:
        if isinstance(event, Reply) and event.spontaneous:
            spontaneous.append(event.text)
            outputs.append({"where": "spontaneous reply", "text": event.text})
            if not user_spoke:
                before_user.append(event.text)
        elif isinstance(event, CycleFinished) and event.error is not None:
            cycles["failed"] += 1
        elif isinstance(event, CycleFinished):
            mood = event.outputs.get("mood") or {}
            impulse = event.outputs.get("impulse") or {}
            cycles["ran"] += 1
            for key, value in (("mood", mood.get("mood")), ("criteria", mood.get("criteria")),
                               ("impulse", impulse.get("loud")), ("trigger", impulse.get("trigger") is True)):
                cycles[key] += bool(value if not isinstance(value, str) else value.strip())
            if (mood.get("mood") or "").strip():
                moods.append(mood["mood"].strip().lower())
            for where, text in (("mood", mood.get("mood")), ("criteria", mood.get("criteria")), ("impulse", impulse.get("loud"))):
                if text:
                    outputs.append({"where": f"cycle {event.cycle} {where}", "text": str(text)})
        elif isinstance(event, TurnCommitted):
            pass

    started = time.perf_counter()
    session = soul.session(user="ada")
    session.subscribe(listen)
    try:
        await session.start(cycles=args.cycles)
        await asyncio.sleep(args.wait_first)  # a new user reads the page before typing
        for message in MESSAGES[: args.turns]:
            user_spoke = True
            began = time.perf_counter()
            result = await session.turn(message)
            turn_seconds.append(time.perf_counter() - began)
            if result.reply:
                outputs.append({"where": f"turn {result.turn} reply", "text": result.reply})
        await session.idle()
    finally:
        await session.close()
    elapsed = time.perf_counter() - started
    judge(outputs, await dry_instructions(soul), soul_tags(soul))
    dropped, reasked = dropped_echoes(soul.store.traces(session.id))
    soul.close()
    return {"outputs": outputs, "elapsed": elapsed, "spontaneous": len(spontaneous), "before_user": len(before_user),
            "cycles": cycles, "distinct_moods": len(set(moods)), "dropped": dropped, "reasked": reasked,
            "turn_median": statistics.median(turn_seconds) if turn_seconds else None}


def dropped_echoes(rows: list[dict[str, Any]]) -> tuple[dict[str, int], int]:
    """The sections the runtime dropped as echoes of the instructions, by tag, and the model
    calls it re-asked, over every trace of the session (turns and cycles; the store's rows)."""
    dropped: dict[str, int] = {}
    reasked = 0
    for row in rows:
        trace = json.loads(row["trace"]) if isinstance(row["trace"], str) else row["trace"]
        reasked += sum(1 for call in trace.get("calls", ()) if int(call.get("attempts") or 1) > 1)
        for step in trace.get("steps", ()):
            for flag in step.get("flags") or ():
                found = re.match(r"echo: <([^>]+)> repeated the instructions", str(flag))
                if found and str(flag).endswith("dropped"):
                    dropped[found.group(1)] = dropped.get(found.group(1), 0) + 1
    return dropped, reasked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--model", default=None, help="a model for every slot (default: the blueprint's, local)")
    parser.add_argument("--wait-first", type=float, default=0.0, help="seconds before the first message")
    parser.add_argument("--log", type=Path, help="write every output (with its verdict) to this JSONL file")
    parser.add_argument("--rejudge", type=Path, metavar="LOG", help="judge a run's outputs again (a --log file)")
    args = parser.parse_args(argv)
    if args.rejudge:
        from soul import load

        outputs = [json.loads(line) for line in args.rejudge.read_text(encoding="utf-8").splitlines() if line.strip()]
        soul = load("csd")
        judge(outputs, instruction_text(soul), soul_tags(soul))
        soul.close()
        report(outputs)
        return 0
    with tempfile.TemporaryDirectory() as home:
        os.environ["SOUL_HOME"] = home
        found = asyncio.run(run(args))
    outputs = found["outputs"]
    if args.log:
        args.log.write_text("".join(json.dumps(o) + "\n" for o in outputs), encoding="utf-8")
    median = found["turn_median"]
    timing = "" if median is None else f"; a user's turn {median:.1f} s (median)"
    print(f"outputs read: {len(outputs)} ({args.turns} turns, {args.cycles} cycles; {found['spontaneous']} spontaneous "
          f"replies, {found['before_user']} before the user spoke) in {found['elapsed']:.0f} s{timing}")
    report(outputs)
    c = found["cycles"]
    print(f"cycles: {c['ran']} ran, {c['failed']} failed; set a mood {c['mood']}, criteria {c['criteria']}, an impulse "
          f"{c['impulse']} (trigger true {c['trigger']}); {found['distinct_moods']} different moods")
    dropped = ", ".join(f"<{tag}> {n}" for tag, n in sorted(found["dropped"].items())) or "none"
    print(f"dropped as echoes: {dropped}; model calls re-asked: {found['reasked']}")
    return 0


def report(outputs: list[dict[str, Any]]) -> None:
    echoed = [o for o in outputs if o["echo"]]
    marked = [o for o in outputs if o["fragments"]]
    for o in echoed + [o for o in marked if not o["echo"]]:
        print(f"  {o['where']:22} echo={'yes' if o['echo'] else 'no ':3} {o['fragments']} {o['text'][:110]!r}")
    kinds = ("reply", "mood", "criteria", "impulse")
    by_kind = ", ".join(f"{k} {sum(1 for o in echoed if o['where'].endswith(k))}/{sum(1 for o in outputs if o['where'].endswith(k))}"
                        for k in kinds)
    print(f"echoing {ECHO_WORDS}+ consecutive words of the instructions: {len(echoed)} of {len(outputs)} ({by_kind})")
    print(f"holding a fragment of the instructions: {len(marked)}")
    # what the sections ask for: a mood in two to four words, criteria and impulses in one short
    # sentence; a long one is the model writing on to its token budget
    lengths = []
    for kind, short in (("mood", PHRASE_WORDS), ("criteria", SENTENCE_WORDS), ("impulse", SENTENCE_WORDS)):
        counts = [len(words(o["text"])) for o in outputs if o["where"].endswith(kind) and not o["echo"]]
        if counts:
            lengths.append(f"{kind} {statistics.median(counts):g} words (median), {sum(1 for n in counts if n <= short)} "
                           f"of {len(counts)} at most {short}")
    print(f"lengths: {'; '.join(lengths) or 'none'}")


if __name__ == "__main__":
    sys.exit(main())

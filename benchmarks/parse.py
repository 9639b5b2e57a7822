"""Reply-parsing benchmarks: extract_sections + parse_step on typical, large and adversarial
replies, and the streaming parser's throughput with token-sized chunks.

Run: python benchmarks/parse.py [--runs N]
Goal (issue 3): a typical 1–2 KB fused reply parsed well under 1 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from soul.sections.outputs import parse_step
from soul.sections.streaming import SectionStream
from soul.sections.xmlparse import extract_sections
from soul.steps.dialogue import ExternalDialogue
from soul.steps.monologue import InternalMonologue
from soul.steps.user_model import UserModelCheck

TAGS = ("internal_monologue", "external_dialogue", "user_model_check")
KINDS = (InternalMonologue, ExternalDialogue, UserModelCheck)

SENTENCE = (
    "The harbour light is on again, and she asks whether the tide tables still matter when the "
    "boat never leaves the dock; I should answer plainly & kindly, with one concrete example. "
)


def typical() -> str:
    """A fused Claudius-style reply of about 1.5 KB, in a fence, with prose around it."""
    return (
        "Sure, here is my response.\n```xml\n"
        f"<internal_monologue verb=\"mused\">{SENTENCE * 2}</internal_monologue>\n"
        f"<external_dialogue verb='explained'>{SENTENCE * 5}It's &lt;fine&gt;, a < b.</external_dialogue>\n"
        "<user_model_check>true</user_model_check>\n```\n"
    )


def large() -> str:
    """A 64 KB reply: a long monologue and a long answer with markdown and code."""
    body = (SENTENCE + "\n- a bullet with <b>bold</b> and `code`\n") * 150
    return (
        f"<internal_monologue>{body}</internal_monologue>"
        f"<external_dialogue verb=said>{body}</external_dialogue><user_model_check>no</user_model_check>"
    )


def adversarial() -> str:
    """16 KB of fragment soup: partial tags, stray `<` and `&`, CDATA markers, duplicates."""
    rng = random.Random(7)
    fragments = [
        "<", "&", "&am", "</exter", "<external_dialogue", "<internal_monologue>", "</internal_monologue>",
        "<![CDATA[", "]]>", "&#x41;", "<b>", "'", '"', "=", "<user_model_check/>", "x", " ", "\n",
        "<external_dialogue verb=said>", "</external_dialogue>",
    ]
    out = []
    while sum(map(len, out)) < 16_000:
        out.append(rng.choice(fragments))
    return "".join(out)


def time_per_call(fn: Callable[[], object], runs: int) -> float:
    """Median seconds per call over `runs` batches."""
    fn()
    batch = 20
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def parse_all(raw: str) -> None:
    result = extract_sections(raw, TAGS)
    for kind in KINDS:
        parse_step(kind, {}, result)


def stream_all(raw: str, chunk: int) -> None:
    parser = SectionStream(TAGS, ("external_dialogue",))
    for i in range(0, len(raw), chunk):
        parser.feed(raw[i : i + chunk])
    parser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    replies = {"typical": typical(), "large": large(), "adversarial": adversarial()}
    print(f"{'reply':<12} {'size':>8} {'extract_sections':>17} {'+ parse_step x3':>16} {'stream, 4-char chunks':>22}")
    for name, raw in replies.items():
        extract = time_per_call(lambda raw=raw: extract_sections(raw, TAGS), runs)
        full = time_per_call(lambda raw=raw: parse_all(raw), runs)
        streamed = time_per_call(lambda raw=raw: stream_all(raw, 4), max(5, runs // 5))
        mb_per_s = len(raw) / streamed / 1e6
        print(
            f"{name:<12} {len(raw):>7,}B {extract * 1e6:>14.1f} µs {full * 1e6:>13.1f} µs "
            f"{streamed * 1e6:>10.0f} µs {mb_per_s:>6.1f} MB/s"
        )
    raw = replies["typical"]
    print("\nstreaming the typical reply by chunk size (a model token is ~4 characters):")
    for chunk in (1, 4, 16, 64):
        seconds = time_per_call(lambda chunk=chunk: stream_all(raw, chunk), max(5, runs // 5))
        print(f"  {chunk:>3}-char chunks: {seconds * 1e6:8.0f} µs/reply  {len(raw) / seconds / 1e6:6.2f} MB/s  "
              f"{seconds / (len(raw) / chunk) * 1e6:6.2f} µs/chunk")


if __name__ == "__main__":
    main()

"""A varied conversation for `overhead.py`'s claudius turns: distinct lines, the same every run.

A conversation that says the same line every turn measures a degenerate memory: the field
keeps one memory (a repeated text is stored once), the query's vector is cached, and the
keyword index never grows, so recall shows only its fixed cost. Real users say something new
each turn. These lines are built from a fixed vocabulary with a seeded generator: each is
distinct, they share words the way a conversation does (people, places, projects recur), and
no data file is needed (the benchmark runs from a bare checkout).
"""

from __future__ import annotations

import random

PEOPLE = ("my sister Lena", "our team lead Priya", "the new intern", "my neighbour Ravi", "Grandma Rosa",
          "my friend Tomás", "the landlord", "my running partner Jo", "Dr. Okafor", "my cousin Mei",
          "the support engineer", "my old professor", "our designer Sam", "the kids", "my partner Alex")
DOINGS = ("rewrote the parser in Rust", "went hiking near the lake", "adopted a rescue dog",
          "started learning the cello", "fixed the flaky integration tests", "moved to a flat downtown",
          "signed up for a half marathon", "painted the kitchen green", "lost the house keys again",
          "planted tomatoes on the balcony", "shipped the billing migration", "booked a trip to Lisbon",
          "argued about tabs and spaces", "baked sourdough for the first time", "found a memory leak in the cache",
          "joined a chess club", "quit coffee for a week", "read a book about compilers",
          "built a birdhouse", "gave a talk on type systems", "repaired the old bicycle",
          "volunteered at the food bank", "watched the meteor shower", "reorganised the garage")
WHENS = ("last weekend", "this morning", "on Tuesday", "yesterday evening", "a month ago", "over the holidays",
         "during lunch", "after the storm", "before the deadline", "on my birthday")
AFTERS = ("and I keep thinking about it.", "which went better than expected.", "and it was a disaster, honestly.",
          "so now I need your advice.", "and I am not sure how I feel.", "which reminded me of our last chat.",
          "and everyone laughed.", "but the details are fuzzy.", "and I wrote it all down.", "so the week was long.")
ASKS = ("What would you do about {who}?", "Do you remember what I said about {doing}?",
        "How should I plan for {doing}?", "Is it strange that {who} {did}?",
        "Can you help me think through why {who} {did}?")


def conversation_lines(n: int, seed: int = 26) -> list[str]:
    """`n` distinct user lines (statements, with a question every few turns)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    lines: list[str] = []
    while len(lines) < n:
        who, did, when, after = rng.choice(PEOPLE), rng.choice(DOINGS), rng.choice(WHENS), rng.choice(AFTERS)
        if rng.random() < 0.25:
            line = rng.choice(ASKS).format(who=who, did=did, doing=did.split(" ", 1)[1])
        else:
            line = f"{when[0].upper()}{when[1:]} {who} {did}, {after}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines

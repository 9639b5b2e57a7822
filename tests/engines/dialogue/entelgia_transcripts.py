"""Transcripts built to trigger (or not) each of Fixy's detectors, for the dialogue engine's
tests. Each healthy turn has its own keywords (no two turns share a word longer than four
letters), a depth marker ("why", "how") and a synthesis marker ("both")."""

from __future__ import annotations

from soul.engines.dialogue import Turn

SPEAKERS = ("Socrates", "Athena")


def speaker(i: int) -> str:
    return SPEAKERS[i % 2]


def healthy(n: int, start: int = 0) -> list[Turn]:
    """n varied, deep turns with a synthesis marker each: no detector but meta reflection fires."""
    return [Turn(speaker(i), f"Why does idea{i}x cut into notion{i}y? Both of us see how form{i}z fits.")
            for i in range(start, start + n)]


def circular(n: int) -> list[Turn]:
    """n turns restating the same claim in the same words."""
    return [Turn(speaker(i), "Consciousness emerges from complex neural processes in living brains, surely.")
            for i in range(n)]


def conflictual(n: int) -> list[Turn]:
    """n distinct turns, each with a whole-word conflict marker."""
    return [Turn(speaker(i), f"No, idea{i}x is wrong about notion{i}y, but why?") for i in range(n)]


def substring_lookalikes(n: int) -> list[Turn]:
    """n distinct turns whose words only contain conflict markers as substrings."""
    return [Turn(speaker(i), f"I know idea{i}x spreads like butter on notion{i}y; nobody errors, anyhow.")
            for i in range(n)]


def shallow(n: int) -> list[Turn]:
    """n short distinct turns without a depth marker."""
    return [Turn(speaker(i), f"Nice idea{i}x and notion{i}y.") for i in range(n)]


def deep_without_synthesis(n: int) -> list[Turn]:
    """n distinct deep turns, none with a synthesis marker."""
    return [Turn(speaker(i), f"Why does idea{i}x cut into notion{i}y? Because form{i}z fits.") for i in range(n)]


def bag_of_words(texts, dims: int = 256) -> list[list[float]]:
    """A small real embedder: each lower-cased word (longer than 2 letters) hashed (stable
    FNV-1a) into one of `dims` counts. Texts sharing words point the same way."""
    from soul.engines.dialogue import words

    vectors = []
    for text in texts:
        vec = [0.0] * dims
        for w in words(text):
            if len(w) > 2:
                h = 2166136261
                for b in w.encode():
                    h = ((h ^ b) * 16777619) & 0xFFFFFFFF
                vec[h % dims] += 1.0
        vectors.append(vec)
    return vectors

"""The memory kinds: the seed's 26 node types. Standard library only, so a host can list them
(a blueprint's step parameters, a schema) without loading numpy."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Kind"]


class Kind(IntEnum):
    """The seed's 26 node types, numbered as in the seed (the code is what the WAL stores)."""

    WISDOM = 0
    BELIEF = 1
    INTENTION = 2
    EPISODE = 3
    FAILURE = 4
    ASPIRATION = 5
    DREAM = 6
    QUESTION = 7
    CORRECTION = 8
    ENTITY = 9
    TERM = 10
    EDGE = 11
    INSIGHT = 12
    SIGNAL = 13
    STATE = 14
    SUMMARY = 15
    REVIEW = 16
    PREFERENCE = 17
    MILESTONE = 18
    APPROACH = 19
    OUTCOME = 20
    GAP = 21
    SYMBOL = 22
    PROJECT_ESSENCE = 23
    MODULE_STATE = 24
    PATTERN_STATE = 25

    @property
    def label(self) -> str:
        """The name users write: ``episode``, ``project_essence``."""
        return self.name.lower()

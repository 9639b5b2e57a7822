"""Dhyana (attention): salience of recent messages, weights of the concepts the user talks
about and of the tools the agent uses, and the focus drawn from them. What counts as a
concept lives in `concepts.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from operator import add, itemgetter
from typing import Any

from .concepts import CONCEPT_STOP_WORDS, MIN_CONCEPT_LENGTH, concept_text, extract_concepts
from .config import SYSTEM_MAX_FOCUS_WINDOW, ConfigLike
from .events import ATTENTION_SHIFTED, EventCallback
from .focus import (
    AttentionWeights,
    Focus,
    Ranking,
    Weighted,
    focus_order,
    make_focus,
    ranked,
    weighted,
)
from .pending import NO_GATE
from .state import check_float, check_map, check_str, read_list, read_map
from .subsystem import Subsystem

__all__ = [
    "CONCEPT_DECAY_PER_REFRESH",
    "CONCEPT_MENTION_INCREMENT",
    "CONCEPT_STOP_WORDS",
    "ERROR_ADJACENCY_RADIUS",
    "FOCUS_SIZE",
    "MAX_CONCEPTS",
    "MIN_CONCEPT_LENGTH",
    "SHIFT_TOP_K",
    "Dhyana",
    "extract_concepts",
]

ERROR_ADJACENCY_RADIUS = 2  # messages within this distance of an error are boosted
MAX_SALIENCE = 2.0
CONCEPT_MENTION_INCREMENT = 0.1
CONCEPT_DECAY_PER_REFRESH = 0.05
MAX_CONCEPTS = 100
TOOL_BASE_ATTENTION = 0.5
TOOL_SUCCESS_FACTOR = 0.1  # a success adds performance * 0.1
TOOL_FAILURE_PENALTY = 0.05
FOCUS_SIZE = 10  # concepts and tools shown in a Focus
SHIFT_TOP_K = 5  # attention has shifted when more than half of these top concepts changed
# Messages kept for salience, as a multiple of the focus window. The original kept every
# message forever and rescored all of them each turn; past 2K an unboosted message weighs
# under e^-4 of the newest at the default lambda and can no longer enter the window.
MESSAGE_HISTORY_FACTOR = 2

_name = itemgetter(0)


@lru_cache(maxsize=32)
def _recency_tables(lam: float, size: int) -> tuple[list[float], list[float]]:
    """exp(-lambda * age) and the half-rate exp(-lambda/2 * age) for ages 0..size-1, so a
    refresh is a slice instead of one exp() per message."""
    full = [math.exp(-lam * age) for age in range(size)]
    half = [math.exp(-lam * 0.5 * age) for age in range(size)]
    return full, half


class Dhyana(Subsystem):
    """The attention filter.

    Messages: a new one starts at salience 1 (+ the correction boost), an error boosts its
    two previous neighbours at once; `refresh_salience` rescores every message as
    exp(-lambda*age) + error boost (if a message within 2 is an error) + correction boost *
    exp(-lambda/2*age), clamped to [0, 2], then decays every concept by 0.05.
    Concepts: each distinct keyword of a text gains 0.1 (cap 1), at most 100 are kept.
    Tools: start at 0.5, gain performance*0.1 on success, lose 0.05 on failure.
    Fires `attention_shifted` when more than half of the top 5 concepts are replaced.
    It takes `priors` like the other subsystems, but attention has no prior of its own.
    """

    __slots__ = (
        "_announced",
        "_corr",
        "_err",
        "_err_boost",
        "_gate",
        "_history",
        "_ids",
        "_n_corr",
        "_near",
        "_recency",
        "_sal",
        "_tools_top",
        "_top",
        "concepts",
        "on_event",
        "tools",
    )

    def _start(self) -> None:
        self._gate = NO_GATE  # the controller's gate when it runs this subsystem
        self.concepts: dict[str, float] = {}  # read it freely; change it through the methods
        self.tools: dict[str, float] = {}
        self._ids: list[str] = []
        self._sal: list[float] = []
        self._err: list[bool] = []
        self._corr: list[bool] = []
        # The error boost each message gets at a refresh: attention_error_boost when another
        # message within the radius carries an error, else 0.0 (adding 0.0 changes nothing),
        # so a refresh adds the two lists in C instead of testing each message.
        self._near: list[float] = []
        self._err_boost = self.config.attention_error_boost
        self._n_corr = 0  # corrections among the kept messages
        self._history = MESSAGE_HISTORY_FACTOR * self.focus_size  # messages kept
        self._recency: tuple[list[float], list[float]] | None = None  # tables, when needed
        self._top: list[tuple[str, float]] | None = None  # cached top concepts
        self._tools_top: list[tuple[str, float]] | None = None
        self._announced: tuple[str, ...] = ()  # top concepts last reported as a shift

    @property
    def focus_size(self) -> int:
        """K of the focus window: the configured size, within the system ceiling."""
        return min(self.config.attention_focus_window, SYSTEM_MAX_FOCUS_WINDOW)

    # --- messages ----------------------------------------------------------------------

    def add_message(
        self, message_id: str, has_error: bool = False, is_correction: bool = False
    ) -> None:
        """Register a message: salience 1 (+ correction boost, cap 2); an error boosts the
        (up to two) messages before it immediately."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        ids = self._ids
        cap = self._history
        if len(ids) >= cap:
            self._drop_oldest(len(ids) - cap + 1)
        err = self._err
        last = len(ids)
        ids.append(message_id)
        if is_correction:
            self._sal.append(min(1.0 + self.config.attention_correction_boost, MAX_SALIENCE))
            self._n_corr += 1
        else:
            self._sal.append(1.0)
        self._corr.append(bool(is_correction))
        near = (last >= 1 and err[last - 1]) or (last >= 2 and err[last - 2])
        self._near.append(self._err_boost if near else 0.0)
        err.append(False)
        if has_error:
            self._flag_error(last)

    def _drop_oldest(self, drop: int) -> None:
        err, near = self._err, self._near
        if drop == 1:  # the steady state: one in, one out
            lost_error = err[0]
            if self._n_corr and self._corr[0]:
                self._n_corr -= 1
            del self._ids[0], self._sal[0], err[0], self._corr[0], near[0]
        else:
            lost_error = True in err[:drop]
            if self._n_corr:
                self._n_corr -= sum(self._corr[:drop])
            del self._ids[:drop], self._sal[:drop], err[:drop], self._corr[:drop], near[:drop]
        if lost_error:  # the first messages may have lost their error neighbour
            boost, radius = self._err_boost, ERROR_ADJACENCY_RADIUS
            for i in range(min(radius, len(err))):  # _error_within_radius(i), inlined
                within = True in err[max(0, i - radius) : i] or True in err[i + 1 : i + radius + 1]
                near[i] = boost if within else 0.0

    def forget_messages(self) -> None:
        """Drop every message's salience (what `serialize` leaves out), as a restore starts."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        self._ids.clear()
        self._sal.clear()
        self._err.clear()
        self._corr.clear()
        self._near.clear()
        self._n_corr = 0

    def flag_latest_message(self, *, error: bool = False, correction: bool = False) -> None:
        """Mark the newest message as error-bearing or a correction after it was added (the
        controller learns this from tool results during the turn); the boosts apply now."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        if not self._ids:
            return
        last = len(self._ids) - 1
        if error and not self._err[last]:
            self._flag_error(last)
        if correction and not self._corr[last]:
            self._corr[last] = True
            self._n_corr += 1
            boosted = self._sal[last] + self.config.attention_correction_boost
            self._sal[last] = min(boosted, MAX_SALIENCE)

    def _error_within_radius(self, index: int) -> bool:
        err = self._err
        before = err[max(0, index - ERROR_ADJACENCY_RADIUS) : index]
        return True in before or True in err[index + 1 : index + ERROR_ADJACENCY_RADIUS + 1]

    def _flag_error(self, index: int) -> None:
        # Error adjacency is kept per message as it changes, so a refresh needs no search.
        self._err[index] = True
        near = self._near
        for j in range(
            max(0, index - ERROR_ADJACENCY_RADIUS),
            min(len(near), index + ERROR_ADJACENCY_RADIUS + 1),
        ):
            if j != index:
                near[j] = self._err_boost
        boost = self._err_boost
        sal = self._sal
        for j in range(max(0, index - ERROR_ADJACENCY_RADIUS), index):
            sal[j] = min(sal[j] + boost, MAX_SALIENCE)

    def get_focus_window(self) -> list[str]:
        """Ids of the K most salient messages, highest first (ties: older first)."""
        ids = self._ids
        return [ids[i] for i in focus_order(self._sal)[: self.focus_size]]

    def refresh_salience(self) -> None:
        """End of turn: rescore every message by recency, error adjacency and correction
        stickiness, then decay every concept by 0.05 (dropping those that reach 0)."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        n = len(self._ids)
        if n:
            cfg = self.config
            if self._recency is None:  # the config is frozen: looked up once
                self._recency = _recency_tables(
                    cfg.attention_recency_lambda, MESSAGE_HISTORY_FACTOR * SYSTEM_MAX_FOCUS_WINDOW
                )
            full, half = self._recency
            # index i has age n-1-i; plus its error boost (0.0 for most, which keeps the value)
            sal = list(map(add, full[n - 1 :: -1], self._near))
            if self._n_corr:
                boost = cfg.attention_correction_boost
                for i, flagged in enumerate(self._corr):
                    if flagged:
                        sal[i] += boost * half[n - 1 - i]
            if self._n_corr or cfg.attention_error_boost > MAX_SALIENCE - 1.0:
                sal = [s if s < MAX_SALIENCE else MAX_SALIENCE for s in sal]
            self._sal = sal

        concepts = self.concepts
        if concepts:
            step = CONCEPT_DECAY_PER_REFRESH
            kept = {k: w - step for k, w in concepts.items() if w > step}
            if len(kept) != len(concepts):
                self.concepts = kept
                self._top = None
                if not all(map(kept.__contains__, self._announced)):
                    self._check_shift()
            else:
                self.concepts = kept
                if self._top is not None:  # a uniform decay keeps the ranking
                    self._top = [(k, w - step) for k, w in self._top]

    # --- concepts and tools ------------------------------------------------------------

    def track_concepts(self, text: str) -> None:
        """Each distinct keyword of `text` gains 0.1 (cap 1); past 100 concepts the lowest
        are evicted. May fire `attention_shifted`."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        # extract_concepts() and the weight update in one pass over the distinct words
        # (dict.fromkeys dedupes in C and keeps first-appearance order).
        concepts = self.concepts
        get = concepts.get
        stop = CONCEPT_STOP_WORDS
        changed = False
        for word in dict.fromkeys(concept_text(text).split()):
            if len(word) >= MIN_CONCEPT_LENGTH and word not in stop:
                weight = get(word, 0.0) + CONCEPT_MENTION_INCREMENT
                concepts[word] = weight if weight < 1.0 else 1.0
                changed = True
        if not changed:
            return
        if len(concepts) > MAX_CONCEPTS:
            lowest = sorted(concepts.items(), key=itemgetter(1))[: len(concepts) - MAX_CONCEPTS]
            for word, _ in lowest:
                del concepts[word]
        self._top = None
        self._check_shift()

    def top_concepts(self, n: int = FOCUS_SIZE) -> list[Weighted]:
        """The n heaviest concepts, highest first (ties: first mentioned first)."""
        if n <= FOCUS_SIZE:
            if self._top is None:
                self._top = ranked(self.concepts, FOCUS_SIZE)
            return list(map(weighted, self._top[:n]))
        return list(map(weighted, ranked(self.concepts, n)))

    def _check_shift(self) -> None:
        # The original documented attention_shifted but never fired it; "significantly" is
        # taken as: more than half of the top five concepts differ from the last announced.
        if self._top is None:
            self._top = ranked(self.concepts, FOCUS_SIZE)
        top = tuple(map(_name, self._top[:SHIFT_TOP_K]))
        announced = self._announced
        if not top:
            self._announced = ()
            return
        kept = len(set(top).intersection(announced))
        if 2 * kept < max(len(top), len(announced)):
            self._announced = top
            if self.on_event is not None:
                self.on_event(
                    ATTENTION_SHIFTED, {"concepts": list(top), "previous": list(announced)}
                )

    def on_tool_used(self, tool: str, success: bool, performance: float = 0.8) -> None:
        """A tool ran: success adds performance*0.1, failure takes 0.05; kept in [0, 1]."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        current = self.tools.get(tool, TOOL_BASE_ATTENTION)
        weight = (
            current + performance * TOOL_SUCCESS_FACTOR
            if success
            else current - TOOL_FAILURE_PENALTY
        )
        self.tools[tool] = 0.0 if weight < 0.0 else 1.0 if weight > 1.0 else weight
        self._tools_top = None

    def top_tools(self, n: int = FOCUS_SIZE) -> list[Weighted]:
        """The n tools with the most attention, highest first."""
        if self._tools_top is None or n > FOCUS_SIZE:
            ranked = sorted(self.tools.items(), key=itemgetter(1), reverse=True)
            if n > FOCUS_SIZE:
                return list(map(weighted, ranked[:n]))
            self._tools_top = ranked[:FOCUS_SIZE]
        return list(map(weighted, self._tools_top[:n]))

    def focus(self, with_messages: bool = True) -> Focus:
        """The current focus: top concepts, top tools and (optionally) the focus window."""
        if self._top is None:
            self._top = ranked(self.concepts, FOCUS_SIZE)
        if self._tools_top is None:
            self.top_tools()
        window = (
            (tuple(self._ids), tuple(self._sal), self.focus_size) if with_messages else ((), (), 0)
        )
        return make_focus(
            Ranking(map(weighted, self._top)), Ranking(map(weighted, self._tools_top or ())), window
        )

    def get_weights(self) -> AttentionWeights:
        """Copies of the message, concept and tool weight maps."""
        return AttentionWeights(
            dict(zip(self._ids, self._sal, strict=True)), dict(self.concepts), dict(self.tools)
        )

    # --- persistence -------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        """Concept and tool weights (message salience is ephemeral, as in the original) and
        the last announced top concepts, as a JSON-safe dict."""
        return {
            "concepts": dict(self.concepts),
            "tools": dict(self.tools),
            "announced": list(self._announced),
        }

    @classmethod
    def deserialize(
        cls,
        state: Mapping[str, Any],
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        path: str = "attention",
    ) -> Dhyana:
        """Restore from `serialize()` output."""
        check_map(state, path)
        dhyana = cls(config, on_event)
        for key, target in (("concepts", dhyana.concepts), ("tools", dhyana.tools)):
            weights = read_map(state, key, path)
            for name, weight in weights.items():
                check_str(name, f"{path}.{key} key")
                target[name] = check_float(weight, f"{path}.{key}.{name}", 0.0, 1.0)
        announced = read_list(state, "announced", path, default=[])
        dhyana._announced = tuple(check_str(a, f"{path}.announced[]") for a in announced)
        return dhyana

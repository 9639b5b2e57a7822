"""Chetana: the consciousness layer of a soul — affect (Bhava), attention (Dhyana),
self-model (Atma-Darshana) and intention (Sankalpa) — in pure, deterministic Python with
no LLM calls and no I/O. `ChetanaController` runs the four through each turn.

It imports nothing from `soul` (the pipeline) nor from another engine.
"""

from .atma import AtmaDarshana, SelfModel
from .bhava import Affect, Bhava
from .concepts import extract_concepts
from .config import ChetanaConfig, CognitivePriors
from .controller import ChetanaContext, ChetanaController
from .dhyana import Dhyana
from .errors import ChetanaError, ConfigError, ConfigTypeError, InputError, StateError
from .events import EVENT_NAMES, EventCallback
from .focus import AttentionWeights, Focus, Ranking, Weighted
from .goals import (
    extract_goals,
    extract_keywords,
    fnv1a_32,
    intention_id,
    normalize_goal,
)
from .mastery import ToolMastery, calibration_label, wilson_interval
from .report import CognitiveReport, MasteryRow
from .sankalpa import Intention, Sankalpa

__all__ = [
    "EVENT_NAMES",
    "Affect",
    "AtmaDarshana",
    "AttentionWeights",
    "Bhava",
    "ChetanaConfig",
    "ChetanaContext",
    "ChetanaController",
    "ChetanaError",
    "CognitivePriors",
    "CognitiveReport",
    "ConfigError",
    "ConfigTypeError",
    "Dhyana",
    "EventCallback",
    "Focus",
    "InputError",
    "Intention",
    "MasteryRow",
    "Ranking",
    "Sankalpa",
    "SelfModel",
    "StateError",
    "ToolMastery",
    "Weighted",
    "calibration_label",
    "extract_concepts",
    "extract_goals",
    "extract_keywords",
    "fnv1a_32",
    "intention_id",
    "normalize_goal",
    "wilson_interval",
]

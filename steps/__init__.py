"""The built-in step kinds, one module per kind family; `register` is the entry point.

`soul.steps:register` is listed under the entry-point group `soul.steps` like any plugin's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soul.steps.chetana import ChetanaContext
from soul.steps.decision import Brainstorm, Decision, MentalQuery
from soul.steps.dialogue import ExternalDialogue
from soul.steps.fixy import Fixy
from soul.steps.memory import MemoryRecall, MemoryStore
from soul.steps.monologue import InternalMonologue
from soul.steps.soul_state import SoulStateCheck, SoulStateUpdate
from soul.steps.subconscious import InternalDialog, MoodAndCriteria, SLoud
from soul.steps.summary import Summary
from soul.steps.tool import ToolStep
from soul.steps.user_model import UserModelCheck, UserModelUpdate

if TYPE_CHECKING:
    from soul.kinds import Registry

BUILTIN_KINDS = (
    InternalMonologue,
    ExternalDialogue,
    UserModelCheck,
    UserModelUpdate,
    SoulStateCheck,
    SoulStateUpdate,
    Decision,
    Brainstorm,
    Summary,
    MentalQuery,
    MemoryRecall,
    MemoryStore,
    ChetanaContext,
    MoodAndCriteria,
    SLoud,
    InternalDialog,
    Fixy,
    ToolStep,
)

__all__ = ["BUILTIN_KINDS", "register"]


def register(registry: Registry) -> None:
    """Register every built-in step kind (the `soul.steps` entry point)."""
    for kind in BUILTIN_KINDS:
        registry.register(kind)

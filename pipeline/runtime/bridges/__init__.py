"""The engine bridges: the only runtime code that imports the engines.

`chetana` runs Chetana's controller around a turn (`Cognition`); `memory` opens a soul's
resonance field, recalls for a turn and remembers after its commit (`MemoryBridge`);
`learning` decides which recalled memories a reply used (learning from use); `dialogue`
wraps Entelgia's dialogue engine (`DialogueRules`).
"""

from soul.runtime.bridges.chetana import Cognition, session_report
from soul.runtime.bridges.dialogue import DialogueRules, resonance_embedder
from soul.runtime.bridges.learning import RecallUse, recall_use
from soul.runtime.bridges.memory import MemoryBridge, MemoryReader, field_errors, uses_memory

__all__ = [
    "Cognition",
    "DialogueRules",
    "MemoryBridge",
    "MemoryReader",
    "RecallUse",
    "field_errors",
    "recall_use",
    "resonance_embedder",
    "session_report",
    "uses_memory",
]

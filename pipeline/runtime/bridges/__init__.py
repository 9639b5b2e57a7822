"""The engine bridges: the only runtime code that imports the engines.

`chetana` runs Chetana's controller around a turn (`Cognition`); `memory` opens a soul's
resonance field, recalls for a turn and remembers after its commit (`MemoryBridge`);
`learning` decides which recalled memories a reply used (learning from use); `dialogue`
wraps Entelgia's dialogue engine (`DialogueRules`); `snapshots` turns a field into the files
of a soul bundle and back.
"""

from soul.runtime.bridges.chetana import Cognition, Kept, reads_whole_context, session_report
from soul.runtime.bridges.dialogue import DialogueRules, resonance_embedder
from soul.runtime.bridges.learning import RecallUse, recall_use
from soul.runtime.bridges.memory import MemoryBridge, MemoryReader, field_errors, uses_memory
from soul.runtime.bridges.memory_work import Queries, Writes, recalls_input, write_turn
from soul.runtime.bridges.snapshots import field_files, restore_field

__all__ = [
    "Cognition",
    "DialogueRules",
    "Kept",
    "MemoryBridge",
    "MemoryReader",
    "Queries",
    "RecallUse",
    "Writes",
    "field_errors",
    "field_files",
    "reads_whole_context",
    "recall_use",
    "recalls_input",
    "resonance_embedder",
    "restore_field",
    "session_report",
    "uses_memory",
    "write_turn",
]

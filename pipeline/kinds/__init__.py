"""Step kinds: the interface a kind of cognitive step implements (`StepKind`), the data it
returns to the runtime (`Changes`), and the registry that finds kinds by the name authors
write in `uses:` (built-ins and plugins alike, through the `soul.steps` entry-point group)."""

from soul.kinds.registry import ENTRY_POINT_GROUP, Registry, default_registry
from soul.kinds.stepkind import (
    CONTEXT_NAMES,
    Attribute,
    ChangeContext,
    Changes,
    Output,
    Recall,
    RecalledMemory,
    Section,
    Seen,
    StepEnv,
    StepKind,
    param,
    params_schema,
    with_memory,
)

__all__ = [
    "CONTEXT_NAMES",
    "ENTRY_POINT_GROUP",
    "Attribute",
    "ChangeContext",
    "Changes",
    "Output",
    "Recall",
    "RecalledMemory",
    "Registry",
    "Section",
    "Seen",
    "StepEnv",
    "StepKind",
    "default_registry",
    "param",
    "params_schema",
    "with_memory",
]

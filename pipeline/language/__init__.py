"""The blueprint as typed data: YAML with source positions, the JSON Schema, the Blueprint
dataclasses, and the Jinja sandbox that `when` expressions and templates compile in.

The first stage: it imports nothing of the later ones (compiler, runtime, providers, engines).
"""

from soul.language.bindings import Bindings
from soul.language.blueprint import (
    Blueprint,
    ModelSlot,
    Process,
    Retry,
    StateVar,
    Step,
    Subprocess,
    Trigger,
    build,
    display_path,
    read,
)
from soul.language.columns import attribute_pattern, column, name_pattern, read_pattern
from soul.language.commands import (
    allow_commands,
    command_allowed,
    forget_allowed_commands,
    how_to_allow,
)
from soul.language.dialogue import Dialogue, DialogueAgent, Observer, build_dialogue
from soul.language.expressions import (
    TEMPLATE_FORMAT,
    Analysis,
    Reference,
    analyse_expression,
    analyse_template,
    constant_key,
    environment,
)
from soul.language.files import ALLOW_FIELD_PATHS, field_folder
from soul.language.finding import builtin_names, locate
from soul.language.schema import blueprint_schema, schema_text
from soul.language.schema import check as check_schema
from soul.language.schema import check_at as check_schema_at
from soul.language.sourcemap import KeyPath, Loaded, SourceMap, load_yaml
from soul.language.tools import (
    DEFAULT_ROUNDS,
    McpServerDecl,
    StepTools,
    ToolDecl,
    ToolFinding,
    find_module,
    locate_tool,
)
from soul.language.tools import NAME as TOOL_NAME

__all__ = [
    "ALLOW_FIELD_PATHS",
    "DEFAULT_ROUNDS",
    "TEMPLATE_FORMAT",
    "TOOL_NAME",
    "Analysis",
    "Bindings",
    "Blueprint",
    "Dialogue",
    "DialogueAgent",
    "KeyPath",
    "Loaded",
    "McpServerDecl",
    "ModelSlot",
    "Observer",
    "Process",
    "Reference",
    "Retry",
    "SourceMap",
    "StateVar",
    "Step",
    "StepTools",
    "Subprocess",
    "ToolDecl",
    "ToolFinding",
    "Trigger",
    "allow_commands",
    "analyse_expression",
    "analyse_template",
    "attribute_pattern",
    "blueprint_schema",
    "build",
    "build_dialogue",
    "builtin_names",
    "check_schema",
    "check_schema_at",
    "column",
    "command_allowed",
    "constant_key",
    "display_path",
    "environment",
    "field_folder",
    "find_module",
    "forget_allowed_commands",
    "how_to_allow",
    "load_yaml",
    "locate",
    "locate_tool",
    "name_pattern",
    "read",
    "read_pattern",
    "schema_text",
]

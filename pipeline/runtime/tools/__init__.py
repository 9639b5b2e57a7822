"""Tools: the Python functions a blueprint declares, and the loop that lets a model call them.

`box` imports and describes the blueprint's tools and calls one (`ToolBox`: arguments checked
against the signature, timeouts, failures as data, record/replay); `loop` runs a call's
rounds of tool calls (`converse`: native tool calls, or `<tool_call>` text on the local model);
`guard` keeps whatever tool code raises (`SystemExit` too) inside the call.
"""

from soul.runtime.tools.box import ToolBox, ToolRun
from soul.runtime.tools.loop import TOOL_STEP, ToolUse, converse, tool_outputs, tools_of

__all__ = [
    "TOOL_STEP",
    "ToolBox",
    "ToolRun",
    "ToolUse",
    "converse",
    "tool_outputs",
    "tools_of",
]

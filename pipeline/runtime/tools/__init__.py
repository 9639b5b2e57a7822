"""Tools: the Python functions a blueprint declares, and the loop that lets a model call them.

`box` imports and describes the blueprint's tools and calls one (`ToolBox`: arguments checked
against the signature, timeouts, failures as data, record/replay); `loop` runs a call's
rounds of tool calls (`converse`: native tool calls, or `<tool_call>` text on the local model);
`guard` keeps whatever tool code raises (`SystemExit` too) inside the call.
`mcp` and `servers` make a blueprint's MCP servers tools of the box (`stdio_guard.py`, run as a
script, keeps a stdio server from outliving soul's process).
"""

from soul.runtime.tools.box import ToolBox, ToolRun
from soul.runtime.tools.loop import TOOL_STEP, ToolUse, converse, tool_outputs, tools_of
from soul.runtime.tools.mcp import McpToolError, McpTools

__all__ = [
    "TOOL_STEP",
    "McpToolError",
    "McpTools",
    "ToolBox",
    "ToolRun",
    "ToolUse",
    "converse",
    "tool_outputs",
    "tools_of",
]

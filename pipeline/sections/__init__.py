"""Reading and constraining model replies: the tolerant XML-section scanner, its streaming
form, typed step outputs from parsed sections, GBNF grammars for local models, and the check
for a section that only repeats the prompt's instructions."""

from soul.sections.echo import ECHO_WORDS, Instructions, instructions_of
from soul.sections.fallback import text_outside_sections
from soul.sections.grammar import call_grammar
from soul.sections.outputs import (
    CleanReader,
    StepParse,
    parse_bool,
    parse_list,
    parse_mapping,
    parse_step,
)
from soul.sections.streaming import Closed, Opened, SectionStream, Text
from soul.sections.xmlparse import ParsedSection, ParseResult, extract_sections, strip_tags

__all__ = [
    "ECHO_WORDS",
    "CleanReader",
    "Closed",
    "Instructions",
    "Opened",
    "ParseResult",
    "ParsedSection",
    "SectionStream",
    "StepParse",
    "Text",
    "call_grammar",
    "extract_sections",
    "instructions_of",
    "parse_bool",
    "parse_list",
    "parse_mapping",
    "parse_step",
    "strip_tags",
    "text_outside_sections",
]

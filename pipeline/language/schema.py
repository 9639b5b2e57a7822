"""The blueprint's JSON Schema: loading it, and turning its violations into positioned errors."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from soul.diagnostics import Diagnostic, did_you_mean, one_of
from soul.language.sourcemap import KeyPath, SourceMap

SCHEMA_FILE = "blueprint.schema.json"

_TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


@cache
def schema_text() -> str:
    """The schema as shipped (`soul schema` prints this)."""
    return files("soul.schemas").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def blueprint_schema() -> dict[str, Any]:
    return json.loads(schema_text())


_validators: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """A compiled validator per schema object (schemas are long-lived class attributes)."""
    entry = _validators.get(id(schema))
    if entry is None or entry[0] is not schema:
        import jsonschema

        entry = (schema, jsonschema.Draft202012Validator(schema))
        _validators[id(schema)] = entry
    return entry[1]


def dotted(path: KeyPath) -> str:
    """`steps.think.after[0]` for messages."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _where(path: KeyPath) -> str:
    return f"{dotted(path)}: " if path else ""


def _describe(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def check(data: Any, source: SourceMap, schema: dict[str, Any] | None = None) -> list[Diagnostic]:
    """Every violation of `schema` (default: the blueprint schema), at its YAML position."""
    schema = schema if schema is not None else blueprint_schema()
    validator = _validator(schema)
    out: list[Diagnostic] = []
    for error in validator.iter_errors(data):
        out.extend(_diagnose(error, source))
    return out


def check_at(data: Any, schema: dict[str, Any], source: SourceMap, base: KeyPath) -> list[Diagnostic]:
    """Like `check`, for a sub-document found at `base` (e.g. a step's `with:` block)."""
    validator = _validator(schema)
    out: list[Diagnostic] = []
    for error in validator.iter_errors(data):
        out.extend(_diagnose(error, source, base))
    return out


def _diagnose(error: Any, source: SourceMap, base: KeyPath = ()) -> list[Diagnostic]:
    path: KeyPath = (*base, *error.absolute_path)
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    value = error.instance
    if kind == "additionalProperties" and isinstance(value, dict):
        allowed = list(schema.get("properties", {}))
        extra = [k for k in value if k not in allowed]
        return [
            source.diagnostic(
                (*path, key),
                f"{_where(path)}unknown key '{key}'",
                hint=did_you_mean(key, allowed) or f"allowed keys: {one_of(allowed)}",
                key=True,
            )
            for key in extra
        ]
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return [source.diagnostic(path, f"{_where(path)}missing required key '{missing}'", key=True)]
    if "propertyNames" in error.absolute_schema_path and isinstance(value, str):
        # jsonschema reports a bad key as a `pattern` error on the object holding it
        name = value
        pattern = error.validator_value if kind == "pattern" else ""
        return [
            source.diagnostic(
                (*path, name),
                f"{_where(path)}invalid name '{name}'",
                hint=_pattern_hint(pattern),
                key=True,
            )
        ]
    if kind == "enum":
        options = [str(o) for o in error.validator_value]
        hint = did_you_mean(str(value), options) if isinstance(value, str) else None
        return [
            source.diagnostic(path, f"{_where(path)}{value!r} is not one of {', '.join(options)}", hint=hint)
        ]
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [source.diagnostic(path, f"{_where(path)}expected {expected}, got {_describe(value)}")]
    if kind == "const":
        return [source.diagnostic(path, f"{_where(path)}must be {error.validator_value!r}, got {value!r}")]
    if kind in ("oneOf", "anyOf"):
        # the branch whose type fits the value says what is wrong with it
        # (a type error inside a branch, e.g. a model slot's `retries: 1.5`, is the value's own
        # and counts; only a branch-level type mismatch does not)
        fitting = [
            e for e in error.context
            if len(e.relative_schema_path) > 1 and not (e.validator == "type" and len(e.relative_schema_path) == 2)
        ]
        if fitting:
            branch = fitting[0].relative_schema_path[0]
            return [d for e in fitting if e.relative_schema_path[0] == branch for d in _diagnose(e, source, base)]
        expected = schema.get("description", "a different value")
        return [
            source.diagnostic(path, f"{_where(path)}{_describe(value)} is not valid here", hint=f"expected: {expected}")
        ]
    if kind == "pattern":
        return [
            source.diagnostic(path, f"{_where(path)}{value!r} is not a valid value", hint=_pattern_hint(error.validator_value))
        ]
    if kind == "minItems" and isinstance(value, list):
        n = error.validator_value
        return [source.diagnostic(path, f"{_where(path)}needs at least {n} item{'s' * (n != 1)}, got {len(value)}")]
    if kind == "uniqueItems" and isinstance(value, list):
        dupes = sorted({str(v) for v in value if value.count(v) > 1})
        return [source.diagnostic(path, f"{_where(path)}lists {', '.join(dupes)} more than once")]
    if kind == "minProperties" and path and path[-1] == "steps":
        return [source.diagnostic(path, f"{_where(path)}needs at least one step", key=True)]
    return [source.diagnostic(path, f"{_where(path)}{error.message}")]


def _pattern_hint(pattern: str) -> str:
    if pattern.startswith("^[a-z][a-z0-9_]*$") or pattern == "^[a-z][a-z0-9_]*$":
        return "use lowercase letters, digits and _, starting with a letter"
    if pattern.startswith("^[a-z][a-z0-9_-]*"):
        return "use lowercase letters, digits, _ and -, starting with a letter"
    if "\\." in pattern and "(" not in pattern:
        return "write it as process.step"
    if pattern.startswith("^[A-Z_]"):
        return "an environment variable name, like ANTHROPIC_API_KEY"
    if pattern.startswith("^[a-z][a-z0-9_]*(\\."):
        return "a step kind name, like external_dialogue or memory.recall"
    if pattern.startswith("^[A-Za-z]"):
        return "use letters, digits and _, starting with a letter"
    return f"must match {pattern}"

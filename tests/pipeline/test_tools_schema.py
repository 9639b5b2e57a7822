"""A tool's JSON Schema from its signature and docstring, and finding a tool's module without
running any of it (docs/tools.md)."""

from __future__ import annotations

import ast
import asyncio
import sys
from pathlib import Path
from typing import Literal

import pytest

from soul.errors import ToolLoadError
from soul.language import ToolDecl, locate_tool
from soul.runtime.tools.box import as_text, describe, invoke


def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", tags: list[str] | None = None,
           weights: dict[str, float] | None = None, pair: tuple[int, str] = (1, "a"), **extra: object) -> list[str]:
    """Search the notes.

    Args:
        query: what to look for
        limit: how many hits
    """
    return []


def test_the_schema_follows_the_signature_and_the_docstring() -> None:
    _, spec = describe(ToolDecl("search", "x:search", ("tools", "search")), search, "soul.yaml:1:1")
    assert spec.description == "Search the notes."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "description": "how many hits", "default": 5},
            "mode": {"enum": ["fast", "deep"], "default": "fast"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            "weights": {"anyOf": [{"type": "object", "additionalProperties": {"type": "number"}}, {"type": "null"}], "default": None},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2,
                     "default": [1, "a"]},
        },
        "additionalProperties": True,  # **extra
        "required": ["query"],
    }


def test_a_declared_description_wins_and_sphinx_params_are_read() -> None:
    def f(a: int, b) -> None:  # type: ignore[no-untyped-def]
        """:param a: the first
        :param b: anything at all"""

    _, spec = describe(ToolDecl("f", "x:f", ("tools", "f"), description="Adds."), f, "soul.yaml:1:1")
    assert spec.description == "Adds."
    assert spec.parameters["properties"] == {"a": {"type": "integer", "description": "the first"}, "b": {"description": "anything at all"}}


def test_a_positional_only_parameter_is_refused_at_its_position() -> None:
    def f(a: int, /) -> None: ...

    with pytest.raises(ToolLoadError, match=r"^soul.yaml:3:5: tool 'f': parameter 'a' is positional-only"):
        describe(ToolDecl("f", "x:f", ("tools", "f")), f, "soul.yaml:3:5")


def test_results_are_text_bounded_and_surrogate_free() -> None:
    assert as_text({"a": 1}, 100) == '{"a": 1}'
    assert as_text("x" * 50, 10) == "x" * 10 + "\n[... cut: 40 more characters]"
    assert as_text("bad \ud800 text", 100) == "bad \ufffd text"
    assert as_text(object, 100).startswith('"<class')  # not JSON: its str, as JSON


def test_a_sync_tool_runs_off_the_loop_and_a_slow_one_times_out() -> None:
    import time

    async def both() -> tuple[object, float]:
        started = time.perf_counter()
        with pytest.raises(TimeoutError):
            await invoke(lambda: time.sleep(2), {}, 0.1, "slow")
        return await invoke(lambda x: x * 2, {"x": 21}, 1.0, "fast"), time.perf_counter() - started

    value, took = asyncio.run(both())
    assert value == 42 and took < 1.5


def test_locating_a_tool_runs_no_code_not_even_parent_packages(tmp_path: Path) -> None:
    package = tmp_path / "pkg_tools_static"
    package.mkdir()
    (package / "__init__.py").write_text("open('RAN_INIT', 'w').write('x')\n")
    (package / "mod.py").write_text("open('RAN_MOD', 'w').write('x')\ndef ok(): ...\nif True:\n    def maybe(): ...\n")
    found = locate_tool(ToolDecl("ok", "pkg_tools_static.mod:ok", ("tools", "ok")), tmp_path)
    missing = locate_tool(ToolDecl("no", "pkg_tools_static.mod:nope", ("tools", "no")), tmp_path)
    doubt = locate_tool(ToolDecl("maybe", "pkg_tools_static.mod:maybe", ("tools", "maybe")), tmp_path)
    gone = locate_tool(ToolDecl("gone", "pkg_tools_static.nothere:f", ("tools", "gone")), tmp_path)
    assert found is None and doubt is None
    assert missing is not None and missing.proven and missing.message.endswith("defines no 'nope'")
    assert gone is not None and gone.proven and gone.message.startswith("module 'pkg_tools_static.nothere' is not found")
    assert "pkg_tools_static" not in sys.modules
    assert not list(tmp_path.rglob("RAN_*")) and not list(Path.cwd().glob("RAN_*"))


def test_a_standard_module_is_found_on_the_python_path() -> None:
    assert locate_tool(ToolDecl("j", "json:dumps", ("tools", "j")), None) is None
    problem = locate_tool(ToolDecl("j", "json:dumpz", ("tools", "j")), None)
    assert problem is not None and problem.proven and "defines no 'dumpz'" in problem.message


def test_what_a_source_cannot_show_is_unproven_not_absent() -> None:
    from soul.language.bindings import facts_of

    def facts(source: str) -> object:
        return facts_of(ast.parse(source))

    assert facts("from os import *\n").stars == [("os", 0)]  # type: ignore[attr-defined]
    assert facts("def __getattr__(name): ...\n").dynamic  # type: ignore[attr-defined]
    assert "f" in facts("f = 1\n").bound  # type: ignore[attr-defined]
    assert "f" in facts("import os as f\n").bound  # type: ignore[attr-defined]
    assert "f" in facts("class f: ...\n").bound  # type: ignore[attr-defined]
    assert "f" not in facts("def g(): ...\n").bound  # type: ignore[attr-defined]
    assert "f" not in facts("f: int\n").bound  # an annotation alone binds nothing  # type: ignore[attr-defined]

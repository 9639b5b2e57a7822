"""The step-kind registry: built-ins, declarations, and plugins through entry points."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import soul.kinds.registry as registry_module
from soul.errors import RegistryError
from soul.kinds.registry import ENTRY_POINT_GROUP, Registry, default_registry
from soul.kinds.stepkind import Output, Section, StepKind

BUILTINS = {
    "internal_monologue", "external_dialogue", "user_model_check", "user_model_update",
    "soul_state_check", "soul_state_update", "decision", "brainstorm", "summary", "mental_query",
    "memory.recall", "memory.store", "chetana.context", "mood_and_criteria", "s_loud",
    "internal_dialog", "fixy", "tool",
}


def test_every_built_in_kind_is_registered() -> None:
    assert set(default_registry().names()) == BUILTINS


def test_built_in_declarations_are_complete() -> None:
    for kind in default_registry():
        assert kind.check_declaration() == [], kind.name
        assert kind.outputs, kind.name
        if kind.llm:
            from importlib.resources import files

            assert kind.template and files("soul.templates").joinpath(kind.template).is_file(), kind.name


def test_the_reply_kinds_stream_and_checks_are_booleans() -> None:
    reg = default_registry()
    assert reg.get("external_dialogue").streamable  # type: ignore[union-attr]
    assert not reg.get("user_model_check").streamable  # type: ignore[union-attr]
    assert reg.get("user_model_check").sections[0].type == "bool"  # type: ignore[union-attr]
    verb = reg.get("external_dialogue").sections[0].attributes[0]  # type: ignore[union-attr]
    assert "pointed out" in verb.values and "corrected" in verb.values


class Echo(StepKind):
    name = "echo"
    description = "Repeats the input."
    outputs = (Output("text", "text", "the echo"),)
    sections = (Section("echo", "text"),)


def test_registering_twice_under_one_name_is_refused() -> None:
    reg = Registry()
    reg.register(Echo)
    reg.register(Echo)  # the same class again is harmless

    class Other(Echo):
        pass

    with pytest.raises(RegistryError, match="registered twice"):
        reg.register(Other)


def test_a_malformed_declaration_is_refused() -> None:
    class Broken(StepKind):
        name = "broken"
        description = "No sections."
        outputs = (Output("text", "text", "x"),)

    with pytest.raises(RegistryError, match="at least one XML section"):
        Registry().register(Broken)


def test_a_third_party_kind_arrives_through_the_entry_point_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "soul_plugin_demo.py").parent.mkdir(parents=True)
    (site / "soul_plugin_demo.py").write_text(textwrap.dedent('''
        from soul.kinds.stepkind import Output, Section, StepKind

        class Haiku(StepKind):
            name = "haiku"
            description = "Answers in a haiku."
            outputs = (Output("text", "text", "the haiku"),)
            sections = (Section("haiku", "text"),)
            template = None

        def register(registry):
            registry.register(Haiku)
    '''))
    info = site / "soul_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: soul-plugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ndemo = soul_plugin_demo:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry_module, "_default", None)
    try:
        reg = default_registry()
        assert "haiku" in reg
        assert set(reg.names()) >= BUILTINS
    finally:
        registry_module._default = None
        sys.modules.pop("soul_plugin_demo", None)


def test_a_failing_plugin_is_reported_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    info = site / "soul_bad-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: soul-bad\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbad = soul_bad_missing:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry_module, "_default", None)
    try:
        with pytest.raises(RegistryError, match="the step plugin 'bad'"):
            default_registry()
    finally:
        registry_module._default = None


def test_importing_the_kinds_loads_no_step_and_the_registry_loads_them_by_entry_point() -> None:
    probe = (
        "import sys, soul.kinds\n"
        "before = 'soul.steps' in sys.modules\n"
        "soul.kinds.default_registry()\n"
        "print(before, 'soul.steps' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def _without_soulgraphs_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata as an install made before the group existed has it: no soulgraph entry point."""
    installed = importlib.metadata.entry_points

    def entry_points(**select: str) -> list[importlib.metadata.EntryPoint]:
        return [ep for ep in installed(**select) if ep.dist is None or ep.dist.name != "soulgraph"]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry_module, "_default", None)


def test_a_checkout_without_the_entry_point_installed_finds_the_built_ins_in_its_pyproject(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_soulgraphs_entry_points(monkeypatch)
    try:
        assert set(default_registry().names()) == BUILTINS
    finally:
        registry_module._default = None


def test_no_entry_point_and_no_checkout_is_a_registry_error_saying_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_soulgraphs_entry_points(monkeypatch)
    monkeypatch.setattr(registry_module, "_SOURCE_TREE", tmp_path)
    try:
        with pytest.raises(RegistryError, match=r"no built-in step kinds: .*pip install -e \. in a checkout"):
            default_registry()
    finally:
        registry_module._default = None

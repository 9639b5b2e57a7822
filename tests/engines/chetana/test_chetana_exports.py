"""The public surface: what `soul.engines.chetana` exports, and that the engine stays a
library of its own (no imports from the pipeline or from other engines)."""

import ast
import re
from pathlib import Path

import soul.engines.chetana as chetana

DOCUMENTED = {
    "Affect", "AtmaDarshana", "AttentionWeights", "Bhava", "ChetanaConfig", "ChetanaContext",
    "ChetanaController", "ChetanaError", "CognitivePriors", "CognitiveReport", "ConfigError",
    "ConfigTypeError", "Dhyana", "EVENT_NAMES", "EventCallback", "Focus", "InputError",
    "Intention", "MasteryRow", "Ranking", "Sankalpa", "SelfModel", "StateError", "ToolMastery", "Weighted",
    "calibration_label", "extract_concepts", "extract_goals", "extract_keywords", "fnv1a_32",
    "intention_id", "normalize_goal", "wilson_interval",
}  # fmt: skip


def test_exports_are_exactly_the_documented_names():
    assert set(chetana.__all__) == DOCUMENTED
    for name in chetana.__all__:
        assert hasattr(chetana, name), name


def test_event_names_are_the_six_of_the_issue():
    assert set(chetana.EVENT_NAMES) == {
        "frustrated", "confident", "self_updated", "goal_created", "goal_changed",
        "attention_shifted",
    }  # fmt: skip


def test_the_engine_imports_nothing_from_the_pipeline_or_other_engines():
    package = Path(chetana.__file__).parent
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: stays inside the package
                    continue
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert not module.startswith("soul"), f"{source.name} imports {module}"


def test_public_functions_have_type_hints_and_docstrings():
    for name in chetana.__all__:
        obj = getattr(chetana, name)
        if callable(obj) and not isinstance(obj, type) and hasattr(obj, "__code__"):
            assert obj.__doc__, name
            assert "return" in obj.__annotations__, name


def test_every_test_the_docs_cite_for_a_fix_exists():
    root = Path(__file__).resolve().parents[3]
    docs = (root / "docs" / "chetana.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"`(test_[a-z0-9_]+)`", docs))
    assert len(cited) >= 11
    here = Path(__file__).parent
    defined = {
        node.name
        for source in here.glob("test_chetana_*.py")
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef)
    }
    assert cited <= defined, cited - defined

"""The blueprint JSON Schema: well-formed, documented, and in step with the built-in souls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

from soul.cli.main import main
from soul.language.finding import builtin_folder, builtin_names
from soul.language.schema import blueprint_schema


def _properties(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            yield f"{path}.{name}", sub
        for key, sub in node.items():
            yield from _properties(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _properties(sub, f"{path}[{i}]")


def test_the_schema_is_valid_draft_2020_12() -> None:
    schema = blueprint_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_every_property_has_a_description_for_editors() -> None:
    missing = [path for path, sub in _properties(blueprint_schema()) if "description" not in sub and "$ref" not in sub]
    assert missing == []


@pytest.mark.parametrize("name", builtin_names())
def test_built_in_souls_satisfy_the_schema_as_plain_yaml(name: str) -> None:
    data = yaml.safe_load((builtin_folder() / f"{name}.yaml").read_text())
    jsonschema.validate(data, blueprint_schema())


@pytest.mark.parametrize("name", builtin_names())
def test_built_in_souls_round_trip_through_json(name: str) -> None:
    data = yaml.safe_load((builtin_folder() / f"{name}.yaml").read_text())
    again = json.loads(json.dumps(data))
    assert again == data
    jsonschema.validate(again, blueprint_schema())


def test_soul_schema_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == blueprint_schema()


def test_a_oneof_violation_reports_the_fitting_branch(check: Any) -> None:
    text = "soul: t\nversion: 1\nstate:\n  topic: {default: '', descripton: x}\nsteps:\n  reply: {uses: external_dialogue}\n"
    assert check(text) == ["soul.yaml:4:24: error: state.topic: unknown key 'descripton' (did you mean 'description'?)"]


def test_an_enum_violation_suggests_the_nearest_value(check: Any) -> None:
    text = "soul: t\nversion: 1\nmode: chaned\nsteps:\n  reply: {uses: external_dialogue}\n"
    assert check(text) == ["soul.yaml:3:7: error: mode: 'chaned' is not one of fused, chained (did you mean 'chained'?)"]


def test_a_missing_required_key_points_at_the_parent(check: Any) -> None:
    assert check("soul: t\nversion: 1\nsteps:\n  reply: {after: [x]}\n") == [
        "soul.yaml:4:3: error: steps.reply: missing required key 'uses'"
    ]


def test_a_bad_step_name_is_reported_at_the_key(check: Any) -> None:
    assert check("soul: t\nversion: 1\nsteps:\n  Reply: {uses: external_dialogue}\n") == [
        "soul.yaml:4:3: error: steps: invalid name 'Reply' (use lowercase letters, digits and _, starting with a letter)"
    ]

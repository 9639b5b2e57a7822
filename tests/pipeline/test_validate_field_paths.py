"""`soul validate` reports a `memory.field` that leaves the blueprint's folder, at the value,
with the fix; `allow_field_paths=` on validate and load allows it, like SOUL_ALLOW_FIELD_PATHS=1
(issue 12: valid means runnable)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import soul
from soul.errors import BlueprintInvalid, MemoryFieldError
from soul.runtime.bridges.memory import confined_field_path

Check = Callable[..., list[str]]
BLUEPRINT = "soul: t\nversion: 1\nmemory: {{field: '{}'}}\nsteps:\n  reply: {{uses: external_dialogue}}\n"
AT = "soul.yaml:3:17: error: memory.field "  # where the field's value is written
FIX = "or set SOUL_ALLOW_FIELD_PATHS=1 (in Python: allow_field_paths=True) to allow it)"


@pytest.fixture(autouse=True)
def no_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_FIELD_PATHS", raising=False)


def test_an_absolute_or_home_field_is_a_diagnostic_at_its_value(check: Check) -> None:
    (line,) = check(BLUEPRINT.format("/var/fields/t"))
    assert line == (AT + "'/var/fields/t' is refused: an absolute path, outside the blueprint's folder (use a path "
                    "relative to the blueprint (fields without memory.field live under the data home), " + FIX)
    (line,) = check(BLUEPRINT.format("~/fields"))
    assert line.startswith(AT + "'~/fields' is refused: a '~' path, outside the blueprint's folder") and line.endswith(FIX)


@pytest.mark.parametrize("where", ["../elsewhere", "sub/../../elsewhere", "link/field"])
def test_a_field_leaving_the_folder_by_dotdot_or_symlink_is_a_diagnostic(check: Check, tmp_path: Path, where: str) -> None:
    (tmp_path / "link").symlink_to(tmp_path.parent, target_is_directory=True)
    (line,) = check(BLUEPRINT.format(where))
    assert line.startswith(AT + f"'{where}' is refused: it resolves to {tmp_path.parent.resolve()}")
    assert f"outside the blueprint's folder {tmp_path.resolve()} (through '..' or a symlink)" in line
    assert line.endswith("(keep the field inside the folder, " + FIX)


def test_a_field_inside_the_folder_is_valid(check: Check, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "here").symlink_to(tmp_path / "data", target_is_directory=True)
    assert check(BLUEPRINT.format("memory")) == []
    assert check(BLUEPRINT.format("here/memory")) == []


def test_the_keyword_and_the_variable_allow_it_and_false_refuses_it(write_blueprint: Callable[..., Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_blueprint(BLUEPRINT.format("/var/fields/t"))
    assert not soul.validate(path).ok
    assert soul.validate(path, allow_field_paths=True).ok
    monkeypatch.setenv("SOUL_ALLOW_FIELD_PATHS", "1")
    assert soul.validate(path).ok
    assert not soul.validate(path, allow_field_paths=False).ok


def test_load_takes_the_same_keyword_through_to_the_memory_bridge(write_blueprint: Callable[..., Path],
                                                                   tmp_path: Path, soul_home: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-field"
    path = write_blueprint(BLUEPRINT.format(str(outside)))
    provider = soul.ScriptedProvider(["<external_dialogue>hi</external_dialogue>"])
    with pytest.raises(BlueprintInvalid, match=r"memory\.field .* is refused: an absolute path"):
        soul.load(path, provider=provider, home=soul_home)
    loaded = soul.load(path, provider=provider, home=soul_home, allow_field_paths=True)
    assert loaded.memory.path() == outside


def test_the_bridge_keyword_overrides_the_variable_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert confined_field_path("../x", tmp_path, allow=True) == (tmp_path.parent / "x").resolve()
    monkeypatch.setenv("SOUL_ALLOW_FIELD_PATHS", "1")
    with pytest.raises(MemoryFieldError, match=r"'\.\./x' is refused: .*SOUL_ALLOW_FIELD_PATHS=1"):
        confined_field_path("../x", tmp_path, allow=False)

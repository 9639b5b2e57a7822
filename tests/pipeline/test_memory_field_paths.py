"""A blueprint's `memory.field` stays inside the blueprint's folder (issue 12.9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soul.errors import MemoryFieldError
from soul.runtime.bridges.memory import confined_field_path


@pytest.mark.parametrize("where", ["/tmp/anywhere", "~/x", "../../x", "sub/../../x", "link/x"])
def test_paths_out_of_the_folder_are_refused(where: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_FIELD_PATHS", raising=False)
    folder = tmp_path / "soul"
    folder.mkdir()
    (folder / "link").symlink_to(tmp_path)  # a symlink out of the folder
    with pytest.raises(MemoryFieldError) as caught:
        confined_field_path(where, folder)
    assert repr(where) in str(caught.value) and "SOUL_ALLOW_FIELD_PATHS=1" in str(caught.value)


def test_paths_inside_are_resolved_and_the_opt_in_allows_the_rest(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_FIELD_PATHS", raising=False)
    folder = tmp_path / "soul"
    folder.mkdir()
    assert confined_field_path("memory", folder) == (folder / "memory").resolve()
    assert confined_field_path("a/../memory", folder) == (folder / "memory").resolve()
    monkeypatch.setenv("SOUL_ALLOW_FIELD_PATHS", "1")
    assert confined_field_path(str(tmp_path / "elsewhere"), folder) == tmp_path / "elsewhere"
    assert confined_field_path("../x", folder) == (tmp_path / "x").resolve()

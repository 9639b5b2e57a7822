"""One confined-file reader (`soul.textfiles`, issue 12): its refusals by reason, and the three
callers (templates and persona, `scripted:`/`replay:` files, `memory.field`) each turning the
same refusal into their own error type."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from soul import textfiles
from soul.errors import FileRefused, MemoryFieldError, ProviderError
from soul.language import field_folder
from soul.language.files import confine, read_text
from soul.providers.files import read_text as read_spec
from soul.runtime.bridges.memory import confined_field_path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """tmp_path/bp, with `out` a symlink to a folder outside and `secret.txt` outside."""
    inside = tmp_path / "bp"
    inside.mkdir()
    (tmp_path / "secret.txt").write_text("API_KEY=sk-x")
    (inside / "out").symlink_to(tmp_path, target_is_directory=True)
    (inside / "note.txt").write_text("hello")
    return inside


def reason(call: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(textfiles.Refused) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return caught.value.reason


def test_confine_resolves_inside_and_names_each_way_out(folder: Path) -> None:
    assert textfiles.confine(folder, "note.txt") == (folder / "note.txt").resolve()
    assert textfiles.confine(folder, "sub/../note.txt") == (folder / "note.txt").resolve()
    assert textfiles.confine(folder, "not/yet/there") == (folder / "not/yet/there").resolve()
    assert reason(textfiles.confine, folder, "out/secret.txt") == "outside"
    assert reason(textfiles.confine, folder, "../secret.txt") == "outside"
    assert reason(textfiles.confine, folder, "a\0b") == "nul"
    assert reason(textfiles.confine, folder, str(folder / "note.txt")) == "absolute"
    assert textfiles.confine(folder, str(folder / "note.txt"), absolute=True) == (folder / "note.txt").resolve()
    assert reason(textfiles.confine, folder, "/etc/passwd", absolute=True) == "outside"
    (folder / "loop").symlink_to(folder / "loop")
    assert reason(textfiles.confine, folder, "loop/x") == "unresolvable"
    with pytest.raises(FileRefused, match="cannot be resolved"):
        confine(folder, "loop/x", "template")


def test_an_outside_refusal_carries_the_real_path_and_folder(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(textfiles.Refused) as caught:
        textfiles.confine(folder, "out/secret.txt")
    assert caught.value.path == (tmp_path / "secret.txt").resolve()
    assert caught.value.folder == folder.resolve()


def test_read_text_refuses_what_is_not_a_small_regular_utf8_file(folder: Path) -> None:
    assert textfiles.read_text(folder / "note.txt", 100) == "hello"
    assert reason(textfiles.read_text, folder / "missing.txt", 100) == "missing"
    assert reason(textfiles.read_text, folder, 100) == "not_regular"
    assert reason(textfiles.read_text, Path("/dev/zero"), 100) == "not_regular"
    (folder / "big.txt").write_text("x" * 101)
    with pytest.raises(textfiles.Refused) as caught:
        textfiles.read_text(folder / "big.txt", 100)
    assert (caught.value.reason, caught.value.size) == ("too_large", 101)
    (folder / "latin.txt").write_bytes(b"caf\xe9")
    with pytest.raises(textfiles.Refused) as caught:
        textfiles.read_text(folder / "latin.txt", 100)
    assert (caught.value.reason, caught.value.byte) == ("not_utf8", 3)


def test_a_fifo_is_refused_without_blocking(folder: Path) -> None:
    os.mkfifo(folder / "pipe")
    started = time.perf_counter()
    assert reason(textfiles.read_text, folder / "pipe", 100) == "not_regular"
    assert time.perf_counter() - started < 1


def test_a_proc_file_that_claims_size_zero_is_read_bounded() -> None:
    environ = Path("/proc/self/environ")
    if not environ.exists():
        pytest.skip("no /proc")
    with pytest.raises(textfiles.Refused) as caught:
        textfiles.read_text(environ, 0)  # stat says 0 bytes; the read finds more
    assert caught.value.reason in ("too_large", "not_utf8")


def test_the_three_callers_word_one_refusal_as_their_own_errors(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match=r"it resolves to .*, outside the blueprint's folder"):
        confine(folder, "out/secret.txt", "template")
    with pytest.raises(ProviderError, match="is outside the blueprint's folder"):
        read_spec("out/secret.txt", "scripted replies", 100, within=folder)
    with pytest.raises(FileRefused, match=r"memory.field 'out' refused: it resolves to .*\(through '..' or a symlink\)"):
        field_folder("out", folder, allow=False)
    with pytest.raises(MemoryFieldError, match=r"memory\.field 'out' is refused: it resolves to"):
        confined_field_path("out", folder, allow=False)
    os.mkfifo(folder / "pipe")
    with pytest.raises(FileRefused, match="not a regular file"):
        read_text(folder / "pipe", "persona", "pipe")
    with pytest.raises(ProviderError, match="is not a regular file"):
        read_spec("pipe", "cassette", 100, within=folder)


def test_a_nul_in_a_spec_name_is_a_provider_error(folder: Path) -> None:
    with pytest.raises(ProviderError, match="NUL character"):
        read_spec("a\0b.yaml", "scripted replies", 100, within=folder)

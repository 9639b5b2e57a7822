"""Files a model spec names are regular, size-limited and, from a blueprint, inside its folder
(issue 12.9): `scripted:/dev/zero` read until memory ran out."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

import soul
from soul.cli.main import main
from soul.errors import ProviderError
from soul.providers import resolve
from soul.providers.cassette import Cassette
from soul.providers.scripted import MAX_SCRIPT_BYTES, ScriptedProvider

HOSTILE = ["/dev/zero", "/dev/urandom", "/proc/self/environ", "/etc/passwd", "../outside.yaml", "~/x.yaml", "."]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    inside = tmp_path / "bp"
    inside.mkdir()
    (inside / "replies.yaml").write_text(yaml.safe_dump(["<external_dialogue>hi</external_dialogue>"]))
    (tmp_path / "outside.yaml").write_text(yaml.safe_dump(["outside"]))
    (inside / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    return inside


def test_a_blueprint_script_is_read_from_its_folder(folder: Path) -> None:
    provider = resolve("scripted:replies.yaml", within=folder)
    assert isinstance(provider, ScriptedProvider) and provider.replies == ["<external_dialogue>hi</external_dialogue>"]


@pytest.mark.parametrize("path", [*HOSTILE, "link.yaml", "sub/../../outside.yaml"])
def test_a_blueprint_script_outside_its_folder_or_special_is_refused(folder: Path, path: str) -> None:
    started = time.perf_counter()
    for spec in (f"scripted:{path}", f"replay:{path}"):
        with pytest.raises(ProviderError) as caught:
            resolve(spec, within=folder)
        assert "outside the blueprint's folder" in str(caught.value) or "not a regular file" in str(caught.value) \
            or "does not exist" in str(caught.value)
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/proc/self/environ"])
def test_special_files_are_refused_from_the_command_line_too(path: str) -> None:
    # Devices are not regular files; /proc files are, with size 0, so they are read bounded.
    started = time.perf_counter()
    with pytest.raises(ProviderError):
        ScriptedProvider.from_file(path)
    with pytest.raises(ProviderError):
        Cassette.load(path)
    assert time.perf_counter() - started < 2


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "replies.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ProviderError, match="not a regular file"):
        ScriptedProvider.from_file(fifo)


def test_a_script_over_the_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("- " + "x" * MAX_SCRIPT_BYTES + "\n")
    with pytest.raises(ProviderError, match="over the limit"):
        ScriptedProvider.from_file(big)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"- \xff\xfe\n")
    with pytest.raises(ProviderError, match="not UTF-8"):
        ScriptedProvider.from_file(bad)


def test_the_cli_refuses_dev_zero_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--script", "/dev/zero"], ["--model", "scripted:/dev/zero"], ["--replay", "/dev/zero"]):
        assert main(["run", "claudius", *argv, "-m", "hi"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("soul: error: ") and "/dev/zero" in err and "Traceback" not in err


def test_a_blueprint_naming_dev_zero_fails_to_load_cleanly(tmp_path: Path, soul_home: Path) -> None:
    path = tmp_path / "z.yaml"
    path.write_text("soul: z\nversion: 1\nmodel: scripted:/dev/zero\nsteps:\n  reply: {uses: external_dialogue}\n")
    with pytest.raises(ProviderError, match="outside the blueprint's folder"):
        s = soul.load(path, home=soul_home)
        s.session().turn_sync("hi")


def test_a_blueprint_naming_a_special_file_beside_it_fails_to_load_cleanly(tmp_path: Path, soul_home: Path) -> None:
    os.mkfifo(tmp_path / "replies.fifo")  # inside the folder, but no regular file: never read
    path = tmp_path / "z.yaml"
    path.write_text("soul: z\nversion: 1\nmodel: scripted:replies.fifo\nsteps:\n  reply: {uses: external_dialogue}\n")
    with pytest.raises(ProviderError, match="not a regular file"):
        soul.load(path, home=soul_home).session().turn_sync("hi")


def test_a_scripted_reply_may_come_late_as_a_slow_models_would(tmp_path: Path) -> None:
    import asyncio

    from soul.providers.base import Message, Request

    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump([{"text": "late", "seconds": 0.3}, "at once"]))
    provider = ScriptedProvider.from_file(path)
    request = Request(model="x", messages=(Message("user", "hi"),))
    started = time.perf_counter()
    assert asyncio.run(provider.complete(request)).text == "late"
    assert time.perf_counter() - started >= 0.3
    started = time.perf_counter()
    assert asyncio.run(provider.complete(request)).text == "at once"
    assert time.perf_counter() - started < 0.3
    for bad in ({"text": "x", "seconds": -1}, {"text": "x", "seconds": True}, {"text": "x", "seconds": "soon"},
                {"text": "x", "seconds": 1, "extra": 2}, {"text": "x"}):
        path.write_text(yaml.safe_dump([bad]))
        with pytest.raises(ProviderError, match="seconds: N"):
            ScriptedProvider.from_file(path)

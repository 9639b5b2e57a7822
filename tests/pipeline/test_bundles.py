"""Soul bundles (docs/bundles.md): `soul pack` → `soul unpack` on a fresh data home → the
session resumes, its memory recalls, on SQLite and on PostgreSQL; `soul sessions import`; and
what goes into a bundle (the files a soul names, nothing else of its folder)."""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

import postgres_server
import pytest
from store_backends import backend  # noqa: F401 (a fixture)

import soul
from soul.bundles import import_sessions, pack, soul_files, unpack
from soul.cli import main
from soul.compiler import load_valid
from soul.errors import SessionExists
from soul.providers import ScriptedProvider

REPLY = '<internal_monologue verb="thought">A builder.</internal_monologue><external_dialogue verb="said">{}</external_dialogue>'


def write_soul(folder: Path) -> Path:
    """A soul of several files: blueprint, persona, a template that includes another, a tool
    module, an embedder-free memory block; and files it does not name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pal.md").write_text("# Pal\nYou are Pal, a patient friend.\n")
    (folder / "think.j2").write_text('{% include "style.j2" %}\nThink before you answer.\n')
    (folder / "style.j2").write_text("Keep it short.\n")
    (folder / "pal_tools.py").write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    (folder / "notes.txt").write_text("not part of the soul\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    path = folder / "pal.yaml"
    path.write_text(textwrap.dedent("""\
        soul: pal
        version: 1
        persona: pal.md
        memory: {}
        tools:
          shout: pal_tools:shout
        steps:
          think: {uses: internal_monologue, template: think.j2}
          reply: {uses: external_dialogue, after: [think], tools: [shout]}
        """))
    return path


def test_a_bundle_holds_the_files_the_soul_names_and_nothing_else(tmp_path: Path) -> None:
    path = write_soul(tmp_path / "pal")
    names = [name for name, _ in soul_files(load_valid(str(path)))]
    assert names[0] == "pal.yaml"
    assert sorted(names) == ["pal.md", "pal.yaml", "pal_tools.py", "style.j2", "think.j2"]


def test_a_built_in_soul_packs_only_its_own_files() -> None:
    names = sorted(name for name, _ in soul_files(load_valid("csd")))
    assert names == ["csd.md", "csd.yaml", "csd_core.md"]


def run_turn(path: Path, home: Path, text: str, reply: str, session: str | None = None) -> tuple[str, ScriptedProvider]:
    provider = ScriptedProvider([REPLY.format(reply)])
    with soul.load(path, provider=provider, home=home) as s:
        result = s.session(id=session).turn_sync(text)
        if session is None:
            s.remember([{"text": "Ada builds boats in Bergen."}], result.session_id)
    return result.session_id, provider


def test_pack_unpack_on_a_fresh_home_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:  # noqa: F811
    monkeypatch.delenv("SOUL_STORE", raising=False)
    path = write_soul(tmp_path / "pal")
    first_home = tmp_path / "home1"
    monkeypatch.setenv("SOUL_HOME", str(first_home))
    sid, _ = run_turn(path, first_home, "I am Ada.", "Hello Ada.")
    bundle = tmp_path / "pal.tar.gz"
    packed = pack(load_valid(str(path)), bundle, sessions=True, memory=True)
    assert packed.manifest.sessions == (sid,) and packed.manifest.embedder is not None
    assert {m.split("/")[0] for m in packed.manifest.members} == {"soul", "sessions", "memory"}

    # another machine: a fresh data home, and the store of the backend under test
    second_home = tmp_path / "home2"
    monkeypatch.setenv("SOUL_HOME", str(second_home))
    if backend == "postgresql":
        monkeypatch.setenv("SOUL_STORE", postgres_server.fresh_url())
    target = tmp_path / "elsewhere" / "pal"
    done = unpack(bundle, target, home=second_home)
    assert done.sessions == (sid,) and done.blueprint == target / "pal.yaml"
    assert sorted(p.name for p in target.iterdir()) == ["pal.md", "pal.yaml", "pal_tools.py", "style.j2", "think.j2"]
    assert done.memory == second_home / "fields" / "pal"

    _, provider = run_turn(done.blueprint, second_home, "What do I do?", "You build boats.", session=sid)
    prompt = "\n".join(m.content for m in provider.requests[0].messages)
    assert "I am Ada." in prompt and "Hello Ada." in prompt  # the first turn, carried over
    with soul.load(done.blueprint, provider=ScriptedProvider([]), home=second_home) as s:
        assert s.store.find_session(sid).turns == 2
        assert str(done.blueprint) == s.store.find_session(sid).blueprint
        hits = s.memory_field().recall("Where does Ada build boats?", k=1)
        assert hits and "Bergen" in hits[0].text
    # the JSONL mirror is rebuilt on the new machine
    assert "Hello Ada." in (second_home / "logs" / sid / "external_dialog.jsonl").read_text()


def test_sessions_import_loads_a_bundles_sessions_once(tmp_path: Path, soul_home: Path) -> None:
    path = write_soul(tmp_path / "pal")
    sid, _ = run_turn(path, soul_home, "I am Ada.", "Hello Ada.")
    bundle = tmp_path / "pal.tar.gz"
    pack(load_valid(str(path)), bundle, sessions=True)
    fresh = tmp_path / "fresh"
    assert import_sessions(bundle, home=fresh) == [sid]
    with pytest.raises(SessionExists, match=f"already has a session {sid}.*soul sessions delete"):
        import_sessions(bundle, home=fresh)


def test_the_cli_packs_unpacks_and_imports(tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write_soul(tmp_path / "pal")
    sid, _ = run_turn(path, soul_home, "I am Ada.", "Hello Ada.")
    bundle = tmp_path / "pal.tar.gz"
    assert main(["pack", str(path), "-o", str(bundle), "--sessions"]) == 0
    assert "packed pal into" in capsys.readouterr().out
    monkeypatch.setenv("SOUL_HOME", str(tmp_path / "other"))
    monkeypatch.chdir(tmp_path)
    assert main(["unpack", str(bundle)]) != 0  # into ./pal… which exists: refused, nothing written
    err = capsys.readouterr().err
    assert "already exists and is not an empty folder" in err
    assert main(["unpack", str(bundle), "copy"]) == 0
    out = capsys.readouterr().out
    assert f"imported 1 session: {sid}" in out and f"soul run {tmp_path / 'copy' / 'pal.yaml'} --session {sid}" in out
    monkeypatch.setenv("SOUL_HOME", str(tmp_path / "third"))
    assert main(["sessions", "import", str(bundle)]) == 0
    assert f"imported 1 session: {sid}" in capsys.readouterr().out
    with tarfile.open(bundle) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert manifest["format"] == 1 and manifest["soul"] == "pal" and manifest["soulgraph"]


def test_an_unpack_whose_sessions_are_refused_leaves_no_files_behind(tmp_path: Path, soul_home: Path) -> None:
    path = write_soul(tmp_path / "pal")
    run_turn(path, soul_home, "I am Ada.", "Hello Ada.")
    bundle = tmp_path / "pal.tar.gz"
    pack(load_valid(str(path)), bundle, sessions=True)
    home = tmp_path / "fresh"
    unpack(bundle, tmp_path / "first", home=home)
    with pytest.raises(SessionExists):
        unpack(bundle, tmp_path / "second", home=home)  # the same session again: refused
    assert not (tmp_path / "second").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".soul-unpack-")]

"""A soul's field and `soul memory`: the embedder is chosen, recorded, refused when it differs,
and `soul memory reembed` migrates a field to another model."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import soul
from soul.cli.main import main
from soul.errors import MemoryFieldError

pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).parents[1] / "engines" / "resonance"))
from tiny_onnx import write_tiny_model

BLUEPRINT = """\
soul: rememberer
version: 1
memory:
  field: field
  store: {{episodes: true}}
{embedder}steps:
  recall: {{uses: memory.recall, with: {{k: 3, mode: semantic, this_session: true}}}}
  reply: {{uses: external_dialogue, after: [recall]}}
"""
TINY = "  embedder: {model: tiny/model.onnx}\n"


def _turn(path: Path, home: Path, text: str) -> soul.TurnResult:
    provider = soul.ScriptedProvider(["<external_dialogue>Noted.</external_dialogue>"])
    return soul.load(path, provider=provider, home=home).session().turn_sync(text)


def test_the_blueprint_chooses_the_embedder_and_a_field_of_another_model_is_refused(
        write_blueprint, soul_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_tiny_model(tmp_path / "tiny", seed=7)
    path = write_blueprint(BLUEPRINT.format(embedder=TINY))
    _turn(path, soul_home, "My cat is called Miso and she is a tabby.")
    record = soul.load(path, home=soul_home).memory_field().embedder_record
    assert record["name"] == "tiny" and record["dim"] == 16
    path = write_blueprint(BLUEPRINT.format(embedder="  embedder: {model: minilm}\n"))
    with pytest.raises(MemoryFieldError) as err:
        soul.load(path, home=soul_home).memory_field()
    message = str(err.value)
    assert "'tiny' (16-d" in message and "all-MiniLM-L6-v2-onnx-int8" in message
    assert "soul memory reembed --field" in message and "--embedder minilm" in message


def test_an_embedder_file_outside_the_blueprint_folder_is_refused(write_blueprint, soul_home: Path,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_FIELD_PATHS", raising=False)
    path = write_blueprint(BLUEPRINT.format(embedder="  embedder: {model: /opt/model.onnx}\n"))
    with pytest.raises(MemoryFieldError, match=r"memory.embedder.model '/opt/model.onnx' is refused"):
        soul.load(path, home=soul_home).memory_field()


def test_reembed_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = str(write_tiny_model(tmp_path / "tiny", seed=8))
    notes = tmp_path / "notes.txt"
    notes.write_text("Miso is a tabby cat who likes boxes.\nThe release is planned for March.\nAda builds compilers.\n")
    field = str(tmp_path / "field")
    assert main(["memory", "ingest", str(notes), "--field", field]) == 0  # the default model
    capsys.readouterr()
    assert main(["memory", "recall", "cat", "--field", field, "--embedder", tiny]) == 1
    err = capsys.readouterr().err
    assert "all-MiniLM-L6-v2-onnx-int8" in err and "'tiny' (16-d" in err and "soul memory reembed" in err

    assert main(["memory", "reembed", "--field", field, "--embedder", tiny]) == 0
    out = capsys.readouterr().out
    assert "re-embedded 3 memories" in out and "'tiny' (16-d" in out and "(was 'all-MiniLM-L6-v2-onnx-int8'" in out
    assert main(["memory", "recall", "Miso likes boxes", "--field", field, "--embedder", tiny,
                 "--mode", "semantic", "-k", "1"]) == 0
    assert "Miso is a tabby cat" in capsys.readouterr().out
    assert main(["memory", "recall", "cat", "--field", field, "--mode", "semantic"]) == 1  # MiniLM now refused
    assert "--embedder minilm" in capsys.readouterr().err
    assert main(["memory", "reembed", "--field", field, "--embedder", tiny]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["memory", "reembed", "--field", field]) == 0  # back to the default
    assert "with 'all-MiniLM-L6-v2-onnx-int8'" in capsys.readouterr().out


def test_reembed_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "reembed", "--field", str(tmp_path / "nowhere")]) == 1
    assert "names no folder: pass the folder of a memory field" in capsys.readouterr().err
    (tmp_path / "m").mkdir()
    shutil.copyfile(write_tiny_model(tmp_path / "t"), tmp_path / "m" / "model.onnx")  # no tokenizer beside it
    notes = tmp_path / "n.txt"
    notes.write_text("Miso is a tabby cat who likes boxes.\n")
    assert main(["memory", "ingest", str(notes), "--field", str(tmp_path / "f")]) == 0
    capsys.readouterr()
    assert main(["memory", "reembed", "--field", str(tmp_path / "f"), "--embedder", str(tmp_path / "m" / "model.onnx")]) == 1
    assert "tokenizer.json does not exist" in capsys.readouterr().err
    assert main(["memory", "reembed", "--field", str(tmp_path / "f"), "--embedder", "bge-huge"]) == 1
    assert "no embedder named 'bge-huge'; built in: minilm" in capsys.readouterr().err

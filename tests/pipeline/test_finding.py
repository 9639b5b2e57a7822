"""Names a user would type: `soul new NAME`, then `soul validate|explain|graph|run NAME` finds
./NAME.yaml (or ./NAME/NAME.yaml); a name found nowhere says what is nearby."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soul.cli.main import main
from soul.errors import BlueprintNotFound
from soul.language import locate
from soul.language.finding import builtin_folder

HELLO = Path(__file__).resolve().parents[2] / "examples" / "claudius-hello.yaml"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_verb_finds_the_soul_new_wrote_by_its_name(capsys: pytest.CaptureFixture[str], here: Path) -> None:
    assert run(capsys, "new", "mysoul")[0] == 0
    code, out, err = run(capsys, "validate", "mysoul")
    assert (code, out.strip(), err) == (0, "mysoul.yaml: valid", "")
    code, out, _ = run(capsys, "graph", "mysoul")
    assert code == 0 and "think" in out
    code, out, _ = run(capsys, "explain", "mysoul", "-m", "hi")
    assert code == 0 and "mysoul" in out
    script = here / "script.yaml"
    script.write_text(HELLO.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = run(capsys, "run", "mysoul", "--script", str(script), "-m", "Hello", "--json")
    assert code == 0, err
    assert json.loads(out)["reply"]


def test_soul_new_says_the_name_is_enough(capsys: pytest.CaptureFixture[str], here: Path) -> None:
    _, out, _ = run(capsys, "new", "mysoul")
    assert out.splitlines()[-1] == "next: soul validate mysoul"


def test_a_name_finds_its_folder_layout(capsys: pytest.CaptureFixture[str], here: Path) -> None:
    run(capsys, "new", "mysoul", "--dir", "mysoul")
    (here / "mysoul" / "notes.yaml").write_text("a: 1\n", encoding="utf-8")  # not alone in its folder
    assert locate("mysoul") == Path("mysoul") / "mysoul.yaml"
    code, out, _ = run(capsys, "validate", "mysoul")
    assert code == 0 and out.strip() == "mysoul/mysoul.yaml: valid"


def test_the_folder_s_own_blueprint_comes_before_a_built_in_one(here: Path) -> None:
    (here / "claudius.yaml").write_text("soul: mine\n", encoding="utf-8")
    assert locate("claudius") == Path("claudius.yaml")
    (here / "claudius.yaml").unlink()
    assert locate("claudius") == builtin_folder() / "claudius.yaml"


def test_a_misspelt_name_says_did_you_mean_the_file(capsys: pytest.CaptureFixture[str], here: Path) -> None:
    run(capsys, "new", "mysoul")
    code, _, err = run(capsys, "validate", "mysol")
    assert code == 2
    assert err.strip() == ("soul: error: no blueprint 'mysol': no ./mysol.yaml and no built-in soul by that name; "
                           "built-in souls: claudius, csd, entelgia, samantha (did you mean ./mysoul.yaml?)")
    with pytest.raises(BlueprintNotFound, match=r"^mysol\.yaml: no such file \(did you mean \./mysoul\.yaml\?\)$"):
        locate("mysol.yaml")


def test_a_misspelt_name_of_a_folder_layout_names_its_file(here: Path) -> None:
    main(["new", "mysoul", "--dir", "mysoul"])
    with pytest.raises(BlueprintNotFound, match=r"\(did you mean \./mysoul/mysoul\.yaml\?\)$"):
        locate("mysol")


def test_a_name_near_a_built_in_soul_still_suggests_it(here: Path) -> None:
    with pytest.raises(BlueprintNotFound, match=r"\(did you mean 'claudius'\?\)$"):
        locate("claudus")

"""`soul dialogue`: a scripted run whose metrics and interventions are computed by hand, the
readable output, the plot, and the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dialogue_souls import HAND, HAND_SCRIPT, write_dialogue

from soul.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def hand(tmp_path: Path) -> Path:
    return write_dialogue(tmp_path / "hand", HAND, HAND_SCRIPT)


def test_scripted_dialogue_json_has_the_hand_computed_metrics_and_interventions(
        capsys: pytest.CaptureFixture[str], hand: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, stdout, err = run(capsys, "dialogue", str(hand), "--turns", "10", "--script", str(hand.parent / "script.yaml"),
                            "--json", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    speakers = [t["speaker"] for t in data["transcript"]]
    # round robin a, b; after turn 5 nothing in turns 3-5 synthesises: Fixy (turn 6); it then
    # keeps its cooldown of 3 turns, and after turn 9 the same rule fires again (turn 10)
    assert speakers == ["a", "b", "a", "b", "a", "fixy", "b", "a", "b", "fixy"]
    assert [t["text"] for t in data["transcript"]][5] == "Consider what these images share."
    assert [(i["turn"], i["reason"], i["evidence"]) for i in data["interventions"]] == [
        (6, "synthesis_opportunity", {"turns_without_synthesis": 3}),
        (10, "synthesis_opportunity", {"turns_without_synthesis": 3}),
    ]
    m = data["metrics"]
    assert m["turns"] == 10 and m["fixy_turns"] == 2
    assert m["circularity_rate"] == pytest.approx(1 / 35)  # one pair (turns 1 and 3) of the 35 at most 5 apart
    assert m["progress_rate"] == pytest.approx(1.0)  # every turn's words differ from the one before
    assert m["loop_rate"] == pytest.approx(10.0)  # one loop turn (3) per 10 turns, times 100
    assert m["fixy_per_50"] == pytest.approx(10.0)  # 2 of 10 turns, times 50
    # new keywords per turn: 4 5 0 5 3 4 3 3 3 2 = 32 over 10 turns, per 10 turns
    assert m["novelty_ratio"] == pytest.approx(32.0)
    # Fixy at turn 6: circularity of turns 1-5 (1 of 10 pairs) minus turns 7-10 (0); the Fixy
    # turn at the end has no turns after it and does not count
    assert m["intervention_utility"] == pytest.approx(0.1)
    # conflict 2 (a) and 6 (b) at positions 0,1,2,3,4,6,7,8: slope 10 / 58.875
    assert m["conflict_trend"] == pytest.approx(10 / 58.875)
    assert m["conflict_mean"] == pytest.approx(4.0)
    assert "Fixy stepped in: synthesis_opportunity" in stdout
    assert "Dialogue metrics" in stdout and "circularity" in stdout


def test_the_dialogue_prints_its_topic_first_and_every_share_in_percent(
        capsys: pytest.CaptureFixture[str], hand: Path) -> None:
    code, stdout, err = run(capsys, "dialogue", str(hand), "--turns", "10", "--script", str(hand.parent / "script.yaml"))
    assert code == 0, err
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines[0].endswith("random seed 3")  # the dialogue's random seed, named so
    assert lines[1] == "topic: freedom"  # before anyone speaks
    assert lines[2].startswith("A (turn 1")
    assert "(every share in % of turns or turn pairs; other signals in their unit)" in " ".join(stdout.split())
    rows = {cells[0]: cells[1:] for line in lines if line.startswith("│")
            for cells in [[c.strip() for c in line.strip("│").split("│")]]}
    # the hand-computed metrics of the test above, each share as a percentage
    assert rows["circularity"] == ["2.9", "% of turn pairs"]  # 1 of the 35 pairs at most 5 apart
    assert rows["progress"] == ["100.0", "% of turns"]
    assert rows["loop rate"] == ["10.0", "% of turns"]
    assert rows["Fixy's share"] == ["20.0", "% of turns"]  # 2 of 10 turns (fixy_per_50 = 10)
    assert rows["intervention utility"] == ["+10.0", "points of circularity less after Fixy"]
    assert rows["novelty"] == ["3.2", "new concepts per turn"]  # 32 over 10 turns
    assert rows["conflict mean"] == ["4.0", "conflict index (0–20)"]
    assert rows["topic drift"][0] == "n/a"  # a scripted run has no embedder


def test_json_to_stdout_is_only_json(capsys: pytest.CaptureFixture[str], hand: Path) -> None:
    code, stdout, err = run(capsys, "dialogue", str(hand), "--turns", "3", "--script", str(hand.parent / "script.yaml"), "--json")
    assert code == 0, err
    data = json.loads(stdout)
    assert [t["speaker"] for t in data["transcript"]] == ["a", "b", "a"]
    assert set(data) >= {"transcript", "interventions", "metrics", "series", "dreams", "gated", "seed", "dialogue"}


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], hand: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "signals.png"
    code, _, err = run(capsys, "dialogue", str(hand), "--turns", "10", "--script", str(hand.parent / "script.yaml"), "--plot", str(png))
    assert code == 0, err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 1000) and len(data) > 20_000


def test_model_text_is_printed_as_text_not_markup(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = {"a": ["[bold red]shout[/] \x1b]0;title\x07 done."], "b": ["fine."], "fixy": []}
    path = write_dialogue(tmp_path / "hostile", HAND, script)
    code, stdout, err = run(capsys, "dialogue", str(path), "--turns", "2", "--script", str(path.parent / "script.yaml"))
    assert code == 0, err
    assert "[bold red]shout[/]" in stdout and "\x1b" not in stdout and "\\x1b" in stdout


def test_a_script_that_is_one_list_is_refused_with_how_to_fix(capsys: pytest.CaptureFixture[str], hand: Path) -> None:
    (hand.parent / "list.yaml").write_text("- one\n- two\n")
    code, _, err = run(capsys, "dialogue", str(hand), "--turns", "2", "--script", str(hand.parent / "list.yaml"))
    assert code == 1
    assert "maps each agent's name to its replies" in err and "Traceback" not in err


def test_a_script_that_runs_out_names_the_agent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_dialogue(tmp_path / "short", HAND, {"a": ["Only one line."], "fixy": []})
    code, _, err = run(capsys, "dialogue", str(path), "--turns", "3", "--script", str(path.parent / "script.yaml"))
    assert code == 1
    assert "[b: no entry" in err and "Traceback" not in err
    assert "is saved after turn 1; continue it with --resume" in err  # what ran is not lost


def test_a_soul_without_dialogue_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "dialogue", "samantha", "--turns", "1")
    assert code == 1 and "has no `dialogue:` block" in err


def test_an_unknown_speaker_policy_is_reported_at_its_position(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_dialogue(tmp_path / "policy", HAND.replace("kind: round_robin", "kind: round_robbin"), HAND_SCRIPT)
    code, _, err = run(capsys, "dialogue", str(path), "--turns", "1", "--script", str(path.parent / "script.yaml"))
    assert code == 1
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "round_robbin" in text)
    assert f"soul.yaml:{line}:" in err and "unknown speaker policy 'round_robbin'" in err and "round_robin" in err


def test_resume_continues_the_stored_dialogue(capsys: pytest.CaptureFixture[str], hand: Path, tmp_path: Path) -> None:
    script = str(hand.parent / "script.yaml")
    code, stdout, err = run(capsys, "dialogue", str(hand), "--turns", "4", "--script", script, "--json")
    assert code == 0, err
    first = json.loads(stdout)
    # the rest of the script: each agent's lines after those already spoken
    rest = {"a": HAND_SCRIPT["a"][2:], "b": HAND_SCRIPT["b"][2:], "fixy": HAND_SCRIPT["fixy"]}
    (hand.parent / "rest.yaml").write_text(json.dumps(rest))
    code, stdout, err = run(capsys, "dialogue", str(hand), "--turns", "6", "--script", str(hand.parent / "rest.yaml"),
                            "--json", "--resume", first["dialogue"])
    assert code == 0, err
    whole = json.loads(stdout)
    assert [t["speaker"] for t in whole["transcript"]] == ["a", "b", "a", "b", "a", "fixy", "b", "a", "b", "fixy"]
    assert whole["metrics"]["circularity_rate"] == pytest.approx(1 / 35)


def test_script_keys_match_agents_in_any_case_and_a_stray_key_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_dialogue(tmp_path / "case", HAND, {"A": ["Hello there."], "B": ["Hello back."]})
    code, stdout, err = run(capsys, "dialogue", str(path), "--turns", "2", "--script", str(path.parent / "script.yaml"), "--json")
    assert code == 0, err
    assert [t["text"] for t in json.loads(stdout)["transcript"]] == ["Hello there.", "Hello back."]
    (path.parent / "typo.yaml").write_text("a: [x]\nb: [y]\nfixxy: [z]\n")
    code, _, err = run(capsys, "dialogue", str(path), "--turns", "2", "--script", str(path.parent / "typo.yaml"))
    assert code == 1 and "'fixxy' is no agent of the dialogue (its agents: a, b, fixy)" in err


def test_dialogue_blueprints_pointing_at_each_other_stop_soul_dialogue_with_the_chain(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def member(name: str, other: str) -> str:
        return (f"soul: {name}\nversion: 1\nsteps:\n  reply: {{uses: external_dialogue}}\n"
                f"dialogue:\n  agents:\n    x: {{blueprint: {other}}}\n    y: {{persona: y.md}}\n")

    (tmp_path / "y.md").write_text("Y.")
    (tmp_path / "a.yaml").write_text(member("a", "b.yaml"))
    (tmp_path / "b.yaml").write_text(member("b", "a.yaml"))
    code, _, err = run(capsys, "dialogue", str(tmp_path / "a.yaml"), "--turns", "1")
    assert code == 1
    assert "a.yaml:7:20: error: dialogue blueprints point at each other: a.yaml → b.yaml → a.yaml" in err
    assert "RecursionError" not in err

"""`soul dialogue entelgia --turns N --seed S --script FILE --json` (issue 14's scripted check):
the built-in soul, a script mapping each agent's name — Fixy's included — to its lines, and
the metrics, Fixy's interventions, emotions and drives compared with values worked out by hand
from the reference's formulas (docs/dialogue.md), not by calling the engine.

Who speaks when comes from the seeded random generator (Fixy's 20% draw, the engagement
scores), which no hand can follow: the speaker order is pinned as seed 1 gives it; everything
else below is derived from that order and the lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from soul.cli.main import main

C = "Consciousness emerges from complex neural processes in living brains."  # 7 keywords
SCRIPT = {
    "Socrates": ["Freedom means choosing both ends and means.", "Responsibility follows knowledge, both chosen and inherited.",
                 C, C, "I am furious, and you are wrong!", "Granted, both views matter here."],
    "Athena": ["Liberty needs limits, both inner and outer.", C, C, C, "Gardens both bloom and wither.",
               "Rivers both carve and carry."],
    "Fixy": ["You keep repeating one claim. Offer a concrete example.", "Step back and name what you both accept.",
             "What have we learned so far?"],
}
SPEAKERS = ["socrates", "athena", "athena", "fixy", "socrates", "athena", "socrates", "fixy", "athena", "socrates",
            "socrates", "fixy", "athena", "athena"]


@pytest.fixture
def scripted(tmp_path: Path, soul_home: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    code = main(["dialogue", "entelgia", "--turns", "14", "--seed", "1", "--script", str(script), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    data["saved"] = json.loads((soul_home / "dialogues" / f"{data['dialogue']}.json").read_text())
    return data


def test_the_scripted_entelgia_dialogue_says_each_agents_lines_in_order(scripted: dict) -> None:
    transcript = scripted["transcript"]
    assert [t["speaker"] for t in transcript] == SPEAKERS
    said: dict[str, list[str]] = {}
    for t in transcript:
        said.setdefault(t["speaker"], []).append(t["text"])
    assert said == {"socrates": SCRIPT["Socrates"][:5], "athena": SCRIPT["Athena"], "fixy": SCRIPT["Fixy"]}


def test_fixys_interventions_are_the_hand_computed_ones(scripted: dict) -> None:
    assert [(i["turn"], i["reason"], i["evidence"]) for i in scripted["interventions"]] == [
        # turn 4: the speaker policy drew Fixy (its 20%); no detector fires over turns 1-3 (too
        # few turns for circularity, turn < 5 for synthesis, < 6 for conflict; only Athena has
        # two turns, so no persona to compare), so Fixy reflects on the dialogue
        (4, "meta_reflection", {"scheduled": 1.0, "detail": "the observer's turn"}),
        # after turn 7 (out of the 3-turn cooldown: 8 − 4 > 3): over turns 1-7, C is said at
        # turns 3, 6, 7 — 3 of the 21 pairs have Jaccard 1 > 0.5: circular reasoning
        (8, "circular_reasoning", {"turns": 7, "pairs": 21, "similar_pairs": 3, "max_similarity": 1.0}),
        # not after turns 9 and 10 (cooldown: 10 − 8, 11 − 8 <= 3); after turn 11, over turns
        # 2-11 (the window of 10), C at 3, 6, 7, 9, 10: 10 of 45 pairs
        (12, "circular_reasoning", {"turns": 10, "pairs": 45, "similar_pairs": 10, "max_similarity": 1.0}),
    ]
    # not after turn 13: 14 − 12 <= 3; and the fixy turns say the script's lines, flagged with the reason
    fixy = [t for t in scripted["transcript"] if t["fixy"]]
    assert [t["flags"] for t in fixy] == [["reason:meta_reflection"], ["reason:circular_reasoning"], ["reason:circular_reasoning"]]


def test_the_metrics_are_the_hand_computed_ones(scripted: dict) -> None:
    m = scripted["metrics"]
    assert (m["turns"], m["fixy_turns"]) == (14, 3)
    # C is said at turns 3, 6, 7, 9, 10: of its C(5, 2) = 10 pairs, the only ones with J >= 0.5,
    # 8 are at most 5 turns apart (not 3-9, 3-10); of the 55 pairs of 14 turns at most 5 apart
    # (0 + 1 + 2 + 3 + 4 + 9 × 5; every turn has keywords, so every pair counts)
    assert m["circularity_rate"] == pytest.approx(8 / 55)
    # of the 13 turns after the first, all move on but turns 7 and 10 (C after C: J = 1, no
    # synthesis marker, no "?" before); "both" is a synthesis marker, but J < 0.4 already there
    assert m["progress_rate"] == pytest.approx(11 / 13)
    # loop turns (J >= 0.5 with one of the 5 before): 6, 7, 9, 10 → 4 per 14 turns, × 100
    assert m["loop_rate"] == pytest.approx(400 / 14)
    assert m["fixy_per_50"] == pytest.approx(150 / 14)
    # new keywords per turn: 3 5 7 5 5 0 0 1 0 0 2 1 3 3 = 35, per 10 turns over 14
    assert scripted["series"]["novelty"] == [3, 5, 7, 5, 5, 0, 0, 1, 0, 0, 2, 1, 3, 3]
    assert m["novelty_ratio"] == pytest.approx(350 / 14)
    # Fixy at turn 4: circularity before (turns 1-3) 0 − after (turns 5-9: C at 6, 7, 9 → 3 of
    # 10 pairs) 0.3 = −0.3; at turn 8: before (turns 3-7) 3/10 − after (turns 9-13: C at 9, 10)
    # 1/10 = 0.2; at turn 12: before (turns 7-11) 3/10 − after (turns 13-14) 0 = 0.3
    assert m["intervention_utility"] == pytest.approx((-0.3 + 0.2 + 0.3) / 3)
    assert m["topic_drift"] is None  # a scripted run calls no model, the embedder included


def test_emotions_move_the_drives_and_fire_the_seed_rule_and_the_defense(scripted: dict) -> None:
    agents = [t for t in scripted["transcript"] if not t["fixy"]]
    assert [(t["turn"], t["emotion"], t["intensity"]) for t in agents if t["emotion"] != "neutral"] == [(11, "anger", 0.9)]
    assert all(t["emotion"] is None for t in scripted["transcript"] if t["fixy"])
    # Socrates (id 4, ego 7, superego 6: conflict 4): each neutral turn is "reflective" — id −
    # 0.06, ego + 0.05 + 0.06, superego + 0.08 — so |id − ego| + |superego − ego| grows by 0.2:
    # 4.2, 4.4, 4.6, 4.8; then "furious … wrong!" (anger 0.8 + 0.1 for the "!"): aggressive —
    # id 3.76 + 0.18 + 0.09 + 0.10 = 4.13, ego 7.44 + 0.05 − 0.06 = 7.43, superego 6.32 − 0.08
    # = 6.24: 3.30 + 1.19 = 4.49. Athena (6, 6, 4: conflict 2) only neutral: 2.2, 2.4, … 3.2
    conflicts = [t["conflict"] for t in agents]
    assert conflicts == [4.2, 2.2, 2.4, 4.4, 2.6, 4.6, 2.8, 4.8, 4.49, 3.0, 3.2]
    m = scripted["metrics"]
    assert m["conflict_mean"] == pytest.approx(38.69 / 11)
    positions = [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13]  # the agents' turns (Fixy's have no conflict)
    mp, mc = sum(positions) / 11, 38.69 / 11
    slope = sum((p - mp) * (c - mc) for p, c in zip(positions, conflicts, strict=True)) / sum((p - mp) ** 2 for p in positions)
    assert m["conflict_trend"] == pytest.approx(slope)
    # the anger at turn 11 makes the next agent turn (13, past Fixy's 12) agree and expand
    assert [t["seed_strategy"] for t in agents if t["turn"] == 13] == ["agree_and_expand"]
    # turn 7 is a multiple of 7: meta_reflect, as is turn 14
    assert [t["seed_strategy"] for t in agents if t["turn"] in (7, 14)] == ["meta_reflect", "meta_reflect"]
    # the furious line's memory is intrusive (anger at 0.9 > 0.75), the others are not
    minds = scripted["saved"]["rules"]["minds"]
    flagged = [e["content"] for e in minds["socrates"]["subconscious"] if e["intrusive"]]
    assert flagged == ["I am furious, and you are wrong!"]
    assert not any(e["intrusive"] for e in minds["athena"]["subconscious"])
    # self-awareness 0.7 + 4 reflective turns × 0.03 + the aggressive one's 0.01
    assert minds["socrates"]["drives"] == {"id": 4.13, "ego": 7.43, "superego": 6.24, "self_awareness": 0.83, "conflict": None}


def test_a_script_that_runs_out_stops_with_the_agent_named(tmp_path: Path, soul_home: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "short.yaml"
    script.write_text(yaml.safe_dump({"socrates": ["Freedom means choosing."], "athena": ["Liberty needs limits."],
                                      "fixy": []}))
    code = main(["dialogue", "entelgia", "--turns", "6", "--seed", "1", "--script", str(script), "--json"])
    err = capsys.readouterr().err
    assert code == 1
    # seed 1: Socrates, then Athena, then Athena again — her one line is said
    assert f"scripted replies ran out: {script} [athena] has 1 reply, and call 2 needs another" in err
    assert "is saved after turn 2; continue it with --resume" in err


def test_the_readable_dialogue_shows_a_turns_emotion(tmp_path: Path, soul_home: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    assert main(["dialogue", "entelgia", "--turns", "11", "--seed", "1", "--script", str(script)]) == 0
    out = capsys.readouterr().out
    assert "Socrates (turn 11, question_assumption, anger 0.90, energy" in out
    assert "I am furious, and you are wrong!" in out and "Dialogue metrics" in out

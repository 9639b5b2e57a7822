"""A saved dialogue's metrics (issue 24.7): the state file keeps the metrics reader's checkpoint,
so a resumed dialogue restores its metrics instead of reading every turn again, with the values
the dialogue had; a dialogue saved before checkpoints existed reads its turns once, then is
saved with one; and a turn that held a secret never leaves its words in a checkpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from dialogue_souls import HAND, HAND_SCRIPT, write_dialogue

from soul.providers import ScriptedProvider
from soul.runtime import DialogueRunner, MetricsUpdated

TURNS = 8  # a, b, ..., with Fixy stepping in once (HAND_SCRIPT)
SECRET = "Zq8xTopSecretValue99"


def open_hand(path: Path, home: Path, lines: Mapping[str, list[str]] = HAND_SCRIPT, **options: Any) -> DialogueRunner:
    providers = {agent: ScriptedProvider(list(replies), agent) for agent, replies in lines.items()}
    return DialogueRunner.open(path, provider=providers, home=home, embedder=None, **options)


def saved(run: DialogueRunner) -> dict[str, Any]:
    return dict(json.loads(run.state_path().read_text(encoding="utf-8")))


@pytest.fixture
def ran(tmp_path: Path, soul_home: Path) -> tuple[Path, DialogueRunner, dict[str, Any], dict[str, Any]]:
    """HAND run for TURNS turns: (blueprint, runner, the last metrics it sent, its series)."""
    path = write_dialogue(tmp_path / "hand", HAND)
    run = open_hand(path, soul_home)
    sent: list[MetricsUpdated] = []
    run.subscribe(lambda e: sent.append(e) if isinstance(e, MetricsUpdated) else None)
    result = run.run_sync(TURNS)
    assert result.metrics == sent[-1].metrics and sent[-1].metrics["turns"] == TURNS
    return path, run, sent[-1].metrics, result.series


def test_a_resumed_dialogue_restores_the_metrics_it_had_without_reading_its_turns(ran: Any, soul_home: Path) -> None:
    path, run, metrics, series = ran
    checkpoint = saved(run)["metrics_checkpoint"]
    assert checkpoint["turns"] == TURNS
    resumed = open_hand(path, soul_home, resume=run.id)
    assert resumed.rules.metrics() == metrics  # the incremental values, exactly
    assert resumed.rules.metrics_read_whole == 0  # restored: no turn's words read
    assert resumed.result().series == series
    assert resumed.read_metrics(save=True) is False  # nothing to save: the file has its checkpoint


def test_a_dialogue_saved_before_checkpoints_reads_its_turns_once_then_saves_one(ran: Any, soul_home: Path) -> None:
    path, run, metrics, series = ran
    old = saved(run)
    del old["metrics_checkpoint"]  # as a dialogue saved before issue 24.7 is
    run.state_path().write_text(json.dumps(old), encoding="utf-8")
    resumed = open_hand(path, soul_home, resume=run.id)
    assert resumed.rules.metrics() == metrics and resumed.result().series == series
    assert resumed.rules.metrics_read_whole == TURNS  # read whole, once
    assert resumed.read_metrics(save=True) is True
    assert saved(run)["metrics_checkpoint"]["turns"] == TURNS
    again = open_hand(path, soul_home, resume=run.id)
    assert again.rules.metrics() == metrics and again.rules.metrics_read_whole == 0


def test_a_checkpoint_over_turns_edited_since_is_not_used(ran: Any, soul_home: Path) -> None:
    path, run, metrics, _ = ran
    edited = saved(run)
    turns = edited["rules"]["turns"]
    turns[1]["text"] = turns[0]["text"]  # the first three turns now say the same (0 and 2 did)
    run.state_path().write_text(json.dumps(edited), encoding="utf-8")
    resumed = open_hand(path, soul_home, resume=run.id)
    got = resumed.rules.metrics()
    assert resumed.rules.metrics_read_whole == TURNS  # the stored turns were read, not the checkpoint
    assert got["circularity_rate"] != metrics["circularity_rate"]


def test_a_turn_holding_a_secret_leaves_no_checkpoint_of_its_words(tmp_path: Path, soul_home: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAND_API_TOKEN", SECRET)
    path = write_dialogue(tmp_path / "hand", HAND)
    lines = {**HAND_SCRIPT, "b": [f"Keep {SECRET} safely.", *HAND_SCRIPT["b"][1:]]}
    run = open_hand(path, soul_home, lines)
    run.run_sync(4)
    text = run.state_path().read_text(encoding="utf-8")
    assert SECRET.lower() not in text.lower()  # no word of it, in any case
    assert json.loads(text)["metrics_checkpoint"] is None
    # resumed, the turns are the saved (redacted) ones: their checkpoint is saved
    resumed = open_hand(path, soul_home, lines, resume=run.id)
    assert resumed.read_metrics(save=True) is True
    text = run.state_path().read_text(encoding="utf-8")
    assert json.loads(text)["metrics_checkpoint"]["turns"] == 4 and SECRET.lower() not in text.lower()

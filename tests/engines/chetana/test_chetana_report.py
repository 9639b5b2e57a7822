"""The cognitive report: its JSON form and the `/chetana` rendering."""

import json

from soul.engines.chetana import ChetanaController


def busy_controller() -> ChetanaController:
    chetana = ChetanaController()
    chetana.before_turn("Let's fix the auth bug and add input validation")
    for ok in (True, True, False, True):
        chetana.after_tool_execution("read", ok, 20, "auth bug located")
    chetana.after_tool_execution("edit", True, 40, "input validation added")
    chetana.after_turn()
    chetana.before_turn("implement the session cache")
    chetana.achieve(chetana.cognitive_report().intentions[-1].id)
    for _ in range(3):
        chetana.after_turn()
    return chetana


def test_to_dict_is_plain_json_with_every_section():
    data = busy_controller().cognitive_report().to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert set(data) == {"affect", "focus", "self", "intentions", "achieved"}
    assert set(data["affect"]) == {"valence", "arousal", "confidence", "frustration"}
    row = data["self"]["mastery"][0]
    assert row["tool"] == "edit" and row["confidence_interval"] == [row["ci_low"], row["ci_high"]]
    assert data["achieved"] == 1


def test_render_shows_bars_focus_mastery_and_intentions():
    text = busy_controller().cognitive_report().render()
    for heading in ("Bhava", "Dhyana", "Atma-Darshana", "Sankalpa"):
        assert heading in text
    assert "Valence      " in text and "█" in text and "░" in text
    assert "Calibration:" in text and "Learning:" in text
    assert "read 75% [" in text
    assert "▶ fix the auth bug" in text and "[normal]" in text and "(stale: 4 turns)" in text
    assert "✓ 1 goal achieved this session" in text


def test_render_of_a_fresh_controller_says_there_is_nothing_yet():
    text = ChetanaController().cognitive_report().render()
    assert "(nothing yet)" in text and "(no open intentions)" in text


def test_the_report_can_be_read_like_a_dict_too():
    report = busy_controller().cognitive_report()
    assert report["affect"]["valence"] == report.affect.valence
    assert report["calibration"] == report.calibration
    assert report["achieved"] == 1
    try:
        report["nope"]
    except KeyError:
        pass
    else:  # pragma: no cover
        raise AssertionError("an unknown key must raise KeyError")

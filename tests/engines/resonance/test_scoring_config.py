"""scoring.json: the shipped defaults, validation with what/where, and hot reload."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from soul.engines.resonance import ConfigError
from soul.engines.resonance.resonate.scoring import Scorer, ScoringConfig, ScoringConfigError
from soul.engines.resonance.resonate.scoring_factors import FACTORS

LOGGER = "soul.engines.resonance.resonate.scoring"


def test_defaults_are_the_documented_constants() -> None:
    c = ScoringConfig.defaults()
    assert [f.name for f in c.factors] == list(FACTORS)
    assert len(c.factors) == 19 and all(f.enabled and f.weight == 1.0 for f in c.factors)
    assert dict(c.factor("Status").params["values"]) == {
        "verified": 1.15, "active": 1.0, "observed": 0.85, "proposed": 0.65}
    assert dict(c.factor("Epistemic").params["values"]) == {
        "user": 1.0, "tool": 0.95, "model": 0.85, "autonomous": 0.75}
    assert c.factor("ActR").params["decay"] == 0.5
    assert c.factor("Interference").params["per_competitor"] == 0.3
    assert c.factor("Spacing").params["floor"] == 0.85
    assert c.factor("Prediction").params["gain"] == 0.3


def test_the_defaults_file_ships_as_package_data() -> None:
    from importlib import resources

    text = resources.files("soul.engines.resonance.data").joinpath("scoring.json").read_text()
    assert ScoringConfig.from_json(text).to_dict() == ScoringConfig.defaults().to_dict()


def test_round_trip_and_partial_files_merge_over_the_defaults() -> None:
    c = ScoringConfig.defaults()
    assert ScoringConfig.from_json(c.to_json()).to_dict() == c.to_dict()
    partial = ScoringConfig.from_json(json.dumps({"factors": {
        "Kind": {"weight": 2.0, "params": {"values": {"episode": 0.9}}},
        "Arousal": {"enabled": False}}}))
    assert partial.factor("Kind").weight == 2.0
    assert dict(partial.factor("Kind").params["values"]) == {"episode": 0.9}
    assert partial.factor("Kind").params["other"] == 1.0
    assert not partial.factor("Arousal").enabled
    assert partial.factor("ActR") == c.factor("ActR")


def test_configs_are_read_only() -> None:
    params = ScoringConfig.defaults().factor("Status").params
    with pytest.raises(TypeError):
        params["values"]["verified"] = 9.0  # type: ignore[index]


@pytest.mark.parametrize(("doc", "where", "what"), [
    ('{"factors": {"Kind": {"weight": }}}', "line 1 column 33", "not valid JSON"),
    ("[1, 2]", "", "must be a JSON object"),
    ('{"factor": {}}', "factor", "did you mean 'factors'"),
    ('{"version": 2}', "version", "unsupported version 2"),
    ('{"combine": "sum"}', "combine", "weighted product"),
    ('{"factors": {"Relevence": {}}}', "factors.Relevence", "did you mean 'Relevance'"),
    ('{"factors": {"Kind": {"weight": -1}}}', "factors.Kind.weight", "in [0, 10]"),
    ('{"factors": {"Kind": {"weight": "2"}}}', "factors.Kind.weight", "in [0, 10]"),
    ('{"factors": {"Kind": {"enabled": "yes"}}}', "factors.Kind.enabled", "true or false"),
    ('{"factors": {"Kind": {"params": {"bogus": 1}}}}', "factors.Kind.params.bogus",
     "unknown parameter"),
    ('{"factors": {"ActR": {"params": {"decay": 1.5}}}}', "factors.ActR.params.decay",
     "must be in (0, 1), got 1.5"),
    ('{"factors": {"ActR": {"params": {"decay": "fast"}}}}', "factors.ActR.params.decay",
     "must be a number, got a string"),
    ('{"factors": {"ActR": {"params": {"width": 0}}}}', "factors.ActR.params.width", "> 0"),
    ('{"factors": {"Kind": {"params": {"values": {"feeling": 1.2}}}}}',
     "factors.Kind.params.values", "unknown kind 'feeling'"),
    ('{"factors": {"Kind": {"params": {"values": {"episode": -1}}}}}',
     "factors.Kind.params.values.episode", "must be >= 0"),
    ('{"factors": {"Status": {"params": {"default": "gold"}}}}',
     "factors.Status.params.default", "not a status in values"),
    ('{"factors": {"Tier": {"params": {"values": {"hot": 1}}}}}',
     "factors.Tier.params.values", "exactly the tiers"),
    ('{"factors": {"Relevance": {"params": {"scale": "log"}}}}',
     "factors.Relevance.params.scale", "'cosine' or 'unit'"),
    ('{"factors": {"FrustrationEscalation": {"params": {"kinds": ["anger"]}}}}',
     "factors.FrustrationEscalation.params.kinds", "unknown kind 'anger'"),
    ('{"factors": {"MoodCongruence": {"params": {"gain": 0.9}}}}',
     "factors.MoodCongruence.params.gain", "[0, 0.5]"),
    ('{"factors": {"ActR": {"params": {"offset": NaN}}}}', "factors.ActR.params.offset",
     "finite"),
])
def test_invalid_configs_say_what_and_where(doc: str, where: str, what: str) -> None:
    with pytest.raises(ScoringConfigError) as info:
        ScoringConfig.from_json(doc, source="my/scoring.json")
    err = info.value
    assert isinstance(err, ConfigError)
    assert err.source == "my/scoring.json" and err.where == where
    assert what in err.what and str(err).startswith("my/scoring.json: ")


def test_only_and_with_factor() -> None:
    c = ScoringConfig.defaults().only("Relevance", "Kind")
    assert [f.name for f in c.factors if f.enabled] == ["Relevance", "Kind"]
    with pytest.raises(ScoringConfigError, match="no factor 'Bogus'"):
        c.only("Bogus")
    with pytest.raises(ScoringConfigError, match="must be in"):
        c.with_factor("ActR", decay=2.0)


# -- hot reload ----------------------------------------------------------------------------

def write(path: Path, doc: dict | str, bump: int) -> None:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    # A distinct mtime per version, as two saves a second apart would have.
    os.utime(path, ns=(1_700_000_000_000_000_000 + bump, 1_700_000_000_000_000_000 + bump))


def test_no_path_means_the_defaults() -> None:
    assert Scorer().config.to_dict() == ScoringConfig.defaults().to_dict()


def test_hot_reload_picks_up_changes(tmp_path: Path) -> None:
    path = tmp_path / "scoring.json"
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    scorer = Scorer(path, check_every=0.0)
    assert scorer.config.factor("Kind").weight == 2.0
    assert scorer.config.source == str(path)
    write(path, {"factors": {"Kind": {"weight": 3.0}}}, 2)
    assert scorer.config.factor("Kind").weight == 3.0


def test_changes_are_checked_at_most_every_check_every(tmp_path: Path) -> None:
    path = tmp_path / "scoring.json"
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    scorer = Scorer(path, check_every=3600.0)
    write(path, {"factors": {"Kind": {"weight": 3.0}}}, 2)
    assert scorer.config.factor("Kind").weight == 2.0  # not re-checked yet
    assert scorer.reload().factor("Kind").weight == 3.0


def test_malformed_file_keeps_the_last_good_config_and_warns_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scoring.json"
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    scorer = Scorer(path, check_every=0.0)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    write(path, '{"factors": {"Kind": {"weight": 2.5,}}}', 2)
    assert scorer.config.factor("Kind").weight == 2.0
    assert scorer.config.factor("Kind").weight == 2.0
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1  # once per bad version, not per query
    assert "keeping the last good one" in warnings[0].getMessage()
    assert "not valid JSON" in warnings[0].getMessage() and "line 1" in warnings[0].getMessage()
    # An invalid (well-formed) version: warned about too, with what and where.
    write(path, {"factors": {"ActR": {"params": {"decay": 7}}}}, 3)
    assert scorer.config.factor("Kind").weight == 2.0
    assert "factors.ActR.params.decay" in caplog.records[-1].getMessage()
    # Fixed: loaded.
    write(path, {"factors": {"Kind": {"weight": 4.0}}}, 4)
    assert scorer.config.factor("Kind").weight == 4.0


def test_a_malformed_file_at_start_gives_the_defaults(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scoring.json"
    write(path, "{not json", 1)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    scorer = Scorer(path, check_every=0.0)
    assert scorer.config.to_dict() == ScoringConfig.defaults().to_dict()
    assert any("not valid JSON" in r.getMessage() for r in caplog.records)


def test_missing_file_means_defaults_and_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scoring.json"
    caplog.set_level(logging.WARNING, logger=LOGGER)
    scorer = Scorer(path, check_every=0.0)
    assert scorer.config.to_dict() == ScoringConfig.defaults().to_dict()
    assert scorer.config.to_dict() == ScoringConfig.defaults().to_dict()
    missing = [r for r in caplog.records if "is missing" in r.getMessage()]
    assert len(missing) == 1
    # It appears: loaded. It goes away again: defaults again, warned again.
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    assert scorer.config.factor("Kind").weight == 2.0
    path.unlink()
    assert scorer.config.factor("Kind").weight == 1.0
    assert len([r for r in caplog.records if "is missing" in r.getMessage()]) == 2


def test_an_atomic_replace_with_the_same_mtime_and_size_is_seen(tmp_path: Path) -> None:
    # Editors that save by rename give a new inode; mtime and size alone would miss it.
    path = tmp_path / "scoring.json"
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    scorer = Scorer(path, check_every=0.0)
    tmp = tmp_path / "scoring.json.tmp"
    write(tmp, {"factors": {"Kind": {"weight": 3.0}}}, 1)
    os.replace(tmp, path)
    assert scorer.config.factor("Kind").weight == 3.0


def test_an_optional_file_created_later_is_read_and_its_absence_is_quiet(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scoring.json"
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    scorer = Scorer(path, check_every=0.0, optional=True)
    assert scorer.config.to_dict() == ScoringConfig.defaults().to_dict()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no file yet is normal
    write(path, {"factors": {"Kind": {"weight": 2.0}}}, 1)
    assert scorer.config.factor("Kind").weight == 2.0
    path.unlink()  # once it existed, its going away is worth a warning
    assert scorer.config.factor("Kind").weight == 1.0
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING and "is missing" in r.getMessage()]) == 1


def test_a_fields_scoring_json_created_after_its_first_use_is_read(tmp_path: Path) -> None:
    from word_embedder import WordEmbedder

    from soul.engines.resonance import Field

    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        assert field.scorer.config.factor("Kind").weight == ScoringConfig.defaults().factor("Kind").weight
        write(tmp_path / "f" / "scoring.json", {"factors": {"Kind": {"weight": 2.5}}}, 1)
        assert field.scorer.reload().factor("Kind").weight == 2.5

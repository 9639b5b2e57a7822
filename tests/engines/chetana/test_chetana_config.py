"""ChetanaConfig and CognitivePriors: the seed's defaults, clamping at the system ceilings,
and clear typed errors for invalid values."""

import math

import pytest

from soul.engines.chetana import (
    ChetanaConfig,
    ChetanaError,
    CognitivePriors,
    ConfigError,
    ConfigTypeError,
)
from soul.engines.chetana.config import resolve_config, resolve_priors

SEED_DEFAULTS = {
    "enabled": True,
    "affect_decay_rate": 0.02,
    "attention_focus_window": 20,
    "self_model_persistence": True,
    "goal_abandonment_threshold": 15,
    "frustration_per_error": 0.15,
    "frustration_decay_per_success": 0.05,
    "frustration_per_correction": 0.25,
    "frustration_alert_threshold": 0.7,
    "confidence_autonomy_threshold": 0.8,
    "attention_recency_lambda": 0.1,
    "attention_error_boost": 0.3,
    "attention_correction_boost": 0.5,
    "calibration_window": 50,
    "max_limitations": 20,
    "max_intentions": 10,
    "max_evidence_per_intention": 20,
}


def test_defaults_are_the_seeds_with_snake_case_names():
    assert ChetanaConfig().to_dict() == SEED_DEFAULTS


@pytest.mark.parametrize(
    ("name", "value", "ceiling"),
    [
        ("attention_focus_window", 500, 200),
        ("calibration_window", 10_000, 500),
        ("max_limitations", 101, 100),
        ("max_intentions", 51, 50),
        ("max_evidence_per_intention", 1_000, 100),
    ],
)
def test_values_above_a_system_ceiling_are_clamped(name, value, ceiling):
    assert getattr(ChetanaConfig(**{name: value}), name) == ceiling


def test_values_at_or_below_the_ceiling_are_kept():
    config = ChetanaConfig(max_intentions=50, attention_focus_window=7)
    assert (config.max_intentions, config.attention_focus_window) == (50, 7)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("affect_decay_rate", -0.1),
        ("affect_decay_rate", 1.5),
        ("frustration_alert_threshold", 1.01),
        ("confidence_autonomy_threshold", -1),
        ("frustration_per_error", math.nan),
        ("attention_recency_lambda", math.inf),
        ("attention_error_boost", -0.3),
        ("attention_focus_window", 0),
        ("max_intentions", -5),
        ("goal_abandonment_threshold", 0),
    ],
)
def test_invalid_values_are_rejected_with_a_config_error_naming_the_field(name, value):
    with pytest.raises(ConfigError, match=name):
        ChetanaConfig(**{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("affect_decay_rate", "0.02"),
        ("attention_focus_window", 20.0),
        ("attention_focus_window", True),
        ("frustration_per_error", None),
        ("enabled", 1),
        ("self_model_persistence", "yes"),
    ],
)
def test_wrong_types_are_rejected_with_a_config_type_error(name, value):
    with pytest.raises(ConfigTypeError, match=name):
        ChetanaConfig(**{name: value})


def test_config_errors_are_value_errors_and_chetana_errors():
    with pytest.raises(ValueError):
        ChetanaConfig(affect_decay_rate=2.0)
    with pytest.raises(TypeError):
        ChetanaConfig(affect_decay_rate="fast")
    assert issubclass(ConfigTypeError, ConfigError)
    assert issubclass(ConfigError, ChetanaError)


def test_integers_are_accepted_for_float_fields_and_stored_as_floats():
    config = ChetanaConfig(affect_decay_rate=0, attention_recency_lambda=2)
    assert config.affect_decay_rate == 0.0 and isinstance(config.affect_decay_rate, float)
    assert config.attention_recency_lambda == 2.0


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        ChetanaConfig().max_intentions = 3  # type: ignore[misc]


def test_from_dict_fills_defaults_and_round_trips_through_to_dict():
    config = ChetanaConfig.from_dict({"frustration_per_error": 0.5})
    assert config.frustration_per_error == 0.5
    assert ChetanaConfig.from_dict(config.to_dict()) == config


def test_from_dict_rejects_unknown_keys_and_suggests_the_snake_case_name():
    with pytest.raises(ConfigError, match="did you mean 'frustration_per_error'"):
        ChetanaConfig.from_dict({"frustrationPerError": 0.5})
    with pytest.raises(ConfigError, match="its keys are: enabled"):
        ChetanaConfig.from_dict({"nonsense": 1})


def test_resolve_config_accepts_a_config_a_mapping_or_none():
    assert resolve_config(None) == ChetanaConfig()
    config = ChetanaConfig(max_intentions=3)
    assert resolve_config(config) is config
    assert resolve_config({"max_intentions": 3}) == config
    with pytest.raises(ConfigTypeError):
        resolve_config(42)  # type: ignore[arg-type]


def test_priors_defaults_reproduce_the_original_dynamics():
    priors = CognitivePriors()
    assert priors.base_arousal == 0.3
    assert priors.reactivity_gain == 1.0
    assert priors.patience(15) == 15
    assert priors.calibration_tolerance == pytest.approx(0.3)


def test_priors_map_each_knob_onto_its_subsystem():
    assert CognitivePriors(emotional_reactivity=1.0).reactivity_gain == 1.5
    assert CognitivePriors(emotional_reactivity=0.0).reactivity_gain == 0.5
    assert CognitivePriors(goal_orientedness=1.0).patience(15) == 22  # round(22.5) is even
    assert CognitivePriors(goal_orientedness=0.0).patience(15) == 8
    assert CognitivePriors(goal_orientedness=0.0).patience(1) == 1  # never below one turn
    assert CognitivePriors(self_awareness=1.0).calibration_tolerance == pytest.approx(0.15)
    assert CognitivePriors(self_awareness=0.0).calibration_tolerance == pytest.approx(0.45)


@pytest.mark.parametrize("value", [-0.1, 1.1, math.nan])
def test_priors_outside_unit_interval_are_rejected(value):
    with pytest.raises(ConfigError, match="base_arousal"):
        CognitivePriors(base_arousal=value)


def test_priors_from_a_mapping_and_unknown_keys():
    assert resolve_priors({"base_arousal": 0.5}).base_arousal == 0.5
    assert resolve_priors(None) == CognitivePriors()
    with pytest.raises(ConfigError, match="did you mean 'base_arousal'"):
        CognitivePriors.from_dict({"baseArousal": 0.5})
    with pytest.raises(ConfigTypeError):
        CognitivePriors(self_awareness="high")  # type: ignore[arg-type]

"""The constructor the four subsystems and the controller share (`subsystem.py`): config and
priors given as objects, mappings or None resolve the same way everywhere, a bad one is
refused before any state exists, and the callback reaches every part."""

import pytest

from soul.engines.chetana import (
    AtmaDarshana,
    Bhava,
    ChetanaConfig,
    ChetanaController,
    CognitivePriors,
    ConfigError,
    ConfigTypeError,
    Dhyana,
    Sankalpa,
)

PARTS = (Bhava, Dhyana, AtmaDarshana, Sankalpa, ChetanaController)


@pytest.mark.parametrize("cls", PARTS, ids=lambda c: c.__name__)
def test_every_part_resolves_config_and_priors_from_a_mapping(cls):
    part = cls({"frustration_per_error": 0.5}, None, {"base_arousal": 0.5})
    assert part.config == ChetanaConfig(frustration_per_error=0.5)
    assert part.priors == CognitivePriors(base_arousal=0.5)
    assert part.on_event is None


@pytest.mark.parametrize("cls", PARTS, ids=lambda c: c.__name__)
def test_every_part_defaults_config_and_priors(cls):
    part = cls()
    assert part.config == ChetanaConfig()
    assert part.priors == CognitivePriors()


@pytest.mark.parametrize("cls", PARTS, ids=lambda c: c.__name__)
def test_every_part_refuses_a_bad_config_or_priors(cls):
    with pytest.raises(ConfigTypeError, match="config must be"):
        cls("strict")
    with pytest.raises(ConfigError, match="CognitivePriors has no key"):
        cls(None, None, {"no_such_prior": 1.0})


@pytest.mark.parametrize("cls", PARTS, ids=lambda c: c.__name__)
def test_every_part_keeps_its_callback(cls):
    def callback(name, data):
        return None

    assert cls(None, callback).on_event is callback


def test_the_controller_hands_its_callback_to_all_four_subsystems():
    def callback(name, data):
        return None

    chetana = ChetanaController(on_event=callback)
    parts = (chetana.bhava, chetana.dhyana, chetana.atma, chetana.sankalpa)
    assert [p.on_event for p in parts] == [callback] * 4
    assert all(p.config is chetana.config for p in parts)
    assert all(p.priors is chetana.priors for p in parts if not isinstance(p, Dhyana))

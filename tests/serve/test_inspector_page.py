"""The page's inspector in a real Chromium (issue 27, items 4-7): click an earlier turn and see
its context window (parts whose tokens add up to the call's input), its trace and the layers
as they were; the user model's versions, a diff and a revert; working memory by region; a
background cycle inspected the same way; fork and rewind; model text shown as text only.
Screenshots go to a temp folder, or to $SOUL_SCREENSHOTS (`SOUL_SCREENSHOTS=docs/img`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import Server, claudius_reply, conscious, csd_folder, cycle, screenshot, write_script

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the dev extra)")
expect = sync_api.expect
Page = Any

pytestmark = pytest.mark.slow  # a server and a browser each: a few seconds a test
Serve = Callable[..., Server]
XSS = "<img src=x onerror=alert(1)>"


def panel(page: Page, name: str) -> Any:
    return page.locator(f'[data-panel="{name}"]')


def role(page: Page, name: str) -> Any:
    return page.locator(f'[data-role="{name}"]')


def open_page(page: Page, url: str) -> list[str]:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(url)
    expect(role(page, "connection")).to_have_text("live")
    return dialogs


def say(page: Page, text: str, reply: str) -> None:
    box = role(page, "send")
    box.fill(text)
    box.press("Enter")
    expect(panel(page, "chat")).to_contain_text(reply)


def updating(text: str, model: str, thought: str = "noted") -> str:
    """A claudius reply that updates the user model."""
    return claudius_reply(text, thought).replace(
        "<user_model_check>false</user_model_check>",
        f"<user_model_check>true</user_model_check><user_model_update>{model}</user_model_update>"
        "<model_change_note>learnt something</model_change_note>")


SCRIPT = [
    claudius_reply("Hello, Ada."),
    updating("Compilers, then.", "## Ada\nbuilds compilers"),
    updating("A slow parser.", f"## Ada\nbuilds compilers\nher parser is slow {XSS}"),
    claudius_reply("Shall we look at it?"),
    claudius_reply("From the fork: a fresh start."),
]


def four_turns(page: Page) -> None:
    for text, reply in (("hi", "Hello, Ada."), ("I build compilers", "Compilers, then."),
                        ("my parser is slow", "A slow parser."), ("yes please", "Shall we look at it?")):
        say(page, text, reply)
    expect(role(page, "inspect-what")).to_contain_text("turn 4, the latest")


def sections_add_up(page: Page) -> tuple[int, int]:
    call = role(page, "window-call").first
    tokens = [int(t) for t in call.locator('[data-role="window-section"] [data-role="tokens"]').all_inner_texts()]
    total = int(call.locator('[data-role="window-total"] [data-role="tokens"]').inner_text())
    assert tokens and sum(tokens) == total > 0, (tokens, total)
    return sum(tokens), total


def test_an_earlier_turns_context_window_trace_and_layers(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    server = serve("claudius", "--script", str(write_script(tmp_path, SCRIPT)))
    dialogs = open_page(page, server.url)
    four_turns(page)
    sections_add_up(page)  # live: the latest turn's window
    panel(page, "chat").locator('.msg.user[data-turn="2"]').click()
    expect(role(page, "inspect-what")).to_contain_text("turn 2 (message), as it was")
    expect(role(page, "layers-when")).to_have_text("as they were after turn 2")
    window = panel(page, "window")
    expect(window.locator('[data-role="window-section"][data-part="persona"]')).to_have_count(1)
    history = window.locator('[data-role="window-section"][data-part="history"]')
    expect(history).to_have_count(2)  # turn 1 only: what turn 2's call saw
    expect(history.first).to_contain_text("turn 1 · user")
    _, total = sections_add_up(page)
    sid = role(page, "session-id").inner_text()
    stored = httpx.get(f"{server.url}/api/sessions/{sid}/turns/2/trace").json()
    assert total == stored["calls"][0]["input_tokens"]
    expect(panel(page, "trace")).to_contain_text("turn 2 (message)")
    expect(panel(page, "trace")).to_contain_text("cost unknown")
    # reading a part: the text the model saw, as text
    window.locator('[data-role="window-section"][data-part="message"]').click()
    expect(window.locator('[data-role="window-text"]')).to_contain_text("I build compilers")
    # the layers as they were after turn 2: the user model's first version
    expect(role(page, "user-model-text")).to_have_text("## Ada\nbuilds compilers")
    expect(role(page, "user-model-version")).to_have_text("v1")
    expect(role(page, "working-memory")).to_contain_text("I build compilers")
    expect(role(page, "working-memory")).not_to_contain_text("my parser is slow")
    # back to live: the latest turn and the layers now
    role(page, "live").click()
    expect(role(page, "layers-when")).to_have_text("now (after turn 4)")
    expect(panel(page, "trace")).to_contain_text("turn 4 (message)")
    expect(role(page, "user-model-text")).to_contain_text(XSS)  # shown literally
    assert page.locator("img[src=x]").count() == 0 and dialogs == []
    screenshot(page, shots, "inspector")


def test_the_user_model_diff_and_revert(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    server = serve("claudius", "--script", str(write_script(tmp_path, SCRIPT)))
    dialogs = open_page(page, server.url)
    four_turns(page)
    layers = panel(page, "layers")
    expect(layers.locator('[data-role="user-model-versions"] li')).to_have_count(2)
    role(page, "diff-from").select_option("1")
    role(page, "diff-to").select_option("2")
    role(page, "diff").click()
    diff = role(page, "user-model-diff")
    expect(diff.locator(".add")).to_have_text([f"+her parser is slow {XSS}"])
    expect(diff.locator(".head")).to_have_text(["--- v1", "+++ v2"])
    assert page.locator("img[src=x]").count() == 0 and dialogs == []
    layers.locator('[data-role="user-model-versions"] li[data-version="1"] [data-role="revert"]').click()
    expect(role(page, "fork-note")).to_contain_text("the user model is now v3, a copy of v1")
    expect(role(page, "user-model-text")).to_have_text("## Ada\nbuilds compilers")
    expect(layers.locator('[data-role="user-model-versions"] li')).to_have_count(3)
    screenshot(page, shots, "inspector-user-model")


def test_fork_at_turn_2_and_rewind(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    server = serve("claudius", "--script", str(write_script(tmp_path, SCRIPT)))
    open_page(page, server.url)
    four_turns(page)
    original = role(page, "session-id").inner_text()
    panel(page, "chat").locator('.msg.soul[data-turn="2"]').click()
    role(page, "fork").click()
    expect(role(page, "fork-note")).to_contain_text("forked after turn 2")
    assert role(page, "session-id").inner_text() == original  # fork: this page stays on the original
    sessions = httpx.get(f"{server.url}/api/sessions").json()
    fork = next(s for s in sessions if s["forked_from"] == original)
    assert fork["turns"] == 2 and fork["forked_at"] == 2
    texts = [m["content"] for m in httpx.get(f"{server.url}/api/sessions/{fork['id']}").json()["messages"] if m["layer"] == "external"]
    assert texts == ["hi", "Hello, Ada.", "I build compilers", "Compilers, then."]
    # rewind: a fork that becomes the page's session
    panel(page, "chat").locator('.msg.user[data-turn="2"]').click()
    role(page, "rewind").click()
    expect(role(page, "session-id")).not_to_have_text(original)
    expect(role(page, "fork-note")).to_contain_text("rewound to turn 2")
    chat = panel(page, "chat")
    expect(chat).to_contain_text("Compilers, then.")
    expect(chat).not_to_contain_text("A slow parser.")
    say(page, "let us try again", "From the fork: a fresh start.")
    expect(role(page, "inspect-what")).to_contain_text("turn 3, the latest")
    expect(role(page, "user-model-text")).to_have_text("## Ada\nbuilds compilers")  # as after turn 2
    got = httpx.get(f"{server.url}/api/sessions/{original}").json()
    assert got["session"]["turns"] == 4  # the original is untouched
    screenshot(page, shots, "inspector-rewind")


def test_a_background_cycle_is_inspectable_like_a_turn(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    blueprint = csd_folder(tmp_path / "csd", loop="after_turn")
    script = {"conscious": [conscious("Hello there.", "quiet one")],
              "subconscious": [cycle("curious", "ask about the trip", f"S_quiet {XSS}")]}
    server = serve(str(blueprint), "--script", str(write_script(tmp_path, script)), "--cycles", "1")
    dialogs = open_page(page, server.url)
    say(page, "back from a trip", "Hello there.")
    cycle_item = panel(page, "turns").locator('[data-role="commit"][data-kind="cycle"]')
    expect(cycle_item).to_have_count(1)
    expect(role(page, "layers-mood")).to_contain_text("curious")  # live: the mood the cycle set
    cycle_item.click()
    expect(role(page, "inspect-what")).to_contain_text("cycle 1 of subconscious")
    window = panel(page, "window")
    expect(window.locator('[data-role="window-section"][data-part="persona"]')).to_have_count(1)
    expect(window.locator('[data-role="window-section"][data-part="message"]')).to_contain_text("cycle")
    sections_add_up(page)
    expect(panel(page, "trace")).to_contain_text("cycle:subconscious")
    assert page.locator("img[src=x]").count() == 0 and dialogs == []
    screenshot(page, shots, "inspector-cycle")


def test_a_spontaneous_turn_is_inspectable_from_the_chat(serve: Serve, tmp_path: Path, page: Page) -> None:
    script = {"conscious": [conscious("By the way, how was the trip?", "quiet")],
              "subconscious": [cycle("curious", "ask about the trip", "still", loud="ask about the trip", trigger=True)]}
    server = serve("csd", "--script", str(write_script(tmp_path, script)), "--cycles", "1")
    open_page(page, server.url)
    spoken = panel(page, "chat").locator('.msg[data-spontaneous="true"]')
    expect(spoken).to_contain_text("By the way, how was the trip?")
    expect(spoken).to_have_attribute("data-turn", "1")
    spoken.click()
    expect(role(page, "inspect-what")).to_contain_text("turn 1 (spontaneous), as it was")
    window = panel(page, "window")
    expect(window.locator('[data-role="window-section"][data-part="impulses"]')).to_have_count(1)
    expect(window.locator('[data-role="window-section"][data-part="message"]')).to_contain_text("spontaneous")
    sections_add_up(page)

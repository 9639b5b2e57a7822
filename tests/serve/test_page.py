"""The page of `soul serve` in a real Chromium: the streamed reply, thoughts kept out of the
chat, a spontaneous message, pause/resume, resuming after a restart, hostile strings shown
literally, two tabs in sync, and a token-guarded server. Screenshots go to a temp folder, or
to $SOUL_SCREENSHOTS (`SOUL_SCREENSHOTS=docs/img` refreshes the docs' pictures)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from serving import Server, claudius_reply, conscious, csd_folder, cycle, screenshot, write_script

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the dev extra)")
expect = sync_api.expect
Page = Any

pytestmark = pytest.mark.slow  # a server and a browser each: a few seconds a test
Serve = Callable[..., Server]
XSS = ("<img src=x onerror=alert(1)>", "<script>alert(1)</script>")


def panel(page: Page, name: str) -> Any:
    return page.locator(f'[data-panel="{name}"]')


def open_page(page: Page, url: str) -> list[str]:
    """Open the page and wait for its socket; returns the list every dialog is recorded in."""
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_viewport_size({"width": 1400, "height": 950})
    page.goto(url)
    expect(page.locator('[data-role="connection"]')).to_have_text("live")
    return dialogs


def say(page: Page, text: str) -> None:
    box = page.locator('[data-role="send"]')
    box.fill(text)
    box.press("Enter")


def test_a_sent_message_streams_its_reply_token_by_token(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    reply = "Compilers, then — a noble way to suffer, one pass at a time."
    server = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply(reply)])))
    open_page(page, server.url)
    # every text the streaming bubble shows, recorded as it changes
    page.evaluate("""() => { window.seen = [];
        new MutationObserver(() => { const n = document.querySelector('.msg.soul .text');
            if (n) window.seen.push(n.textContent); })
        .observe(document.querySelector('[data-role="chat-log"]'), {subtree: true, childList: true, characterData: true}); }""")
    say(page, "I build compilers.")
    chat = panel(page, "chat")
    expect(chat).to_contain_text(reply)
    expect(chat).to_contain_text("I build compilers.")
    seen = page.evaluate("window.seen")
    partial = [t for t in seen if t and len(t) < len(reply)]
    assert partial and all(reply.startswith(t) for t in partial), seen  # it grew piece by piece
    expect(panel(page, "trace")).to_contain_text("1 call(s)")
    screenshot(page, shots, "claudius")


def test_thoughts_show_in_the_internal_panel_and_never_in_the_chat(serve: Serve, tmp_path: Path, page: Page) -> None:
    thought = "A private thought about precision."
    server = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply("Hello there.", thought)])))
    open_page(page, server.url)
    say(page, "hi")
    expect(panel(page, "chat")).to_contain_text("Hello there.")
    expect(panel(page, "internal")).to_contain_text(thought)
    expect(panel(page, "internal")).to_contain_text("pondered")
    assert thought not in panel(page, "chat").inner_text()


def test_a_spontaneous_message_appears_without_typing(serve: Serve, tmp_path: Path, page: Page, shots: Path) -> None:
    script = {
        "conscious": [conscious("By the way, how was the trip?", "ID_quiet marker")],
        "subconscious": [cycle("curious", "ask about the trip", "S_quiet marker", loud="ask about the trip", trigger=True)],
    }
    server = serve("csd", "--script", str(write_script(tmp_path, script)), "--cycles", "1")
    open_page(page, server.url)
    chat = panel(page, "chat")
    spoken = chat.locator('[data-spontaneous="true"]')
    expect(spoken).to_contain_text("By the way, how was the trip?")
    expect(spoken).to_contain_text("unprompted")
    sub = panel(page, "subconscious")
    expect(sub).to_contain_text("S_quiet marker")
    expect(sub).to_contain_text("ask about the trip")
    expect(page.locator('[data-role="mood"]')).to_have_text("curious")
    expect(panel(page, "internal")).to_contain_text("ID_quiet marker")
    assert "marker" not in chat.inner_text()  # ID_quiet and S_quiet stay out of the chat
    screenshot(page, shots, "csd")


def test_pause_and_resume_steer_the_subconscious(serve: Serve, tmp_path: Path, page: Page) -> None:
    blueprint = csd_folder(tmp_path / "csd", loop="interval", interval_seconds=600)
    script = {"conscious": [], "subconscious": [cycle("calm", "be brief", "first cycle")]}
    server = serve(str(blueprint), "--script", str(write_script(tmp_path, script)))
    open_page(page, server.url)
    status = page.locator('[data-role="loop-status"]')
    expect(panel(page, "subconscious")).to_contain_text("first cycle")
    expect(status).to_contain_text("running")
    expect(status).to_contain_text("cycle 1")  # the finished cycle's number, not the start's 0
    page.locator('[data-role="pause"]').click()
    expect(status).to_contain_text("paused")
    page.locator('[data-role="resume"]').click()
    expect(status).to_contain_text("running")


def test_a_session_resumes_after_the_server_restarts(serve: Serve, tmp_path: Path, page: Page, context: Any) -> None:
    home = tmp_path / "home"
    first = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply("Remember the parser.")], "one.json")), home=home)
    open_page(page, first.url)
    say(page, "my parser is slow")
    expect(panel(page, "chat")).to_contain_text("Remember the parser.")
    session = page.locator('[data-role="session-id"]').inner_text()
    assert first.stop() == 0

    second = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply("Still the parser?")], "two.json")), home=home)
    fresh = context.new_page()
    open_page(fresh, second.url)
    fresh.locator('[data-role="new-session"]').click()  # elsewhere first, then back through the list
    expect(fresh.locator('[data-role="session-id"]')).not_to_have_text(session)
    fresh.locator(f'[data-session="{session}"] [data-role="resume-session"]').click()
    expect(fresh.locator('[data-role="session-id"]')).to_have_text(session)
    chat = panel(fresh, "chat")
    expect(chat).to_contain_text("Remember the parser.")  # the stored conversation
    say(fresh, "yes")
    expect(chat).to_contain_text("Still the parser?")
    expect(panel(fresh, "sessions").locator(f'[data-session="{session}"]')).to_contain_text("2 turn(s)")


def test_hostile_strings_show_literally_and_open_no_dialog(serve: Serve, tmp_path: Path, page: Page) -> None:
    replies = [claudius_reply(f"You said {x} — how quaint.", thought=f"They typed {x}") for x in XSS]
    server = serve("claudius", "--script", str(write_script(tmp_path, replies)))
    dialogs = open_page(page, server.url)
    chat = panel(page, "chat")
    for x in XSS:
        say(page, x)
        expect(chat).to_contain_text(f"You said {x} — how quaint.")
    text = chat.inner_text()
    assert all(text.count(x) == 2 for x in XSS)  # the user's message and the reply, as text
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    expect(panel(page, "internal")).to_contain_text(f"They typed {XSS[1]}")
    page.wait_for_timeout(300)  # an onerror would have fired by now
    assert dialogs == []


def test_two_tabs_on_one_session_see_the_same_events(serve: Serve, tmp_path: Path, page: Page, context: Any) -> None:
    server = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply("Seen by both.")])))
    open_page(page, server.url)
    session = page.locator('[data-role="session-id"]').inner_text()
    other = context.new_page()
    open_page(other, f"{server.url}/#session={session}")
    say(page, "from the first tab")
    for tab in (page, other):
        expect(panel(tab, "chat")).to_contain_text("from the first tab")
        expect(panel(tab, "chat")).to_contain_text("Seen by both.")
        expect(panel(tab, "internal")).to_contain_text("precision")


def test_with_a_token_the_page_works_and_the_api_refuses_without_it(serve: Serve, tmp_path: Path, page: Page) -> None:
    import httpx

    token = "a-long-random-token-for-the-test"
    server = serve("claudius", "--script", str(write_script(tmp_path, [claudius_reply("Token accepted.")])),
                   env={"SOUL_SERVE_TOKEN": token})
    assert httpx.get(server.url + "/api/sessions").status_code == 401
    assert httpx.get(server.url + "/api/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    open_page(page, f"{server.url}/?token={token}")
    assert "token" not in page.url  # kept in sessionStorage, out of the address bar
    say(page, "hi")
    expect(panel(page, "chat")).to_contain_text("Token accepted.")


def test_the_panels_keep_their_height_and_scroll_as_cycles_come(serve: Serve, tmp_path: Path, page: Page) -> None:
    # the page grew taller with every cycle: each panel's log and list must scroll instead
    long = "a long quiet thought that wraps over several lines of the panel " * 6
    cycles = 24
    script = {
        "conscious": [conscious(f"Reply {i}: " + "words " * 40, f"private {i} " + long) for i in range(12)],
        "subconscious": [cycle(f"mood {i} " + "calm and " * 8, f"criteria {i} " + "be brief and kind " * 10,
                               f"S_quiet {i} " + long, loud=f"impulse {i}" if i % 3 == 0 else "")
                         for i in range(cycles)],
    }
    blueprint = csd_folder(tmp_path / "csd", loop="interval", interval_seconds=0.15)  # 24 cycles: ~4 s
    server = serve(str(blueprint), "--script", str(write_script(tmp_path, script)), "--cycles", str(cycles))
    open_page(page, server.url)  # measured at once, with (almost) nothing in the panels yet
    status = page.locator('[data-role="loop-status"]')
    heights = ("() => Object.fromEntries([['page', document.documentElement.scrollHeight],"
               " ...[...document.querySelectorAll('[data-panel]')].map(p => [p.dataset.panel, p.offsetHeight])])")
    early = page.evaluate(heights)
    for i in range(3):
        say(page, f"message {i} " + "text " * 30)
        expect(panel(page, "chat")).to_contain_text(f"message {i}")
    expect(status).to_contain_text(f"cycle {cycles}", timeout=60_000)
    late = page.evaluate(heights)
    assert late == early  # the page and every panel: not a pixel taller
    for role in ("chat-log", "internal-log", "subconscious-log"):
        log = page.locator(f'[data-role="{role}"]')
        assert log.evaluate("n => n.scrollHeight > n.clientHeight"), role  # it holds more than it shows: it scrolls

"""The dialogue panel of `soul serve entelgia` in a real Chromium: a scripted dialogue run from
the page's controls shows the agents' turns as they come, Fixy's intervention with its reason,
the signals drawn on the canvas, and a hostile line literally. Saves serve-entelgia.png in a temp
folder, or in $SOUL_SCREENSHOTS (`SOUL_SCREENSHOTS=docs/img` refreshes the docs' picture)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import Server, screenshot, write_script
from test_dialogue_api import HOSTILE, SCRIPT

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the dev extra)")
expect = sync_api.expect

pytestmark = pytest.mark.slow  # a server and a browser: a few seconds
Serve = Callable[..., Server]


def test_the_dialogue_panel_runs_a_scripted_entelgia_dialogue_live(serve: Serve, tmp_path: Path, page: Any,
                                                                   shots: Path) -> None:
    server = serve("entelgia", "--script", str(write_script(tmp_path, SCRIPT)))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url)
    panel = page.locator('[data-panel="dialogue"]')
    expect(page.locator('[data-role="dialogue-controls"]')).to_be_visible()
    expect(panel.locator('[data-role="dialogue-status"]')).to_contain_text("New dialogue starts one")

    panel.locator('[data-role="new-dialogue"]').click()
    expect(panel.locator('[data-role="dialogue-status"]')).to_have_text("0 turn(s) so far")
    panel.locator('[data-role="step-dialogue"]').click()  # one turn
    expect(panel.locator('[data-speaker="socrates"]')).to_contain_text(SCRIPT["socrates"][0])
    expect(panel.locator('[data-role="dialogue-status"]')).to_have_text("done · 1 turn(s) so far")
    panel.locator('[data-role="dialogue-turns"]').fill("5")
    panel.locator('[data-role="run-dialogue"]').click()
    expect(panel.locator('[data-role="dialogue-status"]')).to_have_text("done · 6 turn(s) so far")

    log = panel.locator('[data-role="dialogue-log"]')
    for line in (*SCRIPT["athena"][:3], SCRIPT["fixy"][0]):
        expect(log).to_contain_text(line)
    expect(panel.locator('[data-speaker="socrates"]').nth(1)).to_contain_text(HOSTILE)  # literally, as text
    expect(panel.locator('[data-speaker="athena"]').nth(1)).to_contain_text("fear 0.")  # the line's emotion
    assert log.locator("img, script").count() == 0 and dialogs == []
    # Fixy's intervention, with the reason the server reported
    did = page.locator('[data-role="dialogue-list"]').input_value()
    [fixy] = httpx.get(f"{server.url}/api/dialogues/{did}").json()["result"]["interventions"]
    reason = panel.locator("[data-reason]")
    expect(reason).to_have_attribute("data-reason", fixy["reason"])
    expect(reason).to_contain_text(f"#5 Fixy stepped in: {fixy['reason']}")
    # the signals are drawn: the canvas holds painted pixels
    canvas = panel.locator('[data-role="metrics"]')
    expect(canvas).to_be_visible()
    painted = page.evaluate("""() => { const c = document.querySelector('[data-role="metrics"]');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")
    assert painted > 500

    panel.scroll_into_view_if_needed()
    screenshot(page, shots, "entelgia")

    # a reload replays the dialogue from the server: same turns, same reason, the chart again
    page.reload()
    expect(panel.locator('[data-role="dialogue-status"]')).to_have_text("6 turn(s) so far")
    expect(panel.locator("[data-speaker]")).to_have_count(6)
    expect(panel.locator("[data-reason]")).to_have_attribute("data-reason", fixy["reason"])

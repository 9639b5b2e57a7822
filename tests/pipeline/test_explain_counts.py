"""`soul explain`'s token counts agree with each other: each message's count, the call's
total, and what the budget says the prompt takes (the same tokens, and the chat template's
markers, said so) — it once showed 503 prompt tokens beside "521 used"."""

from __future__ import annotations

import re

import pytest

from soul.cli.main import main
from soul.runtime.conversation import MESSAGE_OVERHEAD


@pytest.mark.parametrize("name", ["claudius", "csd", "samantha"])
def test_every_count_of_a_call_adds_up(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", name, "-m", "Hello, I'm Ada."]) == 0
    out = capsys.readouterr().out
    calls = out.split("═══ call ")[1:]
    assert calls
    total = 0
    for call in calls:
        each = [int(n) for n in re.findall(r"^─── (?:system|user|assistant) · (\d+) tokens$", call, re.MULTILINE)]
        (into,) = re.findall(r"^─── (\d+) tokens in$", call, re.MULTILINE)
        (takes, above) = re.findall(r"; it takes (\d+) \(the (\d+) above and 8 a message for the chat template's markers\)", call)[0]
        assert int(into) == sum(each) == int(above)
        assert int(takes) == sum(each) + MESSAGE_OVERHEAD * len(each)
        total += int(into)
    assert f"{len(calls)} model call{'s' * (len(calls) != 1)}, {total} prompt tokens in all" in out

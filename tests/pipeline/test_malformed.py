"""Malformed blueprints of every shape give one clear line each, at the right place."""

from __future__ import annotations

from collections.abc import Callable

import pytest

Check = Callable[..., list[str]]

CASES = [
    ("- a\n- b\n", ["soul.yaml:1:1: error: expected object, got a list"]),
    ("# only a comment\n", ["soul.yaml:1:1: error: the blueprint is empty"]),
    ("soul: t\nversion: 1\nsteps: [a, b]\n", ["soul.yaml:3:8: error: steps: expected object, got a list"]),
    ("soul: t\nversion: 2\nsteps:\n  a: {uses: external_dialogue}\n", ["soul.yaml:2:10: error: version: must be 1, got 2"]),
    (
        "soul: t\nversion: 1\nsteps:\n  a: {uses: external_dialogue, when: true, every: 0, retry: -1}\n",
        [
            "soul.yaml:4:38: error: steps.a.when: expected string, got a boolean",
            "soul.yaml:4:51: error: steps.a.every: 0 is less than the minimum of 1",
            "soul.yaml:4:61: error: steps.a.retry: -1 is less than the minimum of 0",
        ],
    ),
    ("soul: t\nversion: 1\nsteps:\n  a:\n", ["soul.yaml:4:5: error: steps.a: expected object, got null"]),
    (
        "soul: t\nversion: 1\nsteps:\n  a: {uses: decision, with: {question: q, options: [x]}}\n",
        ["soul.yaml:4:52: error: steps.a.with.options: needs at least 2 items, got 1"],
    ),
    (
        "soul: t\nversion: 1\nsteps:\n  a: {uses: external_dialogue}\n  b: {uses: internal_monologue, after: [a, a]}\n",
        ["soul.yaml:5:40: error: steps.b.after: lists a more than once"],
    ),
    ('soul: "t\nversion: 1\n', ["soul.yaml:1:7: error: invalid YAML: found unexpected end of stream (while scanning a quoted scalar)"]),
    (
        "soul: t\nversion: 1\nsteps:\n  a: {uses: external_dialogue, when: steps.a.text}\n",
        ["soul.yaml:4:38: error: step 'a' reads its own output steps.a (a gate is decided before its step runs; read an upstream step)"],
    ),
    ("soul: t\nversion: 1\nsteps: {}\n", ["soul.yaml:3:1: error: steps: needs at least one step"]),
    (
        "soul: t\nversion: 1\nsteps:\n  a: {uses: external_dialogue}\ntriggers:\n  x: {kind: idle}\n",
        ["soul.yaml:6:3: error: trigger 'x' of kind idle needs `idle_seconds`"],
    ),
    ("\ufeffsoul: t\nversion: 1\nsteps:\n  a: {uses: external_dialogue}\n", []),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_malformed_blueprint(check: Check, text: str, expected: list[str]) -> None:
    assert check(text) == expected

"""Templates stay inside the blueprint's folder and inside their bounds (issue 12, items 3 and 13).

Real symlinks in tmp_path: an include that escapes (to a file, to a folder, by `../`, by an
absolute path) is refused at validate time at the step's `template:` position and at run
time as a StepError; a symlink inside pointing inside stays allowed. Recursive includes,
sandbox refusals and oversized files are diagnostics or StepErrors, never tracebacks; `"x" *
10**9` allocates nothing, at validate or run time.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import soul
from soul.errors import BlueprintError, StepError
from soul.language import environment
from soul.providers.scripted import ScriptedProvider

Check = Callable[..., list[str]]
HEAD = "soul: t\nversion: 1\n"
WITH_TEMPLATE = HEAD + "steps:\n  reply: {uses: external_dialogue, template: reply.j2}\n"
AT = "soul.yaml:4:46: error: "  # where `template: reply.j2` is written
SECRET = "API_KEY=sk-not-for-prompts"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the blueprint's (tmp_path/bp) holding a secret."""
    out = tmp_path.parent / f"{tmp_path.name}-outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    return out


def test_include_of_a_symlink_to_a_file_outside_is_refused(check: Check, tmp_path: Path, outside: Path) -> None:
    (tmp_path / "link.txt").symlink_to(outside / "secret.txt")
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'link.txt' %}"})
    assert line.startswith(AT + "'reply.j2' line 1 includes 'link.txt', which is refused: it resolves to ")
    assert "outside the blueprint's folder" in line and SECRET not in line


def test_include_through_a_symlinked_folder_outside_is_refused(check: Check, tmp_path: Path, outside: Path) -> None:
    (tmp_path / "parts").symlink_to(outside, target_is_directory=True)
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "Hi\n{% include 'parts/secret.txt' %}"})
    assert line.startswith(AT + "'reply.j2' line 2 includes 'parts/secret.txt', which is refused: it resolves to ")


def test_include_by_dotdot_and_absolute_paths_is_refused(check: Check, outside: Path) -> None:
    dotdot = f"../{outside.name}/secret.txt"
    out = check(WITH_TEMPLATE, **{"reply.j2": f"{{% include '{dotdot}' %}}{{% include '/etc/passwd' %}}"})
    assert len(out) == 2
    assert any(f"includes '{dotdot}', which is refused: it resolves to" in line for line in out)
    assert any("includes '/etc/passwd', which is refused: an absolute path" in line for line in out)


def test_a_symlink_inside_pointing_inside_is_allowed(check: Check, tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "tone.txt").write_text("Be kind.")
    (tmp_path / "tone.txt").symlink_to(tmp_path / "parts" / "tone.txt")
    assert check(WITH_TEMPLATE, **{"reply.j2": "{% include 'tone.txt' %}\n{% include 'missing.txt' ignore missing %}"}) == []


def test_a_template_that_is_itself_a_symlink_outside_is_refused(check: Check, tmp_path: Path, outside: Path) -> None:
    (tmp_path / "reply.j2").symlink_to(outside / "secret.txt")
    (line,) = check(WITH_TEMPLATE)
    assert line == AT + "template 'reply.j2' is outside the blueprint's folder (keep templates and personas beside the blueprint)"


def test_recursive_includes_are_reported(check: Check) -> None:
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'reply.j2' %}"})
    assert line == AT + "'reply.j2' line 1 includes 'reply.j2': an include cycle (reply.j2 → reply.j2) that never ends (remove one of the includes)"
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'a.j2' %}", "a.j2": "x\n{% include 'b.j2' %}", "b.j2": "{% include 'a.j2' %}"})
    assert line.startswith(AT + "'b.j2' line 1 includes 'a.j2': an include cycle (a.j2 → b.j2 → a.j2)")


def test_a_missing_include_is_reported(check: Check) -> None:
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'tone.txt' %}"})
    assert line.startswith(AT + "'reply.j2' line 1 includes 'tone.txt', which is not found")


def test_a_python_internal_is_reported_where_it_is_read(check: Check) -> None:
    out = check(WITH_TEMPLATE, **{"reply.j2": "Hi\n{{ input.__class__.__mro__ }}"})
    assert out[0].startswith("reply.j2:2:10: error: reads '__class__', a Python internal the sandbox refuses")
    when = HEAD + "steps:\n  reply: {uses: external_dialogue, when: turn.__class__}\n"
    assert check(when)[0].startswith("soul.yaml:4:42: error: reads '__class__'")


def test_an_inline_template_of_a_non_llm_step_is_confined(check: Check, tmp_path: Path, outside: Path) -> None:
    (tmp_path / "link.txt").symlink_to(outside / "secret.txt")
    text = HEAD + "memory: {field: f}\nsteps:\n  reply: {uses: external_dialogue}\n  note: {uses: memory.store, after: [reply], with: {content: \"{% include 'link.txt' %}\"}}\n"
    (line,) = check(text)
    assert line.startswith("soul.yaml:6:62: error: 'note.with.content' line 1 includes 'link.txt', which is refused")


def test_oversized_persona_and_template_are_refused_by_size(check: Check, tmp_path: Path) -> None:
    with (tmp_path / "me.md").open("wb") as f:
        f.truncate(108 * 1024 * 1024)  # sparse: 108 MB on paper, nothing on disk
    (line,) = check(HEAD + "persona: me.md\nsteps:\n  reply: {uses: external_dialogue}\n")
    assert line == "soul.yaml:3:10: error: persona 'me.md' is refused: 113,246,208 bytes; at most 1,048,576 (1 MiB) are read (shorten it or split it)"
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "x" * (1024 * 1024 + 1)})
    assert line.startswith(AT + "template 'reply.j2' is refused: 1,048,577 bytes")


def test_a_fifo_is_not_read(check: Check, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "tone.txt")
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'tone.txt' %}"})
    assert line.endswith("includes 'tone.txt', which is refused: not a regular file (name a text file)")


@pytest.mark.parametrize("expression", ['"x" * 10**9', '"x"|center(1000000000)', '[0] * 10**9', '"%999999999d" % 1', "2 ** (10 ** 9)"])
def test_constant_folding_allocates_nothing_at_validate_time(check: Check, expression: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    check(WITH_TEMPLATE.replace("template: reply.j2", f"when: '{expression}'"))
    check(WITH_TEMPLATE, **{"reply.j2": f"{{{{ {expression} }}}}"})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - started < 5 and peak < 50 * 1024 * 1024


# -- at run time --------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "why"), [
    ('{{ "x" * 10**9 }}', "'*' would make 1,000,000,000"),
    ('{{ "x"|center(1000000000) }}', "filter 'center'"),
    ('{{ 2 ** (10 ** 9) }}', "'**' would make a number"),
    ('{% set ns = namespace(s="x") %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}', "'~' would make"),
    ('{% set ns = namespace(s="x") %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}', "'+' would make"),
    ('{% for i in range(99999) %}{{ "y" * 1000000 }}{% endfor %}', "output passed"),
    ("{{ input.__class__.__mro__ }}", "unsafe"),
    ("{% include 'self.j2' %}", "includes nest without end"),
    ("{% include 'nowhere.j2' %}", "nowhere.j2"),
    ("{% if %}", "inline template"),
])
def test_a_failing_template_is_a_step_error(tmp_path: Path, source: str, why: str) -> None:
    (tmp_path / "self.j2").write_text("{% include 'self.j2' %}")
    env = environment(tmp_path, templates=True)
    with pytest.raises(StepError, match=why.replace("(", r"\(").replace("*", r"\*").replace("+", r"\+")):
        env.from_string(source).render(input={"text": "hi"})


def test_an_escaping_include_at_run_time_is_a_step_error_without_the_secret(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "link.txt").symlink_to(outside / "secret.txt")
    env = environment(tmp_path, templates=True)
    with pytest.raises(StepError) as caught:
        env.from_string("{% include 'link.txt' %}").render()
    assert "'link.txt' refused: it resolves to" in str(caught.value) and SECRET not in str(caught.value)


def test_a_template_swapped_for_an_escaping_link_after_load_fails_the_turn_cleanly(write_blueprint: Callable[..., Path], tmp_path: Path, outside: Path, soul_home: Path) -> None:
    path = write_blueprint(WITH_TEMPLATE, **{"reply.j2": "Be kind.", "tone.txt": "calm"})
    provider = ScriptedProvider(["<external_dialogue>Hi</external_dialogue>"] * 2)
    s = soul.load(path, provider=provider, home=soul_home)
    (tmp_path / "reply.j2").write_text("{% include 'link.txt' %}")
    (tmp_path / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(BlueprintError, match=r"includes 'link\.txt', which is refused"):
        soul.load(path, provider=provider, home=soul_home)  # loading validates: refused now
    with pytest.raises(StepError, match=r"step 'reply': template 'reply\.j2' line 1: template 'link\.txt' refused"):
        s.session().turn_sync("hello")
    assert all(SECRET not in m.content for r in provider.requests for m in r.messages)
    s.close()


HOSTILE_NAMES = st.sampled_from([
    "../secret.txt", "/etc/passwd", "/proc/self/environ", "link.txt", "parts/secret.txt", "./../x", "a/../../x",
    "\0", "x\0y", "~/x", "..", ".", "", "//etc/passwd", "parts/../link.txt", "tone.txt", "loop", "é/../../x", "a" * 5000,
])


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.one_of(HOSTILE_NAMES, st.text(max_size=40)), min_size=1, max_size=3))
def test_any_include_name_is_inside_or_a_clean_error(names: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp() / "fuzz"
    folder, out = base / "bp", base / "out"
    if not folder.exists():
        folder.mkdir(parents=True)
        out.mkdir()
        (out / "secret.txt").write_text(SECRET)
        (folder / "tone.txt").write_text("calm")
        (folder / "link.txt").symlink_to(out / "secret.txt")
        (folder / "parts").symlink_to(out, target_is_directory=True)
        (folder / "loop").symlink_to(folder / "loop")
    env = environment(folder, templates=True)
    source = "".join(f"{{% include {name!r} %}}" for name in names)
    try:
        text = env.from_string(source).render()
    except StepError as exc:
        assert SECRET not in str(exc)
    else:
        assert SECRET not in text

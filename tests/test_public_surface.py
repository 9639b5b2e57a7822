"""The public surface (issue 11): what `import soul` exports, that it stays cheap and exact,
and that its types hold under mypy (.ci/typecheck.py)."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import soul
import soul.errors

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ("StepStarted", "Token", "StepFinished", "Reply", "TurnCommitted", "SubprocessFinished")
TRACES = ("StepTrace", "CallTrace", "Trace", "TurnResult")
CLAUDIUS_REPLY = (
    '<internal_monologue verb="mused">Hm.</internal_monologue>'
    '<external_dialogue verb="said">Hello!</external_dialogue>'
    "<user_model_check>false</user_model_check>"
)


def documented_names() -> list[str]:
    """The names docs/embedding.md lists as `- `soul.NAME` — ...`."""
    text = (ROOT / "docs" / "embedding.md").read_text(encoding="utf-8")
    return [line.split("`")[1].removeprefix("soul.") for line in text.splitlines() if line.startswith("- `soul.")]


def error_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in soul.errors."""
    return {
        name: cls
        for name, cls in vars(soul.errors).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == "soul.errors"
    }


def run_python(code: str, cwd: Path) -> dict[str, object]:
    """Run `code` in a fresh interpreter; it prints one JSON object, returned here."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_documented_name_imports_from_soul() -> None:
    names = documented_names()
    assert len(names) >= 40
    namespace: dict[str, object] = {}
    exec(f"from soul import {', '.join(names)}", namespace)
    for name in names:
        assert namespace[name] is getattr(soul, name), name


def test_all_is_exactly_the_exported_names_and_each_resolves() -> None:
    assert len(soul.__all__) == len(set(soul.__all__))
    assert set(soul.__all__) == set(soul._EXPORTS) | {"__version__"}
    for name in soul.__all__:
        assert getattr(soul, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        soul.nonexistent  # noqa: B018


def test_the_stream_events_and_trace_types_are_exported() -> None:
    import soul.runtime

    for name in (*EVENTS, *TRACES, "Session", "Soul"):
        assert name in soul.__all__, name
        assert getattr(soul, name) is getattr(soul.runtime, name), name
    token = soul.Token(step="reply", text="Hel")
    assert (token.step, token.text) == ("reply", "Hel")


def test_the_store_messages_and_providers_are_exported() -> None:
    import soul.providers
    import soul.store

    assert soul.SessionStore is soul.store.SessionStore
    assert soul.Message is soul.providers.Message
    assert soul.Provider is soul.providers.Provider
    assert soul.ScriptedProvider is soul.providers.ScriptedProvider
    assert issubclass(soul.ScriptedProvider, soul.Provider)


def test_every_error_class_is_exported_from_soul() -> None:
    classes = error_classes()
    assert len(classes) >= 20
    for name, cls in classes.items():
        assert name in soul.__all__, name
        assert getattr(soul, name) is cls, name
        assert issubclass(cls, soul.SoulError), name


def test_the_error_tree_in_the_docstring_lists_every_class() -> None:
    doc = soul.errors.__doc__ or ""
    listed = {line.strip(" │├└─").split()[0] for line in doc.splitlines() if line.startswith("    ") and line.strip()}
    assert listed == set(error_classes())


def test_step_error_carries_step_and_kind() -> None:
    cause = ValueError("no such variable 'x'")
    error = soul.StepError.from_exception(cause, step="think", kind="internal_monologue", what="template")
    assert (error.step, error.kind) == ("think", "internal_monologue")
    assert str(error) == "step 'think': template: no such variable 'x'"
    bare = soul.StepError("something failed")
    assert (bare.step, bare.kind) == (None, None)


def _built_somewhere(name: str, trees: list[ast.AST]) -> bool:
    """`name` is raised or constructed (called, `.from_exception`, or passed to a factory) in
    some tree — a mention in an `except` clause or an isinstance check does not count."""
    return name in _built_names(trees)


def _built_names(trees: list[ast.AST]) -> set[str]:
    """Every name `_built_somewhere` would find in `trees`, in one walk of them (a walk per
    error class was ~6 s of the suite)."""
    built: set[str] = set()
    for tree in trees:
        ignored: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                ignored |= {id(n) for n in ast.walk(node.type)}
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass"):
                ignored |= {id(n) for arg in node.args[1:] for n in ast.walk(arg)}
        built |= {node.id for node in ast.walk(tree)
                  if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in ignored}
    return built


def test_every_exported_error_is_raised_somewhere() -> None:
    classes = error_classes()
    bases = {base for cls in classes.values() for base in cls.__mro__[1:]}
    trees = [
        ast.parse(path.read_text(encoding="utf-8"))
        for folder in ("pipeline", "steps")
        for path in (ROOT / folder).rglob("*.py")
        if path != ROOT / "pipeline" / "errors.py"
    ]
    built = _built_names(trees)
    never = [name for name, cls in classes.items() if cls not in bases and name not in built]
    assert not never, f"exported but never raised (raise them where they happen, or remove them): {never}"


def test_the_raised_somewhere_check_bites() -> None:
    tree = ast.parse("try:\n    f()\nexcept Planted:\n    pass\nif isinstance(e, Planted):\n    pass\n")
    assert not _built_somewhere("Planted", [tree])
    assert _built_somewhere("Planted", [ast.parse("raise Planted('x')")])
    assert _built_somewhere("Planted", [ast.parse("error = make(Planted, 'x')")])


def test_validate_stays_the_function_after_load_and_submodule_imports(tmp_path: Path) -> None:
    seen = run_python(
        f"""
        import json, types
        import soul
        s = soul.load("claudius", provider=soul.ScriptedProvider([{CLAUDIUS_REPLY!r}]), home={str(tmp_path)!r})
        reply = s.session().turn_sync("hi").reply
        after_load = isinstance(soul.validate, types.FunctionType)
        import soul.compiler.validation
        import soul.compiler
        after_import = soul.validate is soul.compiler.validate
        print(json.dumps({{"reply": reply, "after_load": after_load, "after_import": after_import,
                          "ok": soul.validate("claudius").ok}}))
        """,
        tmp_path,
    )
    assert seen == {"reply": "Hello!", "after_load": True, "after_import": True, "ok": True}


def test_import_soul_loads_no_yaml_jinja_or_networkx(tmp_path: Path) -> None:
    seen = run_python(
        """
        import json, sys
        import soul
        heavy = ("yaml", "jinja2", "networkx")
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m.startswith("soul."))))
        """,
        tmp_path,
    )
    assert seen == []


def test_the_provider_interface_loads_no_step_kind_nor_the_runtime(tmp_path: Path) -> None:
    seen = run_python(
        """
        import json, sys
        import soul.providers.base
        print(json.dumps(sorted(m for m in sys.modules
                                if m.startswith(("soul.steps", "soul.runtime", "soul.kinds")))))
        """,
        tmp_path,
    )
    assert seen == []


def test_the_public_surface_type_checks() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the dev extra")
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "typecheck.py")], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_type_check_bites_on_a_wrong_attribute(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the dev extra")
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import soul\n\n\ndef f(e: soul.Token, r: soul.TurnResult) -> str:\n    return e.txt + r.replyy\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "typecheck.py"), str(wrong)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert '"Token" has no attribute "txt"' in done.stdout
    assert '"TurnResult" has no attribute "replyy"' in done.stdout

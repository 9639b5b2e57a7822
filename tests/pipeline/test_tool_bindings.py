"""`soul validate` accepts the tools Python accepts: a tool's name is looked up the way an import
would bind it — star imports (under an `if` too) followed with their `__all__`, relative ones
inside packages, conditional bindings, modules already imported — and where no source can
tell (a compiled module, a module `__getattr__`, a name set through `global`) it is a warning
saying the name could not be proven, never an error. Nothing is run to find out."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from soul.cli.main import main
from soul.compiler import validate
from soul.language import ToolDecl, locate_tool


def soul_with_tool(folder: Path, ref: str, **modules: str) -> Path:
    """A blueprint in `folder` whose one tool is `ref`, with Python modules beside it
    (`pkg__mod` names pkg/mod.py, `pkg__init` pkg/__init__.py)."""
    for name, source in modules.items():
        path = folder / (name.replace("__", "/").replace("/init", "/__init__") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    blueprint = folder / "soul.yaml"
    blueprint.write_text(
        "soul: toolie\nversion: 1\ntools:\n"
        f"  it: {ref}\n"
        "steps:\n  lookup: {uses: tool}\n  reply: {uses: external_dialogue, after: [lookup]}\n"
    )
    return blueprint


def findings(folder: Path, ref: str, **modules: str) -> list[str]:
    return [d.format() for d in validate(soul_with_tool(folder, ref, **modules)).diagnostics]


def test_a_name_a_star_import_binds_under_an_if_is_found(tmp_path: Path) -> None:
    found = findings(tmp_path, "starry_if:helper",
                     starry_if="import sys\nif sys.platform:\n    from starry_impl import *\nelse:\n    pass\n",
                     starry_impl="def helper(x: int) -> int:\n    return x\n")
    assert found == []


def test_a_c_implemented_standard_name_reexported_by_os_is_valid() -> None:
    assert locate_tool(ToolDecl("cwd", "os:getcwd", ("tools", "cwd")), None) is None
    assert locate_tool(ToolDecl("j", "os.path:join", ("tools", "j")), None) is None


def test_os_getcwd_is_valid_in_soul_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(soul_with_tool(tmp_path, "os:getcwd"))])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "valid" in out and "error" not in err


def test_star_imports_follow_all_and_leave_out_private_names(tmp_path: Path) -> None:
    impl = "__all__ = ['shown']\ndef shown(): ...\ndef hidden(): ...\n"
    assert findings(tmp_path, "front:shown", front="from impl_all import *\n", impl_all=impl) == []
    hidden = findings(tmp_path, "front:hidden", front="from impl_all import *\n", impl_all=impl)
    assert len(hidden) == 1 and "error: tool 'it': module 'front'" in hidden[0] and "defines no 'hidden'" in hidden[0]
    private = findings(tmp_path, "front2:_private", front2="from impl_priv import *\n", impl_priv="def _private(): ...\n")
    assert len(private) == 1 and "defines no '_private'" in private[0]


def test_all_extended_after_the_fact_counts(tmp_path: Path) -> None:
    impl = "__all__ = ['a']\n__all__ += ['b']\n__all__.append('c')\ndef a(): ...\ndef b(): ...\ndef c(): ...\n"
    for name in ("a", "b", "c"):
        assert findings(tmp_path, f"front_ext:{name}", front_ext="from impl_ext import *\n", impl_ext=impl) == []


def test_a_relative_star_import_inside_a_package_is_followed(tmp_path: Path) -> None:
    found = findings(tmp_path, "pkg_rel:tool",
                     pkg_rel__init="from .impl import *\n", pkg_rel__impl="def tool(): ...\n")
    assert found == []
    assert "pkg_rel" not in sys.modules  # found without importing the package


def test_names_bound_only_on_some_path_are_found(tmp_path: Path) -> None:
    source = """\
        try:
            from fastlib import speedy as tool
        except ImportError:
            def tool(): ...
        for looped in range(1):
            pass
        with open(__file__) as handle:
            pass
        """
    for name in ("tool", "looped", "handle"):
        assert findings(tmp_path, f"paths:{name}", paths=source) == []


def test_a_star_import_cycle_ends_and_a_missing_name_is_an_error(tmp_path: Path) -> None:
    found = findings(tmp_path, "ring_a:nowhere", ring_a="from ring_b import *\n", ring_b="from ring_a import *\n")
    assert len(found) == 1 and "defines no 'nowhere'" in found[0]


def test_a_compiled_module_is_a_could_not_be_proven_warning(tmp_path: Path) -> None:
    import importlib.machinery

    # an extension module's file, never loaded: its names cannot be read without running it
    (tmp_path / f"fastext{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF not really")
    found = findings(tmp_path, "fastext:speedy")
    assert len(found) == 1
    assert ": warning: tool 'it': could not be proven that module 'fastext' binds 'speedy'" in found[0]
    assert "compiled module" in found[0] and "from fastext import speedy" in found[0]
    assert "fastext" not in sys.modules


def test_a_star_import_of_a_compiled_module_is_a_warning_naming_it(tmp_path: Path) -> None:
    import importlib.machinery

    (tmp_path / f"fastext2{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF")
    found = findings(tmp_path, "wrapper:speedy", wrapper="from fastext2 import *\n")
    assert len(found) == 1 and ": warning: " in found[0] and "fastext2" in found[0]


def test_what_only_running_could_tell_is_a_warning_not_an_error(tmp_path: Path) -> None:
    lazy = findings(tmp_path, "lazy:anything", lazy="def __getattr__(name): ...\n")
    assert len(lazy) == 1 and ": warning: " in lazy[0] and "__getattr__" in lazy[0]
    late = findings(tmp_path, "late:tool", late="def setup():\n    global tool\n    tool = print\nsetup()\n")
    assert len(late) == 1 and ": warning: " in late[0] and "global" in late[0]


def test_a_name_no_path_binds_is_still_an_error(tmp_path: Path) -> None:
    found = findings(tmp_path, "plain:missing", plain="import os\nif os.sep:\n    def other(): ...\n")
    assert len(found) == 1 and ": error: tool 'it': module 'plain'" in found[0] and "defines no 'missing'" in found[0]


def test_finding_names_runs_no_code(tmp_path: Path) -> None:
    findings(tmp_path, "noisy:tool", noisy="open('RAN', 'w').write('x')\nfrom noisy_impl import *\n",
             noisy_impl="open('RAN_IMPL', 'w').write('x')\ndef tool(): ...\n")
    assert not list(tmp_path.rglob("RAN*")) and not list(Path.cwd().glob("RAN*"))
    assert "noisy" not in sys.modules and "noisy_impl" not in sys.modules

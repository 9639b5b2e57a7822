"""Which files a soul is made of: the blueprint and every file inside its folder it names.

Nothing is run and nothing outside the blueprint's folder is taken (the paths are confined as
every file a blueprint names is: soul.textfiles). A file is named

- by a string value of the blueprint (or of a YAML file it names: a dialogue's agent
  blueprints) that is the relative path of a regular file in the folder — the persona,
  templates, persona cores, agent blueprints, embedder files;
- by `{% include %}`, `{% import %}`, `{% from %}` or `{% extends %}` in a template it names;
- as a Python tool's module (`module:function`): the module's `.py` file when it lies in the
  folder (a package: its folder's `.py` files).

So a soul folder's other contents (its git history, a virtualenv, notes) stay out, and a
built-in soul (whose folder holds every built-in) takes only its own files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soul import textfiles
from soul.errors import BundleError
from soul.language import Blueprint, find_module, load_yaml

MAX_FILES = 1000
MAX_YAML_BYTES = 1 << 20  # the blueprint limit
MAX_NAME = 255
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".md", ".txt", ".html")
_JINJA_NAMES = re.compile(r"\{%-?\s*(?:include|import|from|extends)\s+[\"']([^\"'\n]{1,255})[\"']")


def soul_files(blueprint: Blueprint) -> list[tuple[str, Path]]:
    """(path relative to the blueprint's folder, real path) of the blueprint file and every
    file inside its folder it names, the blueprint first."""
    folder, file = blueprint.folder, Path(blueprint.file)
    if folder is None:
        raise BundleError(f"{blueprint.name}: a blueprint that is not a file cannot be packed")
    root = folder.resolve()
    found: dict[str, Path] = {}
    queue: list[Path] = [file.resolve()]
    while queue:
        path = queue.pop(0)
        name = path.relative_to(root).as_posix()
        if name in found:
            continue
        if len(found) >= MAX_FILES:
            raise BundleError(f"{blueprint.name}: it names more than {MAX_FILES} files; a bundle holds at most that many")
        found[name] = path
        if path.suffix in (".yaml", ".yml"):
            queue += _named_by_yaml(path, root)
        elif path.suffix in TEMPLATE_SUFFIXES:
            queue += _named_by_template(path, root)
    for decl in blueprint.tools.values():
        spec = find_module(decl.module, folder)
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin and spec.origin.endswith(".py") else None
        if origin is not None and origin.is_relative_to(root):
            modules = sorted(origin.parent.glob("*.py")) if origin.name == "__init__.py" else [origin]
            for module in modules:
                found.setdefault(module.relative_to(root).as_posix(), module)
    return list(found.items())


def _inside(root: Path, name: str) -> Path | None:
    """The regular file `name` names inside `root`, or None."""
    if not name or len(name) > MAX_NAME or "\n" in name or name.startswith(("/", "\\")) or "://" in name:
        return None
    try:
        path = textfiles.confine(root, name)
    except textfiles.Refused:
        return None
    try:
        return path if path.is_file() else None
    except OSError:
        return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _named_by_yaml(path: Path, root: Path) -> list[Path]:
    try:
        data = load_yaml(textfiles.read_text(path, MAX_YAML_BYTES), str(path)).data
    except (textfiles.Refused, OSError, ValueError):  # not a YAML we can read: packed as it is, naming nothing
        return []
    return [p for p in (_inside(root, s) for s in _strings(data)) if p is not None]


def _named_by_template(path: Path, root: Path) -> list[Path]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [p for p in (_inside(root, m.group(1)) for m in _JINJA_NAMES.finditer(text)) if p is not None]

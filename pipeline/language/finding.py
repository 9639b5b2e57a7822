"""Finding a blueprint by what a user types: a path, a folder, or a name.

A name (no slash, no `.yaml`) is looked for where `soul new NAME` writes it, `./NAME.yaml`
(or `./NAME/NAME.yaml`, `soul new NAME --dir NAME`), then among the built-in souls; a name
found nowhere is a `BlueprintNotFound` saying what was looked for, with a "did you mean
./NAME.yaml?" when a blueprint nearby has a close name.
"""

from __future__ import annotations

import importlib.resources
import itertools
from pathlib import Path

from soul.diagnostics import closest, did_you_mean
from soul.errors import BlueprintNotFound

SUFFIXES = (".yaml", ".yml")
NEARBY_LIMIT = 500  # files looked at for a "did you mean" (a folder of thousands stays quick)


def builtin_folder() -> Path:
    """The folder of the built-in souls (inside the installed package)."""
    return Path(str(importlib.resources.files("soul.blueprints")))


def builtin_names() -> list[str]:
    """Names of the built-in souls: `soul run NAME` accepts these."""
    return sorted(p.stem for p in builtin_folder().glob("*.yaml"))


def locate(name_or_path: str | Path) -> Path:
    """The blueprint file for a path, a folder holding one, or a name (see the module)."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        return _in_folder(path, text)
    if _is_name(text):
        for candidate in _places(text):
            if candidate.is_file():
                return candidate
        builtin = builtin_folder() / f"{text}.yaml"
        if builtin.is_file():
            return builtin
        names = builtin_names()
        hint = _nearby_hint(text, Path(".")) or did_you_mean(text, names)
        raise BlueprintNotFound(
            f"no blueprint '{text}': no ./{text}.yaml and no built-in soul by that name; "
            f"built-in souls: {', '.join(names)}" + (f" ({hint})" if hint else "")
        )
    hint = _nearby_hint(path.stem, path.parent) if path.parent.is_dir() else None
    raise BlueprintNotFound(f"{text}: no such file" + (f" ({hint})" if hint else ""))


def _is_name(text: str) -> bool:
    return bool(text) and "/" not in text and "\\" not in text and not text.endswith(SUFFIXES) and text not in (".", "..")


def _places(name: str) -> list[Path]:
    """Where a name's blueprint may be, in order: ./NAME.yaml, ./NAME.yml, ./NAME/NAME.yaml..."""
    return [*(Path(name + s) for s in SUFFIXES), *(Path(name) / (name + s) for s in SUFFIXES)]


def _in_folder(folder: Path, text: str) -> Path:
    """A folder's blueprint: its only YAML file, or the one named after the folder."""
    candidates = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if len(candidates) == 1:
        return candidates[0]
    named = [c for c in candidates if c.stem == folder.resolve().name]
    if len(named) == 1:
        return named[0]
    raise BlueprintNotFound(f"{text}: a folder with {len(candidates)} YAML files; name the blueprint file")


def _nearby(folder: Path) -> dict[str, str]:
    """{stem: how to write it} for the blueprints in `folder` (at most NEARBY_LIMIT files)."""
    found: dict[str, str] = {}
    for entry in itertools.islice(folder.iterdir(), NEARBY_LIMIT):
        if entry.suffix in SUFFIXES and entry.is_file():
            found.setdefault(entry.stem, entry.name)
        elif entry.is_dir() and any((entry / (entry.name + s)).is_file() for s in SUFFIXES):
            found.setdefault(entry.name, f"{entry.name}/{entry.name}.yaml")
    return found


def _nearby_hint(word: str, folder: Path) -> str | None:
    """"did you mean ./x.yaml?" when a blueprint in `folder` has a name close to `word`."""
    nearby = _nearby(folder)
    match = closest(word, nearby)
    if match is None:
        return None
    where = "./" if folder == Path(".") else f"{folder}/"
    return f"did you mean {where}{nearby[match]}?"

"""The files a blueprint names (persona, templates, includes, the memory field's folder):
confined to its folder, bounded.

Every path is resolved (symlinks followed) before it is opened, and refused when the real
file lies outside the blueprint's folder: a template that includes a symlink to
`/proc/self/environ` would otherwise put every API key into the prompt and the session store.
The built-in templates (the `soul.templates` package) are the one other place templates may
come from. Files are read only when they are regular files of at most `MAX_FILE_BYTES`, so a
FIFO, a device or a 100 MB persona cannot stall or exhaust a turn.

`TemplateFiles` is the one template loader: prompts, non-LLM steps' inline templates and
validation all resolve names through it; `field_folder` is where `memory.field` points, for
validation and the memory bridge alike. The checks themselves are `soul.textfiles`'; this
module words their refusals as `FileRefused`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from jinja2 import BaseLoader, Environment, TemplateNotFound

from soul import textfiles
from soul.errors import FileRefused

MAX_FILE_BYTES = 1024 * 1024  # the same 1 MiB as a blueprint


@lru_cache(maxsize=1)
def builtin_templates() -> Path:
    """The folder of the built-in steps' templates (inside the installed package)."""
    return Path(str(files("soul.templates"))).resolve()


def confine(folder: Path, name: str, what: str) -> Path:
    """The real path of `name` inside `folder`, or FileRefused when it resolves outside.

    The path may not exist (the caller decides what missing means); symlinks in it are
    followed, so a link inside the folder to a file inside stays allowed."""
    try:
        return textfiles.confine(folder, name)
    except textfiles.Refused as exc:
        inside = "name a file inside the blueprint's folder"
        if exc.reason == "nul":
            raise FileRefused(what, name, "a NUL character in the name", inside) from None
        if exc.reason == "absolute":
            raise FileRefused(what, name, "an absolute path", f"{inside} {folder}") from None
        if exc.reason == "unresolvable":
            raise FileRefused(what, name, f"cannot be resolved ({exc.detail})", inside) from exc
        raise FileRefused(what, name, f"it resolves to {exc.path}, outside the blueprint's folder {exc.folder}",
                          "keep templates and personas beside the blueprint; symlinks must point inside it") from None


def read_text(path: Path, what: str, name: str) -> str:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES, or FileRefused."""
    try:
        return textfiles.read_text(path, MAX_FILE_BYTES)
    except textfiles.Refused as exc:
        if exc.reason in ("missing", "unreadable"):
            raise FileRefused(what, name, f"cannot be read ({exc.detail})", "check the file exists and is readable") from exc
        if exc.reason == "not_regular":
            raise FileRefused(what, name, "not a regular file", "name a text file") from None
        if exc.reason == "too_large" and exc.size is not None:
            raise FileRefused(what, name, f"{exc.size:,} bytes; at most {MAX_FILE_BYTES:,} (1 MiB) are read", "shorten it or split it") from None
        if exc.reason == "too_large":
            raise FileRefused(what, name, f"over {MAX_FILE_BYTES:,} bytes (1 MiB)", "shorten it or split it") from None
        raise FileRefused(what, name, f"not UTF-8 text (byte {exc.byte})", "save it as UTF-8") from exc


ALLOW_FIELD_PATHS = "SOUL_ALLOW_FIELD_PATHS"  # =1: memory.field may point anywhere
_ALLOW_HINT = f"or set {ALLOW_FIELD_PATHS}=1 (in Python: allow_field_paths=True) to allow it"


def field_folder(where: str, folder: Path | None, *, allow: bool | None = None) -> Path:
    """Where a blueprint's `memory.field` points, kept inside the blueprint's folder.

    A blueprint is data someone may hand you: its field must not write to an absolute path, a
    `~` path, or out of its folder through `..` or a symlink (resolved first). Such a path is
    FileRefused unless allowed: `allow=True`, or, when `allow` is None, the environment's
    ``SOUL_ALLOW_FIELD_PATHS=1``. Allowed, an absolute or `~` path is taken as written (`~`
    expanded) and a relative one resolved. Without a blueprint folder (an inline blueprint)
    the current directory is the folder. Validation and the memory bridge both ask here.
    """
    allowed = allow if allow is not None else os.environ.get(ALLOW_FIELD_PATHS, "") == "1"
    what, inside = "memory.field", "name a folder inside the blueprint's folder"
    raw = Path(where)
    if where.startswith("~") or raw.is_absolute():
        if allowed:
            return raw.expanduser()
        which = "a '~' path" if where.startswith("~") else "an absolute path"
        raise FileRefused(what, where, f"{which}, outside the blueprint's folder",
                          f"use a path relative to the blueprint (fields without memory.field live under the data home), {_ALLOW_HINT}")
    base = folder if folder is not None else Path.cwd()
    try:
        return textfiles.confine(base, raw)
    except textfiles.Refused as exc:
        if exc.reason == "outside" and allowed:
            return exc.path
        if exc.reason == "nul":
            raise FileRefused(what, where, "a NUL character in the name", inside) from None
        if exc.reason == "unresolvable":
            raise FileRefused(what, where, f"cannot be resolved ({exc.detail})", inside) from exc
        raise FileRefused(what, where, f"it resolves to {exc.path}, outside the blueprint's folder {exc.folder} (through '..' or a symlink)",
                          f"keep the field inside the folder, {_ALLOW_HINT}") from None


class TemplateFiles(BaseLoader):
    """Templates by name: the blueprint's folder first, then the built-in templates.

    A name that resolves outside the blueprint's folder is refused (FileRefused), never looked
    up further: an include that escapes is a mistake or an attack, not a miss."""

    def __init__(self, folder: Path | None, *, builtin: bool = True) -> None:
        self.roots = [p for p in (folder, builtin_templates() if builtin else None) if p is not None]

    def find(self, name: str) -> Path:
        """The real path of template `name`; FileRefused or TemplateNotFound otherwise."""
        for i, root in enumerate(self.roots):
            what = "template" if i == 0 or root != builtin_templates() else "built-in template"
            real = confine(root, name, what)
            try:
                if real.exists():
                    return real
            except OSError as exc:  # a name too long for the system, a permission denied
                raise FileRefused(what, name[:80], f"cannot be looked up ({exc.strerror or exc})", "name a file inside the blueprint's folder") from exc
        raise TemplateNotFound(name, f"template '{name}' not found in {' or '.join(str(r) for r in self.roots) or 'any folder'}")

    def get_source(self, environment: Environment | None, template: str) -> tuple[str, str, Callable[[], bool]]:
        path = self.find(template)
        text = read_text(path, "template", template)
        mtime = path.stat().st_mtime

        def uptodate() -> bool:
            try:
                return path.stat().st_mtime == mtime
            except OSError:
                return False

        return text, str(path), uptodate

"""The files a blueprint names (persona, templates, includes): confined to its folder, bounded.

Every path is resolved (symlinks followed) before it is opened, and refused when the real
file lies outside the blueprint's folder: a template that includes a symlink to
`/proc/self/environ` would otherwise put every API key into the prompt and the session store.
The built-in templates (the `soul.templates` package) are the one other place templates may
come from. Files are read only when they are regular files of at most `MAX_FILE_BYTES`, so a
FIFO, a device or a 100 MB persona cannot stall or exhaust a turn.

`TemplateFiles` is the one template loader: prompts, non-LLM steps' inline templates and
validation all resolve names through it.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from jinja2 import BaseLoader, Environment, TemplateNotFound

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
    if "\0" in name:
        raise FileRefused(what, name, "a NUL character in the name", "name a file inside the blueprint's folder")
    if Path(name).is_absolute():
        raise FileRefused(what, name, "an absolute path", f"name a file inside the blueprint's folder {folder}")
    root = folder.resolve()
    try:
        real = (root / name).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long for the system
        raise FileRefused(what, name, f"cannot be resolved ({exc})", "name a file inside the blueprint's folder") from exc
    if not real.is_relative_to(root):
        raise FileRefused(what, name, f"it resolves to {real}, outside the blueprint's folder {root}",
                          "keep templates and personas beside the blueprint; symlinks must point inside it")
    return real


def read_text(path: Path, what: str, name: str) -> str:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES, or FileRefused."""
    try:
        info = path.stat()
    except OSError as exc:
        raise FileRefused(what, name, f"cannot be read ({exc.strerror or exc})", "check the file exists and is readable") from exc
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(what, name, "not a regular file", "name a text file")
    if info.st_size > MAX_FILE_BYTES:
        raise FileRefused(what, name, f"{info.st_size:,} bytes; at most {MAX_FILE_BYTES:,} (1 MiB) are read", "shorten it or split it")
    with path.open("rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)  # bounded even if the file grew since the stat
    if len(raw) > MAX_FILE_BYTES:
        raise FileRefused(what, name, f"over {MAX_FILE_BYTES:,} bytes (1 MiB)", "shorten it or split it")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(what, name, f"not UTF-8 text (byte {exc.start})", "save it as UTF-8") from exc


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

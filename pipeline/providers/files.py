"""Reading the files a model spec names (`scripted:FILE`, `replay:CASSETTE`): regular files
only, size-limited, and — when the spec came from a blueprint — inside the blueprint's folder.

A blueprint is shared text: `model: scripted:/dev/zero` must not read until memory runs out,
and `scripted:../../home/me/notes` must not read outside the folder it came in. A path the
user typed on the command line (`--script`, `--replay`, `--model`) is theirs to choose, so it
is only size-checked.
"""

from __future__ import annotations

from pathlib import Path

from soul.errors import ProviderError


def read_text(path: str | Path, what: str, limit: int, *, within: Path | None = None) -> tuple[Path, str]:
    """The UTF-8 text of `path` (resolved against `within` when relative) and the path read.

    ProviderError if it lies outside `within`, is not a regular file (a FIFO, a device, a
    folder), is larger than `limit` bytes, or is not UTF-8.
    """
    path = Path(path)
    if within is not None:
        path = within / path  # an absolute path stays itself
        resolved, folder = path.resolve(), within.resolve()
        if not resolved.is_relative_to(folder):
            raise ProviderError(
                f"{what}: {path} is outside the blueprint's folder {folder}: keep the file beside "
                "the blueprint, or name it on the command line (--script FILE / --replay CASSETTE)"
            )
    try:
        if not path.is_file():
            problem = "does not exist" if not path.exists() else "is not a regular file"
            raise ProviderError(f"{what}: {path} {problem}")
        size = path.stat().st_size
        if size > limit:
            raise ProviderError(f"{what}: {path} is {size:,} bytes, over the limit of {limit:,}")
        with path.open("rb") as stream:
            data = stream.read(limit + 1)  # the file may have grown since the stat
    except OSError as exc:
        raise ProviderError(f"{what}: cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise ProviderError(f"{what}: {path} is over the limit of {limit:,} bytes")
    try:
        return path, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderError(f"{what}: {path} is not UTF-8 text (byte {exc.start})") from exc

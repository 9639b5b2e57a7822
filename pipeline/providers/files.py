"""Reading the files a model spec names (`scripted:FILE`, `replay:CASSETTE`): regular files
only, size-limited, and — when the spec came from a blueprint — inside the blueprint's folder.

A blueprint is shared text: `model: scripted:/dev/zero` must not read until memory runs out,
and `scripted:../../home/me/notes` must not read outside the folder it came in. A path the
user typed on the command line (`--script`, `--replay`, `--model`) is theirs to choose, so it
is only size-checked.
"""

from __future__ import annotations

from pathlib import Path

from soul import textfiles
from soul.errors import ProviderError


def read_text(path: str | Path, what: str, limit: int, *, within: Path | None = None) -> tuple[Path, str]:
    """The UTF-8 text of `path` (resolved against `within` when relative) and the path read.

    ProviderError if it lies outside `within`, is not a regular file (a FIFO, a device, a
    folder), is larger than `limit` bytes, or is not UTF-8 (`soul.textfiles` does the checks).
    """
    name = Path(path)
    path = name if within is None else within / name  # an absolute name stays itself
    if within is not None:
        try:
            textfiles.confine(within, name, absolute=True)
        except textfiles.Refused as exc:
            if exc.reason == "nul":
                raise ProviderError(f"{what}: {str(path)!r} has a NUL character in its name") from None
            if exc.reason == "unresolvable":
                raise ProviderError(f"{what}: {path} cannot be resolved ({exc.detail})") from exc
            raise ProviderError(
                f"{what}: {path} is outside the blueprint's folder {exc.folder}: keep the file beside "
                "the blueprint, or name it on the command line (--script FILE / --replay CASSETTE)"
            ) from None
    try:
        return path, textfiles.read_text(path, limit)
    except textfiles.Refused as exc:
        if exc.reason in ("missing", "not_regular", "too_large", "not_utf8"):
            raise ProviderError(f"{what}: {path} {_refusal(exc, limit)}") from exc
        raise ProviderError(f"{what}: cannot read {path}: {exc.detail}") from exc


def _refusal(exc: textfiles.Refused, limit: int) -> str:
    if exc.reason == "too_large" and exc.size is not None:
        return f"is {exc.size:,} bytes, over the limit of {limit:,}"
    if exc.reason == "too_large":
        return f"is over the limit of {limit:,} bytes"
    if exc.reason == "not_utf8":
        return f"is not UTF-8 text (byte {exc.byte})"
    return "is not a regular file" if exc.reason == "not_regular" else "does not exist"

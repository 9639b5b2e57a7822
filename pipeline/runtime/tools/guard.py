"""What tool code raises stays inside the tool call: no tool can stop the process.

A tool's body may raise anything Python allows: `SystemExit` (`sys.exit`, argparse's
`parser.error`, click in standalone mode), `KeyboardInterrupt`, `GeneratorExit`, a
`CancelledError` of its own. Left alone, asyncio re-raises the first two out of the event
loop (ending `soul run` with the tool's exit status, or `soul serve` with every session on
it), and the last would look like the turn being cancelled. Here each becomes `ToolRaised`, an
ordinary exception the tool box words as an error result for the model.

What is *not* the tool's passes through untouched:

- a real Ctrl-C of the user. SIGINT is delivered to the main thread only, so a
  `KeyboardInterrupt` raised in a tool's worker thread is always the tool's own. On the main
  thread (an async tool on a loop there), the SIGINT handler in place is wrapped while tools
  run (`watching_sigint`) to count real signals: a `KeyboardInterrupt` while the count moved
  is the user's;
- the turn's cancellation (`Task.cancelling()` of the task running the tool: a cancelled
  turn, or the tool's timeout), and the `GeneratorExit` of a coroutine being closed from
  outside (it is not running in its own task then).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any


class ToolRaised(Exception):
    """A BaseException raised by tool code, carried as an ordinary exception."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(worded(original))
        self.original = original


def worded(exc: BaseException) -> str:
    """`Type: text`, or `Type` alone when the exception says nothing (`SystemExit: 3`)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def carried(exc: BaseException) -> Exception:
    """`exc` as an ordinary exception: itself when it is one, else wrapped in ToolRaised."""
    return exc if isinstance(exc, Exception) else ToolRaised(exc)


# -- real SIGINTs, counted while tools run on the main thread --------------------------------

_lock = threading.Lock()
_watchers = 0
_signals = 0
_wrapped: Any = None  # the handler our counter delegates to, while installed
_counter: Any = None  # the installed counting handler


def _count(signum: int, frame: Any) -> Any:
    global _signals
    _signals += 1
    handler = _wrapped
    if callable(handler):
        return handler(signum, frame)
    raise KeyboardInterrupt  # pragma: no cover — only installed over a callable handler


@contextlib.contextmanager
def watching_sigint() -> Iterator[Callable[[], bool]]:
    """While inside, real SIGINTs are counted (on the main thread; elsewhere none can land).
    Yields `interrupted()`: whether one arrived since entering."""
    global _watchers, _wrapped, _counter
    main = threading.current_thread() is threading.main_thread()
    installed = False
    if main:
        with _lock:
            if _watchers == 0:
                current = signal.getsignal(signal.SIGINT)
                if callable(current):
                    _wrapped, _counter = current, _count
                    with contextlib.suppress(ValueError, OSError):
                        signal.signal(signal.SIGINT, _count)
                        installed = True
                if not installed:
                    _wrapped = _counter = None
            _watchers += 1
    start = _signals
    try:
        yield lambda: _signals != start
    finally:
        if main:
            with _lock:
                _watchers -= 1
                if _watchers == 0 and _counter is not None:
                    # restored only when nobody replaced it meanwhile
                    if signal.getsignal(signal.SIGINT) is _counter:
                        with contextlib.suppress(ValueError, OSError):
                            signal.signal(signal.SIGINT, _wrapped)
                    _wrapped = _counter = None


def _running_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: a coroutine closed by the garbage collector
        return None


async def guarded(start: Callable[[], Awaitable[Any]]) -> Any:
    """Await `start()` (tool code on the event loop); what the tool raises of its own comes
    out as an ordinary exception, the user's Ctrl-C and the task's cancellation as they are."""
    task = _running_task()
    with watching_sigint() as interrupted:
        try:
            return await start()
        except Exception:
            raise
        except asyncio.CancelledError as exc:
            if task is None or task.cancelling():
                raise  # the turn was cancelled, or the tool timed out
            raise ToolRaised(exc) from exc
        except GeneratorExit as exc:
            if task is None or _running_task() is not task:
                raise  # the coroutine is being closed from outside
            raise ToolRaised(exc) from exc
        except KeyboardInterrupt as exc:
            if interrupted():
                raise  # a real SIGINT landed in the tool's code: the user's
            raise ToolRaised(exc) from exc
        except BaseException as exc:  # SystemExit and any other the tool raised
            raise ToolRaised(exc) from exc


def guarded_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call tool code synchronously on the calling thread (an import, a result's text): what
    it raises of its own comes out as an ordinary exception, a real Ctrl-C as it is."""
    with watching_sigint() as interrupted:
        try:
            return function(*args, **kwargs)
        except Exception:
            raise
        except KeyboardInterrupt as exc:
            if interrupted():
                raise
            raise ToolRaised(exc) from exc
        except BaseException as exc:
            raise ToolRaised(exc) from exc

"""Whether spans are made, decided once per process from the standard OpenTelemetry variables.

On when `OTEL_TRACES_EXPORTER` names an exporter (`console`, `otlp`; `none` is off), or an OTLP
endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: then
`otlp`), or the app embedding soul already set an SDK tracer provider of its own; off when
`OTEL_SDK_DISABLED=true`. Off, nothing of opentelemetry is imported and each check is one
global read. Message content goes on spans only when
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from soul.runtime.tracing.setup import INSTRUMENTATION, tracer_from_env

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_decided = False
_tracer: Any = None
_capture = False


def on() -> bool:
    """Whether spans are made (decided on the first call; `reset` decides again)."""
    if not _decided:
        _decide()
    return _tracer is not None


def tracer() -> Any:
    """The tracer spans are made with (None when off)."""
    on()
    return _tracer


def capture_content() -> bool:
    """Whether message text (prompts, replies, thoughts, tool arguments and results) goes on
    spans: only when the user opted in."""
    on()
    return _capture


def exporters(env: Any = None) -> list[str]:
    """The exporters the environment asks for ([] when tracing is off by the variables)."""
    env = os.environ if env is None else env
    if str(env.get("OTEL_SDK_DISABLED", "")).strip().lower() == "true":
        return []
    named = [e.strip().lower() for e in str(env.get("OTEL_TRACES_EXPORTER", "")).split(",") if e.strip()]
    if named:
        return [e for e in named if e != "none"]
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def _decide() -> None:
    global _decided, _tracer, _capture
    wanted = exporters()
    tracer = None
    if wanted:
        tracer = tracer_from_env(wanted)
    elif "opentelemetry.trace" in sys.modules and str(os.environ.get("OTEL_SDK_DISABLED", "")).lower() != "true":
        tracer = _apps_tracer()  # the app set up OpenTelemetry itself: its provider, no import of ours
    _tracer = tracer
    _capture = str(os.environ.get(CAPTURE_ENV, "")).strip().lower() == "true"
    _decided = True


def _apps_tracer() -> Any:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(INSTRUMENTATION)


def use(provider: Any, *, capture: bool | None = None) -> None:
    """Make spans with `provider`'s tracer (an SDK `TracerProvider`, as a test's with an
    in-memory exporter, or an app's own); `capture` overrides the content opt-in."""
    global _decided, _tracer, _capture
    _tracer = provider.get_tracer(INSTRUMENTATION) if provider is not None else None
    _capture = str(os.environ.get(CAPTURE_ENV, "")).strip().lower() == "true" if capture is None else capture
    _decided = True


def reset() -> None:
    """Forget the decision: the next check reads the environment again."""
    global _decided, _tracer, _capture
    _decided, _tracer, _capture = False, None, False

"""OpenTelemetry spans of what a soul does — turn, step, model call, tool, background cycle,
worker cycle, dialogue turn — under the GenAI semantic conventions (docs/observability.md).

Off unless the standard `OTEL_*` variables ask for it (`switch.py`); off, opentelemetry is
never imported and the runtime pays one global read per check. The SDK comes with the `otel`
extra (`setup.py`); the spans and their attributes are `spans.py`. Callers write
`await (tracing.turn(work, ...) if tracing.on() else work)`: the work runs inside its span.
"""

from soul.runtime.tracing.spans import (
    call,
    call_attributes,
    cycle,
    dialogue_turn,
    tool,
    turn,
    unit,
    worker_cycle,
)
from soul.runtime.tracing.switch import (
    CAPTURE_ENV,
    capture_content,
    exporters,
    on,
    reset,
    tracer,
    use,
)

__all__ = [
    "CAPTURE_ENV",
    "call",
    "call_attributes",
    "capture_content",
    "cycle",
    "dialogue_turn",
    "exporters",
    "on",
    "reset",
    "tool",
    "tracer",
    "turn",
    "unit",
    "use",
    "worker_cycle",
]

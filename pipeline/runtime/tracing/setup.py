"""The OpenTelemetry SDK set up from the standard variables (the `otel` extra), on first use.

Spans are batched (as the SDK's own autoconfiguration does; `OTEL_BSP_*` apply) and flushed
when the process exits: `console` prints them as JSON on stdout (the SDK's console exporter),
`otlp` sends them to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` over
`http/protobuf` (default) or `grpc` (`OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`); the exporters
read their other variables themselves (headers, timeout, ...). `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` name the service (default service name: `soul`). An app that set an
SDK tracer provider before keeps it: spans go where it sends them. The provider is shut down
(its spans flushed) when the process exits.
"""

from __future__ import annotations

import os
from typing import Any

from soul.errors import MissingExtra, SoulError

INSTRUMENTATION = "soulgraph"  # the tracer's name

EXTRA = "pip install 'soulgraph[otel]'"


def tracer_from_env(wanted: list[str]) -> Any:
    """A tracer whose spans go to the exporters `wanted` names."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise MissingExtra(f"OpenTelemetry traces were asked for (OTEL_TRACES_EXPORTER={','.join(wanted)}) but the SDK is not "
                           f"installed: {EXTRA}, or unset OTEL_TRACES_EXPORTER") from exc
    existing = trace.get_tracer_provider()
    if isinstance(existing, TracerProvider):  # the app's own: spans go where it sends them
        return existing.get_tracer(INSTRUMENTATION)
    unknown = [w for w in wanted if w not in ("console", "otlp")]
    if unknown:
        raise SoulError(f"OTEL_TRACES_EXPORTER={','.join(wanted)}: soul knows the exporters console, otlp and none "
                        f"(not {', '.join(unknown)})")
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "soul"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in wanted:  # batched, as the SDK's own autoconfiguration does (OTEL_BSP_* apply)
        exporter = ConsoleSpanExporter() if name == "console" else _otlp_exporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.get_tracer(INSTRUMENTATION)


def _otlp_exporter() -> Any:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip().lower()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise MissingExtra("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: "
                               "pip install opentelemetry-exporter-otlp-proto-grpc (the otel extra has http/protobuf)") from exc
        return OTLPSpanExporter()
    if protocol not in ("http/protobuf", "http"):
        raise SoulError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: soul sends http/protobuf or grpc")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )
    except ImportError as exc:
        raise MissingExtra(f"OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: {EXTRA}") from exc
    return HttpExporter()

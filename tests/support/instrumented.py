"""An instrumented agent, as users run them: the real ``openai`` SDK calls a loopback stand-in for
the OpenAI API, and a real instrumentation exports its spans to ctxweb. Run in a process of its
own (instrumentations patch the SDK globally):

    python -m tests.support.instrumented CLIENT CTXWEB_URL KEY SESSION [--stream]

CLIENT is ``env`` (``openai-v2`` with the exporter configured by the environment alone),
``openai-v2`` (OpenTelemetry's ``opentelemetry-instrumentation-openai-v2``, latest
GenAI conventions, the OTLP protobuf exporter), ``openinference``
(``openinference-instrumentation-openai`` with ``using_session``), ``openllmetry`` (Traceloop's
``opentelemetry-instrumentation-openai``, sent as OTLP JSON by :class:`JsonExporter`) or
``langfuse`` (the Langfuse SDK's OpenAI integration,
exporting to ``/api/public/otel`` with Basic auth: the ctxweb key as its secret key).

The agent makes two model calls: the first answers with a tool call, the agent runs the tool and
sends its result, the second answers in text. It prints one JSON line: the trace id, the tool
call's id and what the stand-in received.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Sequence
from typing import Any

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
SYSTEM = "You are a careful coding agent. Fix the failing test."
ASK = "tests/test_app.py fails with ZeroDivisionError; find out why."
FILE = "def ratio(a, b):\n    return a / b  # b is 0 when the list is empty\n"


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


class JsonExporter:
    """A small OTLP/HTTP JSON span exporter (OTLP JSON: hex ids, camelCase, int64 as strings)."""

    def __init__(self, endpoint: str, headers: dict[str, str]) -> None:
        self.endpoint = endpoint
        self.headers = headers

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        resource_spans = []
        for span in spans:
            resource_spans.append(
                {
                    "resource": {
                        "attributes": [
                            {"key": k, "value": _any_value(v)}
                            for k, v in span.resource.attributes.items()
                        ]
                    },
                    "scopeSpans": [
                        {
                            "scope": {"name": span.instrumentation_scope.name},
                            "spans": [
                                {
                                    "traceId": format(span.context.trace_id, "032x"),
                                    "spanId": format(span.context.span_id, "016x"),
                                    "name": span.name,
                                    "kind": int(span.kind.value) + 1,
                                    "startTimeUnixNano": str(span.start_time),
                                    "endTimeUnixNano": str(span.end_time),
                                    "attributes": [
                                        {"key": k, "value": _any_value(v)}
                                        for k, v in (span.attributes or {}).items()
                                    ],
                                }
                            ],
                        }
                    ],
                }
            )
        request = urllib.request.Request(
            self.endpoint,
            data=json.dumps({"resourceSpans": resource_spans}).encode(),
            headers={"Content-Type": "application/json", **self.headers},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read() or b"{}")
        if answer.get("partialSuccess"):
            print(json.dumps({"partial_success": answer["partialSuccess"]}), file=sys.stderr)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _provider(exporter: Any, resource: dict[str, Any] | None = None) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({"service.name": "agent", **(resource or {})})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _agent(client: Any, model: str, stream: bool) -> str:
    """Two model calls around one tool call; returns the tool call's id."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": ASK},
    ]
    options: dict[str, Any] = (
        {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    )
    first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, **options)
    if stream:
        call_id, name, arguments = "", "", ""
        for chunk in first:
            for choice in chunk.choices or []:
                for call in choice.delta.tool_calls or []:
                    call_id = call.id or call_id
                    if call.function is not None:
                        name = call.function.name or name
                        arguments += call.function.arguments or ""
    else:
        call = first.choices[0].message.tool_calls[0]
        call_id, name, arguments = call.id, call.function.name, call.function.arguments
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call_id, "content": FILE})
    second = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, **options)
    if stream:
        for _ in second:
            pass
    return call_id


def main(argv: Sequence[str]) -> None:
    client_name, ctxweb, key, session = argv[:4]
    stream = "--stream" in argv
    sys.path.insert(0, os.getcwd())
    from tests.support.providers import openai_stand_in

    script = [
        {"tool": "read_file", "arguments": {"path": "src/app.py"}},
        "b is 0 for an empty list.",
    ]
    trace_id = ""
    with openai_stand_in(script) as api:
        if client_name == "openai-v2":
            os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            provider = _provider(
                OTLPSpanExporter(
                    endpoint=f"{ctxweb}/v1/traces", headers={"Authorization": f"Bearer {key}"}
                ),
                {"session.id": session},
            )
            OpenAIInstrumentor().instrument()
            from openai import OpenAI

            client = OpenAI(base_url=f"{api.url}/v1", api_key="sk-test")
            call_id = _agent(client, "gpt-4o", stream)
            provider.shutdown()
        elif client_name == "env":
            # Configured by the environment alone, as the setup page's OTLP snippet says.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            provider = _provider(OTLPSpanExporter(), {"session.id": session})
            OpenAIInstrumentor().instrument()
            from openai import OpenAI

            client = OpenAI(base_url=f"{api.url}/v1", api_key="sk-test")
            call_id = _agent(client, "gpt-4o", stream)
            provider.shutdown()
        elif client_name == "openinference":
            from openinference.instrumentation import using_session
            from openinference.instrumentation.openai import OpenAIInstrumentor
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider = _provider(
                OTLPSpanExporter(
                    endpoint=f"{ctxweb}/v1/traces", headers={"Authorization": f"Bearer {key}"}
                )
            )
            OpenAIInstrumentor().instrument(tracer_provider=provider)
            from openai import OpenAI

            client = OpenAI(base_url=f"{api.url}/v1", api_key="sk-test")
            with using_session(session):
                call_id = _agent(client, "gpt-4o", stream)
            provider.shutdown()
        elif client_name == "openllmetry":
            os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
            from opentelemetry import trace
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor

            provider = _provider(
                JsonExporter(f"{ctxweb}/v1/traces", {"Authorization": f"Bearer {key}"})
            )
            OpenAIInstrumentor().instrument()
            from openai import OpenAI

            client = OpenAI(base_url=f"{api.url}/v1", api_key="sk-test")
            with trace.get_tracer("agent").start_as_current_span("agent run") as run:
                trace_id = format(run.get_span_context().trace_id, "032x")
                call_id = _agent(client, "gpt-4o", stream)
            provider.shutdown()
        elif client_name == "langfuse":
            os.environ["LANGFUSE_PUBLIC_KEY"] = "pk-lf-ctxweb"
            os.environ["LANGFUSE_SECRET_KEY"] = key
            os.environ["LANGFUSE_HOST"] = ctxweb
            os.environ["LANGFUSE_BASE_URL"] = ctxweb
            from langfuse import get_client, propagate_attributes
            from langfuse.openai import OpenAI

            langfuse = get_client()
            client = OpenAI(base_url=f"{api.url}/v1", api_key="sk-test")
            with propagate_attributes(session_id=session):
                call_id = _agent(client, "gpt-4o", stream)
            langfuse.flush()
            langfuse.shutdown()
        else:
            raise SystemExit(f"unknown client {client_name!r}")
        print(json.dumps({"trace_id": trace_id, "call_id": call_id, "requests": api.requests}))


if __name__ == "__main__":
    main(sys.argv[1:])

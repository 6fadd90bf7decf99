"""The setup page: how an agent that is already instrumented reaches this server with no ctxweb
code: the exact environment variables and snippets for an OTLP exporter, OpenInference,
OpenLLMetry and the Langfuse SDK, for this server's address and the project's key."""

from __future__ import annotations

import shlex

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from ctxweb.front.access import page_access


def setup_snippets(base: str, project: str) -> list[dict[str, str]]:
    """Each way in: an id, a title, what it is for, and the text to copy (``$CTXWEB_API_KEY``
    standing for the key)."""
    otlp = (
        f"export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={base}/v1/traces\n"
        'export OTEL_EXPORTER_OTLP_TRACES_HEADERS="Authorization=Bearer%20$CTXWEB_API_KEY"\n'
        "export OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf\n"
        "# OpenTelemetry's own GenAI instrumentations: record the messages on the spans\n"
        "export OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental\n"
        "export OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY\n"
        "export OTEL_SERVICE_NAME=my-agent"
    )
    openinference = (
        "# pip install openinference-instrumentation-openai opentelemetry-sdk \\\n"
        "#     opentelemetry-exporter-otlp-proto-http\n"
        "import os\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import BatchSpanProcessor\n"
        "from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter\n"
        "from openinference.instrumentation import using_session\n"
        "from openinference.instrumentation.openai import OpenAIInstrumentor\n\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(\n"
        f'    endpoint="{base}/v1/traces",\n'
        '    headers={"Authorization": f"Bearer {os.environ[\'CTXWEB_API_KEY\']}"},\n'
        ")))\n"
        "OpenAIInstrumentor().instrument(tracer_provider=provider)\n\n"
        'with using_session("my-session"):  # one ctxweb session per conversation\n'
        "    run_agent()"
    )
    openllmetry = (
        "# pip install traceloop-sdk\n"
        f"export TRACELOOP_BASE_URL={base}\n"
        'export TRACELOOP_HEADERS="Authorization=Bearer%20$CTXWEB_API_KEY"\n'
        "export TRACELOOP_TRACE_CONTENT=true\n"
        "# then, in the agent: from traceloop.sdk import Traceloop; Traceloop.init()"
    )
    langfuse = (
        "# pip install langfuse; use langfuse.openai's OpenAI, or any Langfuse integration\n"
        f"export LANGFUSE_HOST={base}\n"
        "export LANGFUSE_PUBLIC_KEY=pk-lf-ctxweb        # any value: ctxweb reads the secret\n"
        'export LANGFUSE_SECRET_KEY="$CTXWEB_API_KEY"'
    )
    curl = (
        f"curl -X POST {shlex.quote(base + '/v1/traces')} \\\n"
        '  -H "Authorization: Bearer $CTXWEB_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        "  -d @export.json   # an OTLP JSON export"
    )
    return [
        {
            "id": "otlp",
            "title": "Any OpenTelemetry exporter",
            "help": "OpenTelemetry GenAI instrumentations (opentelemetry-instrumentation-openai-v2"
            " and others), OpenLLMetry, OpenInference or your own spans: set the standard"
            " exporter variables. Each model-call span becomes a turn of its session"
            " (session.id or gen_ai.conversation.id, else its trace).",
            "text": otlp,
        },
        {
            "id": "openinference",
            "title": "OpenInference (Phoenix's instrumentations)",
            "help": "The raw request travels in the span, tools and all.",
            "text": openinference,
        },
        {
            "id": "openllmetry",
            "title": "OpenLLMetry (Traceloop)",
            "help": "Traceloop's SDK exports OTLP to TRACELOOP_BASE_URL/v1/traces.",
            "text": openllmetry,
        },
        {
            "id": "langfuse",
            "title": "Langfuse SDK",
            "help": "The SDK sends OTLP to /api/public/otel with Basic auth; ctxweb takes its"
            " key as the secret key. Older SDKs and LiteLLM's callback post batches to"
            " /api/public/ingestion, which ctxweb takes too.",
            "text": langfuse,
        },
        {
            "id": "curl",
            "title": "By hand",
            "help": "An OTLP JSON export (protobuf too, gzip or not); re-sending a span adds"
            " nothing.",
            "text": curl,
        },
    ]


@login_required
def setup(request: HttpRequest) -> HttpResponse:
    """``/setup/``: connect an instrumented agent."""
    access = page_access(request)
    base = request.build_absolute_uri("/").rstrip("/")
    name = shlex.quote(access.project.name)
    return render(
        request,
        "contexts/setup.html",
        {
            "access": access,
            "base": base,
            "snippets": setup_snippets(base, access.project.name),
            "key_command": f"python manage.py create_api_key --project {name} --role ingest",
            "rest_url": request.build_absolute_uri(reverse("api-docs")),
        },
    )

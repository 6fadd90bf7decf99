"""The setup page: how an agent reaches this server with no ctxweb code: through the recording
proxy (Claude Code, Codex CLI, the openai and anthropic SDKs, aider) or by its own instrumentation
(an OTLP exporter, OpenInference, OpenLLMetry, the Langfuse SDK): the exact environment variables,
settings and snippets for this server's address and the project's key."""

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
    claude_code = (
        f"export ANTHROPIC_BASE_URL={base}/proxy/anthropic\n"
        'export ANTHROPIC_CUSTOM_HEADERS="X-Ctxweb-Key: $CTXWEB_API_KEY"\n'
        "# Let an operator's compaction reach the next call (managed mode): add, on its own line,\n"
        "#   X-Ctxweb-Managed: 1\n"
        "claude"
    )
    codex = (
        "# ~/.codex/config.toml\n"
        'model_provider = "ctxweb"\n\n'
        "[model_providers.ctxweb]\n"
        'name = "OpenAI through ctxweb"\n'
        f'base_url = "{base}/proxy/openai/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        'env_http_headers = { "X-Ctxweb-Key" = "CTXWEB_API_KEY" }'
    )
    sdks = (
        "import os\n"
        "from openai import OpenAI\n"
        "from anthropic import Anthropic\n\n"
        'ctxweb = {"X-Ctxweb-Key": os.environ["CTXWEB_API_KEY"], "X-Ctxweb-Session": "my-run"}\n'
        f'openai = OpenAI(base_url="{base}/proxy/openai/v1", default_headers=ctxweb)\n'
        f'claude = Anthropic(base_url="{base}/proxy/anthropic", default_headers=ctxweb)'
    )
    aider = (
        "# .aider.model.settings.yml\n"
        "- name: openai/gpt-4o\n"
        "  extra_params:\n"
        "    extra_headers:\n"
        "      X-Ctxweb-Key: <your ctxweb key>\n"
        "# then:\n"
        f"aider --openai-api-base {base}/proxy/openai/v1 --model openai/gpt-4o"
    )
    return [
        {
            "id": "claude-code",
            "title": "Claude Code, through the recording proxy",
            "help": "Point the agent's model API at ctxweb: calls go on to the provider unchanged"
            " (your provider key stays where it is) and every call becomes a turn. With"
            " X-Ctxweb-Managed: 1, an operator's Apply changes what the model receives on the"
            " next call, and Undo changes it back.",
            "text": claude_code,
        },
        {
            "id": "codex",
            "title": "Codex CLI, through the proxy",
            "help": "A model provider whose base URL is ctxweb's, with the key as a header.",
            "text": codex,
        },
        {
            "id": "sdks",
            "title": "The openai and anthropic SDKs, through the proxy",
            "help": "X-Ctxweb-Session names the session; without it, a call that extends a recent"
            " call joins its session and side calls start their own.",
            "text": sdks,
        },
        {
            "id": "aider",
            "title": "aider, through the proxy",
            "help": "aider calls models through LiteLLM, which sends extra headers per model.",
            "text": aider,
        },
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

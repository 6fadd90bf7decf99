"""The setup page: how an agent reaches this server with no ctxweb code: through the recording
proxy (Claude Code, Codex CLI, the openai and anthropic SDKs, OpenCode, aider: for each, the key,
naming the session and managed mode) or by its own instrumentation (an OTLP exporter,
OpenInference, OpenLLMetry, the Langfuse SDK): the exact environment variables, settings and
snippets for this server's address and the project's key."""

from __future__ import annotations

import shlex
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from ctxweb.front.access import page_access

#: What each proxy snippet's options add.
SESSION_LABEL = (
    "Name the session (optional: without it, each conversation is a session of its own, named"
    " by time; with it, every call with that name joins one session)"
)
MANAGED_LABEL = (
    "Managed mode (optional: once an operator applies a strategy to the session, the agent's"
    " next call reaches the model compacted, with its tools and instructions; Undo changes it"
    " back)"
)


def setup_snippets(base: str, project: str) -> list[dict[str, Any]]:
    """Each way in: an id, a title, what it is for, the text to copy (``$CTXWEB_API_KEY``
    standing for the key) and, for the proxy's, its ``options``: the lines that name the session
    and turn managed mode on."""
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
    proxy_anthropic, proxy_openai = f"{base}/proxy/anthropic", f"{base}/proxy/openai/v1"
    # Claude Code: ANTHROPIC_CUSTOM_HEADERS holds one "Name: value" header a line (a
    # double-quoted shell string may span lines, and expands the key in it)
    claude_code = (
        f"export ANTHROPIC_BASE_URL={proxy_anthropic}\n"
        'export ANTHROPIC_CUSTOM_HEADERS="X-Ctxweb-Key: $CTXWEB_API_KEY"\n'
        "claude"
    )
    claude_session = (
        "# one header a line: the key, then the session's name\n"
        'export ANTHROPIC_CUSTOM_HEADERS="X-Ctxweb-Key: $CTXWEB_API_KEY\n'
        'X-Ctxweb-Session: my-task"'
    )
    claude_managed = (
        "# one header a line: the key, the session's name (optional), managed mode\n"
        'export ANTHROPIC_CUSTOM_HEADERS="X-Ctxweb-Key: $CTXWEB_API_KEY\n'
        "X-Ctxweb-Session: my-task\n"
        'X-Ctxweb-Managed: 1"\n'
        "claude --continue   # the next call of the conversation reaches the model compacted"
    )
    codex = (
        "# ~/.codex/config.toml\n"
        'model_provider = "ctxweb"\n\n'
        "[model_providers.ctxweb]\n"
        'name = "OpenAI through ctxweb"\n'
        f'base_url = "{proxy_openai}"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "# the header's value read from the environment: the key stays out of the file\n"
        'env_http_headers = { "X-Ctxweb-Key" = "CTXWEB_API_KEY" }\n\n'
        "# then, in the shell: export CTXWEB_API_KEY=...; codex"
    )
    codex_session = (
        "# in [model_providers.ctxweb], beside env_http_headers\n"
        'http_headers = { "X-Ctxweb-Session" = "my-task" }'
    )
    codex_managed = (
        "# in [model_providers.ctxweb], beside env_http_headers\n"
        'http_headers = { "X-Ctxweb-Session" = "my-task", "X-Ctxweb-Managed" = "1" }\n'
        '# then continue the conversation: codex exec resume --last "..." (or codex resume)'
    )
    sdks = (
        "import os\n"
        "from openai import OpenAI\n"
        "from anthropic import Anthropic\n\n"
        'ctxweb = {"X-Ctxweb-Key": os.environ["CTXWEB_API_KEY"]}\n'
        f'openai = OpenAI(base_url="{proxy_openai}", default_headers=ctxweb)\n'
        f'claude = Anthropic(base_url="{proxy_anthropic}", default_headers=ctxweb)'
    )
    sdks_session = 'ctxweb["X-Ctxweb-Session"] = "my-run"  # before making the clients'
    sdks_managed = (
        'ctxweb["X-Ctxweb-Managed"] = "1"  # before making the clients\n'
        "# then each call sends the agent's whole history, as always: ctxweb sends the model"
        " the managed context"
    )
    opencode = (
        "// opencode.json (in the project, or ~/.config/opencode/opencode.json)\n"
        "{\n"
        '  "$schema": "https://opencode.ai/config.json",\n'
        '  "provider": {\n'
        '    "ctxweb": {\n'
        '      "npm": "@ai-sdk/openai-compatible",\n'
        '      "name": "OpenAI through ctxweb",\n'
        '      "options": {\n'
        f'        "baseURL": "{proxy_openai}",\n'
        '        "apiKey": "{env:OPENAI_API_KEY}",\n'
        '        "headers": { "X-Ctxweb-Key": "{env:CTXWEB_API_KEY}" }\n'
        "      },\n"
        '      "models": { "gpt-4.1": {} }\n'
        "    }\n"
        "  },\n"
        '  "model": "ctxweb/gpt-4.1"\n'
        "}"
    )
    opencode_session = (
        '"headers": { "X-Ctxweb-Key": "{env:CTXWEB_API_KEY}", "X-Ctxweb-Session": "my-task" }'
    )
    opencode_managed = (
        '"headers": { "X-Ctxweb-Key": "{env:CTXWEB_API_KEY}", "X-Ctxweb-Session": "my-task",\n'
        '             "X-Ctxweb-Managed": "1" }'
    )
    aider = (
        "# .aider.model.settings.yml (in your home folder, the repository or the current one)\n"
        "# aider/extra_params applies to every model aider calls, keeping its own settings\n"
        "- name: aider/extra_params\n"
        "  extra_params:\n"
        "    extra_headers:\n"
        "      X-Ctxweb-Key: <your ctxweb key>\n"
        "# then:\n"
        f"aider --openai-api-base {proxy_openai} --model openai/gpt-4.1"
    )
    aider_session = (
        "    extra_headers:\n      X-Ctxweb-Key: <your ctxweb key>\n      X-Ctxweb-Session: my-task"
    )
    aider_managed = (
        "    extra_headers:\n"
        "      X-Ctxweb-Key: <your ctxweb key>\n"
        "      X-Ctxweb-Session: my-task\n"
        '      X-Ctxweb-Managed: "1"'
    )

    def options(session: str, managed: str) -> list[dict[str, str]]:
        return [
            {"id": "session", "label": SESSION_LABEL, "text": session},
            {"id": "managed", "label": MANAGED_LABEL, "text": managed},
        ]

    return [
        {
            "id": "claude-code",
            "title": "Claude Code, through the recording proxy",
            "help": "Point the agent's model API at ctxweb: calls go on to the provider unchanged"
            " (your provider key stays where it is) and every call becomes a turn; each"
            " conversation is a session of its own, its side calls (titles, summaries) apart.",
            "text": claude_code,
            "options": options(claude_session, claude_managed),
        },
        {
            "id": "codex",
            "title": "Codex CLI, through the proxy",
            "help": "A model provider whose base URL is ctxweb's; the key is a header whose value"
            " Codex reads from CTXWEB_API_KEY.",
            "text": codex,
            "options": options(codex_session, codex_managed),
        },
        {
            "id": "sdks",
            "title": "The openai and anthropic SDKs, through the proxy",
            "help": "Any agent built on them: the proxy's base URL and ctxweb's headers.",
            "text": sdks,
            "options": options(sdks_session, sdks_managed),
        },
        {
            "id": "opencode",
            "title": "OpenCode, through the proxy",
            "help": "A provider whose base URL is ctxweb's; OpenCode fills {env:...} from the"
            " environment.",
            "text": opencode,
            "options": options(opencode_session, opencode_managed),
        },
        {
            "id": "aider",
            "title": "aider, through the proxy",
            "help": "aider calls models through LiteLLM, which sends extra headers per model."
            " Name the session: aider moves its files' message to the end of every call, so no"
            " call extends the one before and, unnamed, each call is a session of its own.",
            "text": aider,
            "options": options(aider_session, aider_managed),
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
            "key_command": f"make key PROJECT={name}",
            "key_manage": (
                f".venv/bin/python manage.py create_api_key --project {name} --role ingest"
            ),
            "rest_url": request.build_absolute_uri(reverse("api-docs")),
        },
    )

"""The OpenAPI schema's additions: the contract's error shape on every operation, path
parameters as the URL converters match them, and links from what creates a resource to what
reads it."""

from __future__ import annotations

from typing import Any

#: The error shape every API error uses (``ctxweb.api.errors``), as an OpenAPI component.
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["code", "message", "fields"],
        }
    },
    "required": ["error"],
}
ERROR_STATUSES = {
    "400": "Bad input: `fields` names each bad field by its path.",
    "401": "No valid credentials (a missing, unknown or revoked API key).",
    "403": "Not allowed: only operators apply; also a session login's missing CSRF token.",
    "404": "Not found, or in another project.",
    "429": "Over the rate limit: retry after `Retry-After` seconds.",
}
#: Statuses that only some reads answer, by the path's last fixed segment.
READ_STATUSES = {
    "artifacts": {"409": "An ambiguous short artifact id (it starts several): use more of it."},
}
BODY_STATUSES = {
    "409": "A conflict: a turn_id reused with another body, or a session already busy.",
    "413": "The body is over the size limit.",
    "415": "The body's media type is not one this endpoint reads.",
}


def _examples() -> dict[str, Any]:
    from drf_spectacular.utils import OpenApiExample

    request = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Why does test_parse fail?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "src/parse.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "def parse(text): ..."},
        ],
    }
    return {
        "turn": OpenApiExample(
            "An OpenAI chat call",
            value={"format": "openai-chat", "request": request, "turn_id": "call-1"},
            request_only=True,
        ),
        "preview": OpenApiExample(
            "Preview ctxweb-auto on a request",
            value={
                "format": "openai-chat",
                "request": request,
                "strategy": "ctxweb-auto",
                "params": {"target_tokens": 50},
            },
            request_only=True,
        ),
        "session_preview": OpenApiExample(
            "Preview on the latest context",
            value={"strategy": "baseagent-prune", "params": {}},
            request_only=True,
        ),
        "apply": OpenApiExample(
            "Apply a strategy",
            value={"strategy": "baseagent-middle-out", "params": {}},
            request_only=True,
        ),
        "replay": OpenApiExample(
            "Replay the session under ctxweb-auto and nanobot's trim",
            value={
                "policies": [
                    {"strategy": "ctxweb-auto", "params": {"target_fraction": 0.5}},
                    {
                        "label": "nanobot 8K",
                        "strategy": "nanobot-trim",
                        "params": {"budget": 8000},
                        "trigger": {"tokens": 8000},
                    },
                ]
            },
            request_only=True,
        ),
        "policy": OpenApiExample(
            "Compact automatically past 90% of usable",
            value={
                "policy": {
                    "auto": {"strategy": "ctxweb-auto", "enabled": True},
                    "trigger": {"fraction": 0.9},
                }
            },
            request_only=True,
        ),
    }


def example(name: str) -> Any:
    """The request example ``name`` (``turn``, ``preview``, ``session_preview``, ``apply``,
    ``replay``, ``policy``): the docs show it and the fuzzer's examples phase sends it."""
    return _examples()[name]


#: OpenAPI links: where what an operation answers leads next (clients and stateful fuzzers follow
#: them). (path, method, statuses) -> {link name: (operationId, parameters)}.
SESSION = {"external_id": "$request.path.external_id"}
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict[str, str]]]] = {
    ("/api/v1/sessions/{external_id}/turns", "post"): {
        "GetSession": ("v1_sessions_retrieve", SESSION),
        "ListTurns": ("v1_sessions_turns_list", SESSION),
        "GetTurn": ("v1_sessions_turns_retrieve", {**SESSION, "index": "$response.body#/index"}),
        "GetContext": ("v1_sessions_context_retrieve", SESSION),
        "PreviewSession": ("v1_sessions_preview_create", SESSION),
        "ApplyStrategy": ("v1_sessions_operations_create", SESSION),
        "SetPolicy": ("v1_sessions_partial_update", SESSION),
    },
    ("/api/v1/sessions/{external_id}/operations", "post"): {
        "GetOperation": ("v1_operations_retrieve", {"operation_id": "$response.body#/id"}),
        "UndoOperation": ("v1_operations_undo_create", {"operation_id": "$response.body#/id"}),
        "GetContext": ("v1_sessions_context_retrieve", SESSION),
    },
    ("/api/v1/import", "post"): {
        "GetImport": ("v1_imports_retrieve", {"job_id": "$response.body#/id"}),
    },
}


def add_links(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the :data:`LINKS` on every success response."""
    for (path, method), links in LINKS.items():
        operation = result.get("paths", {}).get(path, {}).get(method)
        if operation is None:
            continue
        for status_code, response in operation.get("responses", {}).items():
            if status_code.startswith("2"):
                response["links"] = {
                    name: {"operationId": target, "parameters": parameters}
                    for name, (target, parameters) in links.items()
                }
    return result


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the error responses of every operation, and path
    parameters as the URL converters match them (``int``: digits; ``str``: no slash)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"schema": {"$ref": "#/components/schemas/Error"}}
    for path, methods in result.get("paths", {}).items():
        for method, operation in methods.items():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") != "path":
                    continue
                schema = parameter.setdefault("schema", {})
                if schema.get("type") == "integer":
                    schema.setdefault("minimum", 0)
                elif schema.get("type") == "string":
                    schema.setdefault("pattern", "^[^/]+$")
            if path.endswith("/health"):
                continue
            statuses = dict(ERROR_STATUSES)
            if method in ("post", "put", "patch"):
                statuses |= BODY_STATUSES
            fixed = [p for p in path.strip("/").split("/") if not p.startswith("{")]
            if method == "get" and fixed:
                statuses |= READ_STATUSES.get(fixed[-1], {})
            responses = operation.setdefault("responses", {})
            # An endpoint that can answer text renders its errors as text too (same JSON body).
            types = {t for r in responses.values() for t in r.get("content", {})}
            content = dict.fromkeys(sorted(types | {"application/json"}), error)
            for status_code, description in statuses.items():
                responses.setdefault(status_code, {"description": description, "content": content})
    return result

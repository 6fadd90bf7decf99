"""The OpenAPI schema's additions: the contract's error shape on every operation, and path
parameters as the URL converters match them."""

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
BODY_STATUSES = {
    "409": "A conflict: a turn_id reused with another body, or a session already busy.",
    "413": "The body is over the size limit.",
    "415": "The body's media type is not one this endpoint reads.",
}


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
            responses = operation.setdefault("responses", {})
            # An endpoint that can answer text renders its errors as text too (same JSON body).
            types = {t for r in responses.values() for t in r.get("content", {})}
            content = dict.fromkeys(sorted(types | {"application/json"}), error)
            for status_code, description in statuses.items():
                responses.setdefault(status_code, {"description": description, "content": content})
    return result

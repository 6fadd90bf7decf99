"""The REST API's authentication: Bearer API keys (:mod:`ctxweb.authentication`), and how the
schema documents them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from ctxweb.authentication import ApiKeyAuthentication, ApiKeyUser

__all__ = ["ApiKeyAuthentication", "ApiKeyUser", "BearerKeyScheme"]


class BearerKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents ``Authorization: Bearer <key>`` in the schema (and lets the docs page send it)."""

    target_class = "ctxweb.api.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "a project's API key"}

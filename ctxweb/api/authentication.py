"""Bearer API keys for the REST API: the key's project is the caller's scope."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from ctxweb.accounts.selectors import api_key_get_active
from ctxweb.accounts.services import api_key_touch

if TYPE_CHECKING:
    from ctxweb.accounts.models import ApiKey


class ApiKeyUser(AnonymousUser):
    """The request's user when it authenticated with an API key (not a person)."""

    def __init__(self, key: ApiKey) -> None:
        self.key = key

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    def __str__(self) -> str:
        return f"key {self.key.prefix}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <key>``. ``request.auth`` is the :class:`ApiKey`."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("The Authorization header has no key.")
        key = api_key_get_active(raw_key=raw)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        api_key_touch(key=key)
        return ApiKeyUser(key), key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class BearerKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents ``Authorization: Bearer <key>`` in the schema (and lets the docs page send it)."""

    target_class = "ctxweb.api.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "a project's API key"}

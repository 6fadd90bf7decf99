"""API keys as DRF authentication, for every interface that takes one: ``Bearer <key>`` (the REST
API, OTLP exporters), and HTTP Basic with the key as the password (what the Langfuse SDK sends:
its public key as user, its secret key as password, so a user sets the secret key to a ctxweb
key). The key's project is the caller's scope."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser
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


class BasicKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Basic base64(anything:<ctxweb key>)``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request)
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise exceptions.AuthenticationFailed("Malformed Basic credentials.") from None
        _, _, raw = decoded.partition(":")
        key = api_key_get_active(raw_key=raw.strip()) if raw.strip() else None
        if key is None:
            raise exceptions.AuthenticationFailed(
                "Invalid or revoked API key: send a ctxweb key as the Basic password."
            )
        api_key_touch(key=key)
        return ApiKeyUser(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Basic realm="ctxweb"'

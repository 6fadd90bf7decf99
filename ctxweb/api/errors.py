"""The API's one error shape: ``{"error": {"code", "message", "fields": {path: why}}}``."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response

from compaction.errors import FormatError, StrategyError, SummarizerError
from ctxweb.contexts.services.budgets import Busy, OverBudget


class ApiError(exceptions.APIException):
    """An error raised by our own API code with a code, message and field paths."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        status_code: int = status.HTTP_400_BAD_REQUEST,
        fields: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, code)
        self.status_code = status_code
        self.code = code
        self.fields = fields or {}


def error_response(
    code: str, message: str, status_code: int, fields: dict[str, str] | None = None
) -> Response:
    return Response(
        {"error": {"code": code, "message": message, "fields": fields or {}}}, status=status_code
    )


def _flatten(detail: Any, prefix: str = "") -> dict[str, str]:
    """DRF's nested validation errors as ``{"path.to.field": "why"}``."""
    if isinstance(detail, dict):
        out: dict[str, str] = {}
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            out.update(_flatten(value, f"{prefix}.{name}" if prefix and name else prefix or name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return {prefix or "request": " ".join(str(item) for item in detail)}
        out = {}
        for index, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}.{index}" if prefix else str(index)))
        return out
    return {prefix or "request": str(detail)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Render every API error in the contract's shape."""
    if isinstance(exc, FormatError | StrategyError):
        return error_response("invalid", str(exc), 400, exc.fields())
    if isinstance(exc, SummarizerError):  # the configured LLM failed: not the caller's fault
        return error_response("summarizer_failed", f"The summarizer failed: {exc}", 502)
    if isinstance(exc, Busy):
        busy = error_response(
            "busy",
            f"Every preview slot of this server stayed busy ({exc}): try again shortly.",
            503,
        )
        busy["Retry-After"] = "5"
        return busy
    if isinstance(exc, OverBudget):
        return error_response(
            "too_slow",
            f"The preview {exc} and was stopped. Preview an earlier turn (`turn`), or apply"
            " the strategy as an operation: operations run in the background without this limit.",
            422,
        )
    if isinstance(exc, ApiError):
        return error_response(exc.code, str(exc.detail), exc.status_code, exc.fields)
    # Imported here: DRF's views read the parser and pagination settings as they load, and the
    # parsers import this module, so it must not load DRF's views itself.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(f"{k}: {v}" for k, v in fields.items()) or "Invalid request."
        response.data = {"error": {"code": "invalid", "message": message, "fields": fields}}
        return response
    code = getattr(exc, "default_code", "error")
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else code
        message = str(exc.detail)
    else:
        message = str(exc)
    response.data = {"error": {"code": code, "message": message, "fields": {}}}
    return response

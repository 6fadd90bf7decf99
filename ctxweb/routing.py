"""WebSocket routes of every app."""

from typing import Any

from ctxweb.contexts.routing import websocket_urlpatterns as contexts_websockets

websocket_urlpatterns: list[Any] = [*contexts_websockets]

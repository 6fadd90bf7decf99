"""WebSocket routes: ``/ws/sessions/{external_id}/`` (ids may hold slashes)."""

from typing import Any

from django.urls import path

from ctxweb.live.consumers import SessionConsumer

websocket_urlpatterns: list[Any] = [
    path("ws/sessions/<path:external_id>/", SessionConsumer.as_asgi()),
]

"""WebSocket routes of the contexts app."""

from django.urls import path

from ctxweb.contexts.consumers import SessionConsumer

websocket_urlpatterns = [
    path("ws/sessions/<path:external_id>/", SessionConsumer.as_asgi()),
]

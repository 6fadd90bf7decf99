"""Proxy routes: an agent's base URL is ``{ctxweb}/proxy/openai/v1``, or
``{ctxweb}/proxy/anthropic`` (the Anthropic SDK adds ``/v1``)."""

from django.urls import path

from ctxweb.proxy.views import relay

urlpatterns = [
    path("proxy/openai/v1/<path:rest>", relay, {"provider": "openai"}, name="proxy-openai"),
    path(
        "proxy/anthropic/v1/<path:rest>", relay, {"provider": "anthropic"}, name="proxy-anthropic"
    ),
]

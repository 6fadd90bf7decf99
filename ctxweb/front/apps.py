from django.apps import AppConfig


class FrontConfig(AppConfig):
    """The dashboard's pages (an app so that its template tags load)."""

    name = "ctxweb.front"
    label = "front"

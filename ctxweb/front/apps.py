from django.apps import AppConfig


class FrontConfig(AppConfig):
    """The dashboard's pages (an app so that its template tags load)."""

    name = "ctxweb.front"
    label = "front"

    def ready(self) -> None:
        from django.core import checks

        from ctxweb.origins import check_origins_cover_hosts

        # The pages open their WebSocket from their own origin: `check --deploy` names a host
        # whose pages would be refused.
        checks.register(check_origins_cover_hosts, checks.Tags.security, deploy=True)

from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "ctxweb.contexts"
    label = "contexts"
    verbose_name = "Contexts"

    def ready(self) -> None:
        # Ingestion's one hook upward: the automatic policy hears of every stored turn.
        from ctxweb.contexts.services import ingest, policy

        ingest.turn_stored.connect(
            policy.operation_auto_after_turn, dispatch_uid="ctxweb-policy-after-turn"
        )

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
        # Open sockets hear at once of a lost membership or a deactivated user.
        from django.conf import settings
        from django.db.models.signals import post_delete, post_save

        from ctxweb.accounts.models import Membership
        from ctxweb.contexts import revocation

        post_delete.connect(
            revocation.membership_removed, sender=Membership, dispatch_uid="ctxweb-member-gone"
        )
        post_save.connect(
            revocation.user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="ctxweb-user-saved"
        )
        post_delete.connect(
            revocation.user_deleted,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="ctxweb-user-gone",
        )

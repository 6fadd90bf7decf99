from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "ctxweb.accounts"
    label = "accounts"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from ctxweb.accounts import signals  # noqa: F401  (connects the key cache's handlers)

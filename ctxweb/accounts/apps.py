from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "ctxweb.accounts"
    label = "accounts"
    verbose_name = "Projects and access"

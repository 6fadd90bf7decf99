from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "ctxweb.contexts"
    label = "contexts"
    verbose_name = "Contexts"

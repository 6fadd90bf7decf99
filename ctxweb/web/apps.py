from django.apps import AppConfig


class WebConfig(AppConfig):
    """Listed first in ``INSTALLED_APPS``, so that its ``runserver`` (uvicorn, as production
    serves) is the one ``manage.py`` runs, not Django's WSGI development server, which serves
    neither WebSockets nor the proxy's ASGI relay."""

    name = "ctxweb.web"
    label = "web"

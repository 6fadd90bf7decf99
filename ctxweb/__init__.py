"""ctxweb: the Django project (settings, URLs, ASGI, Celery) and its apps."""

from ctxweb.celery import app as celery_app

__all__ = ["celery_app"]

"""The Celery application: configured from Django's settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")

app = Celery("ctxweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Tasks are an interface of their own (ctxweb/tasks.py), not an app's module.
app.autodiscover_tasks(["ctxweb"])

"""WSGI entry point, for servers without WebSockets (the dashboard then polls)."""

import os

from django.core.wsgi import get_wsgi_application

from ctxweb.datadir import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
prepare()  # the data folder and the generated secret, before the settings are read
application = get_wsgi_application()

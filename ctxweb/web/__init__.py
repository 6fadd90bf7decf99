"""The web server's Django app: ``manage.py runserver`` serves with :mod:`ctxweb.server`."""

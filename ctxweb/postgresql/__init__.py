"""ctxweb's PostgreSQL database backend: Django's own (``django.db.backends.postgresql``), with a
health check of a kept connection that costs no round trip (:mod:`ctxweb.postgresql.base`).
``ctxweb.settings`` selects it for a ``DATABASE_URL`` on PostgreSQL."""

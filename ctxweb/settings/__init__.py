"""ctxweb's settings for every process that runs it: ``make run``, daphne, Celery workers.

Everything lives in :mod:`ctxweb.settings.base`; the test suite runs on :mod:`ctxweb.settings.test`.
"""

from ctxweb.settings.base import *  # noqa: F403

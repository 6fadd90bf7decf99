"""Login lockouts: django-axes' database handler, counting an address across usernames too.

axes (configured in the settings, ``AXES_*``) locks a (username, client address) pair after
``CTXWEB_LOGIN_FAILURE_LIMIT`` wrong passwords: a stranger elsewhere cannot lock the owner out.
:class:`LoginLockoutHandler` also locks a client address once the wrong passwords of every
username from it reach ``CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT``, so a spray of usernames from one
address is stopped as from one address; axes has one failure limit for all of its lockout
parameters, where the address needs a higher one than the pair. The address is
:func:`ctxweb.addresses.client_address`.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum


class LoginLockoutHandler(AxesDatabaseHandler):  # type: ignore[misc]  # axes has no types
    """axes' database handler (``AXES_HANDLER``) whose failure count reaches the lockout as soon
    as the request's address has ``CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT`` recent failures, for
    any usernames; otherwise it is the pair's own count."""

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        failures = int(super().get_failures(request, credentials))
        address = getattr(request, "axes_ip_address", None)
        if address is None:
            return failures
        attempts = AccessAttempt.objects.filter(ip_address=address)
        if settings.AXES_COOLOFF_TIME is not None:
            attempts = attempts.filter(attempt_time__gte=get_cool_off_threshold(request))
        spread = attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
        if spread >= settings.CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT:
            return max(failures, int(get_failure_limit(request, credentials)))
        return failures

"""Password guessing (django-axes, ctxweb.accounts.lockout): wrong passwords lock a (username,
client address) pair, never the username from every address, so a stranger cannot lock the owner
out; a spray of usernames from one address is stopped as from one address; the client address
comes from ``X-Forwarded-For`` only through the configured proxies' hops. The 20th wrong
password is refused without being checked, with a clear page; the lockout expires as
configured; an admin lifts it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher, make_password
from django.contrib.auth.models import User
from django.db.models import F
from django.test import Client
from django.utils import timezone

from tests.support.world import World

pytestmark = pytest.mark.django_db


class CountingHasher(MD5PasswordHasher):
    """The test hasher, counting every password it checks."""

    checked = 0

    def verify(self, password: str, encoded: str) -> bool:
        CountingHasher.checked += 1
        return super().verify(password, encoded)


@pytest.fixture
def counting(settings: Any) -> type[CountingHasher]:
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    CountingHasher.checked = 0
    return CountingHasher


def login(
    client: Client,
    username: str,
    password: str,
    address: str = "203.0.113.7",
    forwarded: str | None = None,
) -> Any:
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=address,
        **extra,
    )


def sprayed_users() -> None:
    """Forty users, each with a password of their own (a sprayed password is checked)."""
    User.objects.bulk_create(
        User(username=f"user-{n}", password=make_password("their-own-password")) for n in range(40)
    )


#: The address of the reverse proxy in front of ctxweb, as the connection shows it.
NGINX = "127.0.0.1"


def test_the_20th_wrong_password_is_refused_without_checking_it(
    world: World, counting: type[CountingHasher], settings: Any
) -> None:
    user = User.objects.create_user("victim", password="right-password-1")
    limit = settings.AXES_FAILURE_LIMIT
    assert limit < 20
    client = Client()
    answers = [login(client, "victim", f"guess-{n}").status_code for n in range(1, 21)]
    assert answers[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert answers[limit:] == [429] * (20 - limit)
    assert counting.checked <= limit, "passwords sent after the lockout are never checked"
    checked = counting.checked
    locked = login(client, "victim", "right-password-1")
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert b"victim" in locked.content
    assert counting.checked == checked
    assert "_auth_user_id" not in client.session
    assert user.pk


def test_ten_wrong_passwords_lock_only_that_username_from_that_address(
    world: World, settings: Any
) -> None:
    limit = settings.AXES_FAILURE_LIMIT
    answers = [
        login(Client(), "owner", f"guess-{n}", address="198.51.100.66").status_code
        for n in range(limit)
    ]
    assert answers == [200] * (limit - 1) + [429]  # the limit-th wrong password locks
    assert login(Client(), "owner", "pw-owner-123", address="198.51.100.66").status_code == 429
    # The owner, from their own address, logs in; so does a teammate from the stranger's.
    assert login(Client(), "owner", "pw-owner-123", address="192.0.2.1").status_code == 302
    assert login(Client(), "teammate", "pw-team-123", address="198.51.100.66").status_code == 302


def test_a_stranger_repeating_the_guesses_never_locks_the_owner_out(
    world: World, settings: Any
) -> None:
    for round_ in range(3):
        for n in range(settings.AXES_FAILURE_LIMIT):
            login(Client(), "owner", f"guess-{round_}-{n}", address=f"198.51.100.{round_ + 1}")
        assert login(Client(), "owner", "pw-owner-123", address="192.0.2.1").status_code == 302


def test_the_lockout_expires_after_the_configured_minutes(world: World, settings: Any) -> None:
    from axes.models import AccessAttempt

    settings.AXES_COOLOFF_TIME = 5 / 60  # CTXWEB_LOGIN_LOCKOUT_MINUTES=5
    for n in range(settings.AXES_FAILURE_LIMIT):
        login(Client(), "owner", f"guess-{n}")
    assert login(Client(), "owner", "pw-owner-123").status_code == 429
    # Four minutes later: still locked.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=4))
    assert login(Client(), "owner", "pw-owner-123").status_code == 429
    # Five minutes and a second after the last wrong password: the right one logs in.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=5, seconds=1))
    assert login(Client(), "owner", "pw-owner-123").status_code == 302


def test_an_address_lockout_expires_after_the_configured_minutes(
    world: World, settings: Any
) -> None:
    from axes.models import AccessAttempt

    settings.AXES_COOLOFF_TIME = 5 / 60
    for n in range(settings.CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT):
        login(Client(), f"user-{n}", "Summer2026!")
    assert login(Client(), "owner", "pw-owner-123").status_code == 429
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=4))
    assert login(Client(), "owner", "pw-owner-123").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=5, seconds=1))
    assert login(Client(), "owner", "pw-owner-123").status_code == 302


def test_a_spray_of_usernames_from_one_address_is_stopped(
    world: World, counting: type[CountingHasher], settings: Any
) -> None:
    limit = settings.CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT
    assert settings.AXES_FAILURE_LIMIT < limit < 40
    sprayed_users()
    answers = [
        login(Client(), f"user-{n}", "Summer2026!", address="203.0.113.9").status_code
        for n in range(40)
    ]
    assert answers == [200] * (limit - 1) + [429] * (41 - limit)
    assert counting.checked == limit, "passwords sent after the lockout are never checked"
    assert login(Client(), "owner", "pw-owner-123", address="203.0.113.9").status_code == 429
    assert login(Client(), "owner", "pw-owner-123", address="203.0.113.10").status_code == 302


def test_logging_in_with_ones_own_password_does_not_reset_a_spray(
    world: World, settings: Any
) -> None:
    limit = settings.CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT
    for n in range(limit - 1):
        login(Client(), f"user-{n}", "Summer2026!", address="203.0.113.9")
    # The sprayer has an account of their own: its login clears its own failures only.
    assert login(Client(), "outsider", "pw-out-123", address="203.0.113.9").status_code == 302
    assert login(Client(), "user-last", "Summer2026!", address="203.0.113.9").status_code == 429
    assert login(Client(), "outsider", "pw-out-123", address="203.0.113.9").status_code == 429


def test_a_forged_x_forwarded_for_is_ignored_without_a_configured_proxy(
    world: World, counting: type[CountingHasher], settings: Any
) -> None:
    assert settings.CTXWEB_PROXY_COUNT == 0  # the default: clients connect directly
    for n in range(settings.AXES_FAILURE_LIMIT):
        forged = f"192.0.2.{n + 1}"
        login(Client(), "owner", f"guess-{n}", address="198.51.100.66", forwarded=forged)
    locked = login(
        Client(), "owner", "pw-owner-123", address="198.51.100.66", forwarded="192.0.2.1"
    )
    assert locked.status_code == 429
    assert counting.checked == settings.AXES_FAILURE_LIMIT
    # Naming the stranger's address in the header does not lock the owner out either.
    assert login(Client(), "owner", "pw-owner-123", forwarded="198.51.100.66").status_code == 302


def test_behind_one_proxy_the_rightmost_hop_is_the_client(
    world: World, counting: type[CountingHasher], settings: Any
) -> None:
    """nginx appends the address it saw to whatever the client sent: a forged leftmost entry
    changes nothing, and 40 usernames sprayed from one real address are stopped as from one."""
    settings.CTXWEB_PROXY_COUNT = 1
    limit = settings.CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT
    sprayed_users()
    answers = [
        login(
            Client(),
            f"user-{n}",
            "Summer2026!",
            address=NGINX,
            forwarded=f"10.9.{n}.1, 198.51.100.66",
        ).status_code
        for n in range(40)
    ]
    assert answers == [200] * (limit - 1) + [429] * (41 - limit)
    assert counting.checked == limit
    # The owner, through the same proxy from their own address, logs in.
    assert (
        login(Client(), "owner", "pw-owner-123", address=NGINX, forwarded="192.0.2.1").status_code
        == 302
    )
    # A client that forges the owner's address as its own first entry is still the stranger.
    forged = login(
        Client(), "owner", "pw-owner-123", address=NGINX, forwarded="192.0.2.1, 198.51.100.66"
    )
    assert forged.status_code == 429


def test_an_admin_lifts_a_lockout_in_the_admin(world: World, settings: Any) -> None:
    User.objects.create_user("victim", password="right-password-1")
    for n in range(settings.AXES_FAILURE_LIMIT):
        login(Client(), "victim", f"guess-{n}")
    assert login(Client(), "victim", "right-password-1").status_code == 429
    from axes.models import AccessAttempt

    admin = User.objects.create_superuser("root", password="pw-root-123")
    staff = Client()
    staff.force_login(admin)
    attempts = list(AccessAttempt.objects.values_list("pk", flat=True))
    assert attempts
    response = staff.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": attempts, "post": "yes"},
    )
    assert response.status_code == 302
    assert login(Client(), "victim", "right-password-1").status_code == 302


def test_a_successful_login_before_the_limit_clears_the_count(world: World, settings: Any) -> None:
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        login(Client(), "owner", f"guess-{n}")
    assert login(Client(), "owner", "pw-owner-123").status_code == 302
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        login(Client(), "owner", f"guess-again-{n}")
    assert login(Client(), "owner", "pw-owner-123").status_code == 302

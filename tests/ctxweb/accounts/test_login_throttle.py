"""Password guessing: wrong passwords lock out a username and a client address (django-axes);
the 20th wrong password is refused without being checked, with a clear page; an admin lifts it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import User
from django.test import Client

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


def login(client: Client, username: str, password: str, address: str = "203.0.113.7") -> Any:
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=address,
    )


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


def test_a_lockout_is_per_username_from_any_address(world: World, settings: Any) -> None:
    User.objects.create_user("victim", password="right-password-1")
    for n in range(settings.AXES_FAILURE_LIMIT):
        login(Client(), "victim", f"guess-{n}", address=f"198.51.100.{n + 1}")
    assert login(Client(), "victim", "right-password-1", address="192.0.2.1").status_code == 429
    # Another user, from another address, logs in.
    assert login(Client(), "owner", "pw-owner-123", address="192.0.2.2").status_code == 302


def test_a_lockout_is_per_address_across_usernames(world: World, settings: Any) -> None:
    for n in range(settings.AXES_FAILURE_LIMIT):
        login(Client(), f"user-{n}", "guess", address="203.0.113.9")
    assert login(Client(), "owner", "pw-owner-123", address="203.0.113.9").status_code == 429
    assert login(Client(), "owner", "pw-owner-123", address="203.0.113.10").status_code == 302


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

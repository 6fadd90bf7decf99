"""Projects (tenants), memberships with a role, and API keys stored hashed."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"


class Project(models.Model):
    name = models.CharField(max_length=100, unique=True)
    mask_secrets = models.BooleanField(
        default=False,
        help_text="Replace secrets found in new messages by [SECRET:<kind>] before storing them.",
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Delete sessions idle for longer than this many days (empty: keep them).",
    )
    default_policy = models.JSONField(
        default=dict,
        blank=True,
        help_text="The policy a new session starts with: auto and trigger, as a session's.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "user"], name="membership_unique_per_project"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"

    @property
    def can_operate(self) -> bool:
        return self.role in (Role.OPERATOR, Role.ADMIN)


class KeyRole(models.TextChoices):
    INGEST = "ingest", "Ingest (post and read)"
    OPERATOR = "operator", "Operator (also apply operations)"


class ApiKey(models.Model):
    """An API key: only its SHA-256 is stored; the key itself is shown once, when created."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(
        max_length=16, help_text="The key's first characters, to tell keys apart."
    )
    key_hash = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=16, choices=KeyRole.choices, default=KeyRole.INGEST)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project}, {self.role})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def can_operate(self) -> bool:
        return self.role == KeyRole.OPERATOR


def hash_key(raw_key: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(raw_key.encode()).hexdigest()

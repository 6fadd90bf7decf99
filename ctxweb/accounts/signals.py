"""Keeping the API key cache true: any saved or deleted key, and any saved or deleted project
(keys carry their project), leaves the cache at once, before and again after the transaction
commits (so a request that read the old row in between cannot keep it cached)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from ctxweb.accounts.models import ApiKey, Project
from ctxweb.accounts.selectors import api_key_forget


def _forget(key_hashes: list[str]) -> None:
    if key_hashes:
        api_key_forget(key_hashes=key_hashes)
        transaction.on_commit(lambda: api_key_forget(key_hashes=key_hashes))


@receiver(post_save, sender=ApiKey, dispatch_uid="ctxweb-apikey-saved")
@receiver(post_delete, sender=ApiKey, dispatch_uid="ctxweb-apikey-deleted")
def api_key_changed(sender: Any, instance: ApiKey, **kwargs: Any) -> None:
    _forget([instance.key_hash])


@receiver(post_save, sender=Project, dispatch_uid="ctxweb-project-saved")
def project_changed(sender: Any, instance: Project, created: bool, **kwargs: Any) -> None:
    if not created:
        _forget(list(ApiKey.objects.filter(project=instance).values_list("key_hash", flat=True)))

"""Model fields of the domain app: a JSON column that gives each object back with its keys in
the order they were written."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast


def json_as_sent(value: Any, dumps: Callable[[Any], str]) -> Any:
    """``value`` as the PostgreSQL driver's parameter of type ``json`` (not ``jsonb``: a
    ``jsonb`` parameter cast to ``json`` would come out with its keys reordered), its text
    written by ``dumps``."""
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if is_psycopg3:
        from psycopg.types.json import Json

        return Json(value, dumps=dumps)
    from psycopg2.extras import Json as Psycopg2Json  # pragma: no cover - ctxweb runs psycopg 3

    return Psycopg2Json(value, dumps=dumps)  # pragma: no cover


class KeyOrderJSONField(models.JSONField):
    """A :class:`~django.db.models.JSONField` that keeps each object's keys in their order.

    On PostgreSQL the column is ``json`` (the text as written) rather than ``jsonb``, which
    stores objects with their keys sorted (shorter first): a tool's schema read back from
    ``jsonb`` is another text than the agent sent (another prompt-cache prefix, another token
    count). SQLite keeps the text as written already: the column there is unchanged.

    What is read (the column, a key of it) keeps the order; a lookup (``data__key__in=...``,
    ``data__has_key``, ``data=...``) compares the column read as ``jsonb``, as on a plain
    JSONField (``json`` has no equality). A query must not group or ``DISTINCT`` the column
    itself (nothing in ctxweb does).
    """

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        # Only what is written is sent as json: a lookup's values stay jsonb (get_db_prep_value),
        # compared with the column read as jsonb (_ReadAsJsonb).
        if connection.vendor != "postgresql" or value is None or hasattr(value, "as_sql"):
            return super().get_db_prep_save(value, connection)
        return json_as_sent(self.get_prep_value(value), partial(json.dumps, cls=self.encoder))

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        # The driver decodes a json value itself (Django reads only jsonb as text): what it gives
        # is the value, a top-level JSON string included (decoding that again would turn "12"
        # into 12).
        if connection.vendor == "postgresql":
            if self.decoder is not None and value is not None:  # decoded as the decoder would
                return super().from_db_value(json.dumps(value), expression, connection)
            return value
        return super().from_db_value(value, expression, connection)

    def get_transform(self, name: str) -> Any:
        found = super().get_transform(name)
        if isinstance(found, type) or found is None:  # a registered transform, not a key
            return found
        return partial(_KeyOrderKeyTransform, name)

    def get_lookup(self, lookup_name: str) -> Any:
        found = super().get_lookup(lookup_name)
        return _compared_as_jsonb(found) if found is not None else None


class _KeyOrderKeyTransform(KeyTransform):
    """A key of a :class:`KeyOrderJSONField` (read as ``json``, keys in their order); its
    lookups compare it read as ``jsonb``."""

    def get_lookup(self, lookup_name: str) -> Any:
        found = super().get_lookup(lookup_name)
        return _compared_as_jsonb(found) if found is not None else None


class _ReadAsJsonb:
    """A lookup that, on PostgreSQL, reads its left-hand side as ``jsonb`` when that is a
    :class:`KeyOrderJSONField`'s ``json`` (the column, or one of its keys): the comparisons,
    containment and key tests of a JSONField are ``jsonb``'s. A key read as text (``->>``, the
    text lookups') is left alone."""

    lhs: Any

    def as_postgresql(self, compiler: Any, connection: BaseDatabaseWrapper) -> Any:
        lookup = self
        if isinstance(getattr(self.lhs, "output_field", None), KeyOrderJSONField):
            lookup = copy.copy(self)
            lookup.lhs = Cast(self.lhs, models.JSONField())
        parent: Any = super(_ReadAsJsonb, lookup)
        vendor = getattr(parent, "as_postgresql", None)
        if vendor is not None:
            return vendor(compiler, connection)
        return parent.as_sql(compiler, connection)


#: Each lookup class as :func:`_compared_as_jsonb` gives it (made once).
_AS_JSONB: dict[type[Any], type[Any]] = {}


def _compared_as_jsonb(lookup: type[Any]) -> type[Any]:
    """``lookup`` reading a ``json`` left-hand side as ``jsonb`` on PostgreSQL
    (:class:`_ReadAsJsonb`)."""
    if issubclass(lookup, _ReadAsJsonb):
        return lookup
    made = _AS_JSONB.get(lookup)
    if made is None:
        made = _AS_JSONB.setdefault(lookup, type(lookup.__name__, (_ReadAsJsonb, lookup), {}))
    return made

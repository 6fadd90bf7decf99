"""Message.data and ToolSet.data keep each object's keys in the order they were sent: on
PostgreSQL their columns become ``json`` (the text as written) instead of ``jsonb`` (keys sorted,
shorter first). Rows stored before keep the order jsonb gave them: the cast writes jsonb's text.
The column's table is rewritten under an exclusive lock (ingest waits until it is done). SQLite
stores JSON as text already: nothing changes there (the table is not rebuilt)."""

from typing import Any

from django.db import migrations

import ctxweb.contexts.fields

#: The models whose ``data`` column changes.
MODELS = ("message", "toolset")


def _retype(apps: Any, schema_editor: Any, kind: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for name in MODELS:
        meta = apps.get_model("contexts", name)._meta
        column = quote(meta.get_field("data").column)
        schema_editor.execute(
            f"ALTER TABLE {quote(meta.db_table)}"
            f" ALTER COLUMN {column} TYPE {kind} USING {column}::{kind}"
        )


def to_json(apps: Any, schema_editor: Any) -> None:
    _retype(apps, schema_editor, "json")


def to_jsonb(apps: Any, schema_editor: Any) -> None:
    _retype(apps, schema_editor, "jsonb")


class Migration(migrations.Migration):
    dependencies = [
        ("contexts", "0012_turn_occurred_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=name,
                    name="data",
                    field=ctxweb.contexts.fields.KeyOrderJSONField(),
                )
                for name in MODELS
            ],
            database_operations=[migrations.RunPython(to_json, to_jsonb)],
        ),
    ]

"""A session says how many of its turns its attribution rollups hold: a turn posted over HTTP is
attributed after its answer is sent. Every stored turn was attributed at ingest until now."""

from typing import Any

from django.db import migrations, models


def attributed_all(apps: Any, schema_editor: Any) -> None:
    apps.get_model("contexts", "Session").objects.update(attributed_turns=models.F("turn_count"))


class Migration(migrations.Migration):
    dependencies = [
        ("contexts", "0013_key_order_json"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="attributed_turns",
            field=models.PositiveIntegerField(
                default=0,
                help_text="its first turns that the attribution rollups hold (the rest are attributed after their answers: services.attribution.attribution_catch_up)",
            ),
        ),
        migrations.RunPython(attributed_all, migrations.RunPython.noop, elidable=True),
    ]

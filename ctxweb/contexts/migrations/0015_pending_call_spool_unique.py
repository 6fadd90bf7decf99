"""One queued row a spooled call: two recorders sweeping at once (both start with their web
process) could each queue the same call a dead relay left, and the second row, once the first
was recorded, became a false unread call ("the recording's files are gone"). Rows queued twice
before this are dropped first, keeping the first of each."""

from typing import Any

from django.db import migrations, models


def drop_queued_twice(apps: Any, schema_editor: Any) -> None:
    pending = apps.get_model("contexts", "PendingCall")
    first: dict[str, int] = {}
    twice = []
    for pk, spool in pending.objects.order_by("pk").values_list("pk", "spool"):
        if spool in first:
            twice.append(pk)
        else:
            first[spool] = pk
    pending.objects.filter(pk__in=twice).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("contexts", "0014_session_attributed_turns"),
    ]

    operations = [
        migrations.RunPython(drop_queued_twice, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name="pendingcall",
            constraint=models.UniqueConstraint(fields=("spool",), name="pending_call_spool"),
        ),
    ]

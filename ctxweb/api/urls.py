"""REST routes under /api/v1/.

Session ids may hold slashes (an import's ``prefix``, ``tau/task-0``), so they use the ``path``
converter and the bare session route comes after every longer one.
"""

from django.urls import path

from ctxweb.api import (
    artifacts,
    attribution,
    audit,
    health,
    imports,
    operations,
    replays,
    sessions,
    strategies,
    turns,
    unread,
)

urlpatterns = [
    # First, as Django tries the patterns in order: agents post turns on every model call.
    path("sessions/<path:external_id>/turns", turns.TurnsApi.as_view(), name="api-turns"),
    path(
        "sessions/<path:external_id>/operations",
        operations.SessionOperationsApi.as_view(),
        name="api-operations",
    ),
    path(
        "sessions/<path:external_id>/replays",
        replays.SessionReplaysApi.as_view(),
        name="api-replays",
    ),
    path(
        "sessions/<path:external_id>/replays/<str:replay_id>",
        replays.ReplayDetailApi.as_view(),
        name="api-replay",
    ),
    path(
        "sessions/<path:external_id>/replays/<str:replay_id>/apply",
        replays.ReplayApplyApi.as_view(),
        name="api-replay-apply",
    ),
    path(
        "sessions/<path:external_id>/replay-presets",
        replays.ReplayPresetsApi.as_view(),
        name="api-replay-presets",
    ),
    path(
        "sessions/<path:external_id>/export",
        sessions.SessionExportApi.as_view(),
        name="api-session-export",
    ),
    path(
        "sessions/<path:external_id>/context",
        operations.ManagedContextApi.as_view(),
        name="api-managed-context",
    ),
    path(
        "sessions/<path:external_id>/unread-calls",
        unread.SessionUnreadCallListApi.as_view(),
        name="api-session-unread-calls",
    ),
    path("unread-calls", unread.UnreadCallListApi.as_view(), name="api-unread-calls"),
    path(
        "unread-calls/<str:unread_id>/raw",
        unread.UnreadCallRawApi.as_view(),
        name="api-unread-call-raw",
    ),
    path(
        "operations/<int:operation_id>",
        operations.OperationDetailApi.as_view(),
        name="api-operation",
    ),
    path(
        "operations/<int:operation_id>/undo",
        operations.OperationUndoApi.as_view(),
        name="api-operation-undo",
    ),
    path("health", health.HealthApi.as_view(), name="api-health"),
    path("project", replays.ProjectApi.as_view(), name="api-project"),
    path("audit", audit.AuditListApi.as_view(), name="api-audit"),
    path("import", imports.ImportApi.as_view(), name="api-import"),
    path("imports", imports.ImportListApi.as_view(), name="api-imports"),
    path("imports/<str:job_id>", imports.ImportDetailApi.as_view(), name="api-import-detail"),
    path("sessions", sessions.SessionListApi.as_view(), name="api-sessions"),
    path("overview", attribution.OverviewApi.as_view(), name="api-overview"),
    path("overview/items", attribution.OverviewItemsApi.as_view(), name="api-overview-items"),
    path(
        "sessions/<path:external_id>/turns/<int:index>/attribution",
        turns.TurnAttributionApi.as_view(),
        name="api-turn-attribution",
    ),
    path(
        "sessions/<path:external_id>/turns/<int:index>",
        turns.TurnDetailApi.as_view(),
        name="api-turn",
    ),
    # after the turn's attribution: a turn's path ends with .../turns/<n>/attribution too
    path(
        "sessions/<path:external_id>/attribution",
        attribution.SessionAttributionApi.as_view(),
        name="api-session-attribution",
    ),
    path("strategies", strategies.StrategyListApi.as_view(), name="api-strategies"),
    path("preview", strategies.PreviewApi.as_view(), name="api-preview"),
    path(
        "sessions/<path:external_id>/preview",
        strategies.SessionPreviewApi.as_view(),
        name="api-session-preview",
    ),
    path("sessions/<path:external_id>", operations.SessionApi.as_view(), name="api-session"),
    path(
        "artifacts/<str:artifact_id>",
        artifacts.ArtifactDownloadApi.as_view(),
        name="api-artifact",
    ),
]

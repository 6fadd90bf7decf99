"""REST routes under /api/v1/.

Session ids may hold slashes (an import's ``prefix``, ``tau/task-0``), so they use the ``path``
converter and the bare session route comes after every longer one.
"""

from django.urls import path

from ctxweb.contexts import apis, apis_import, apis_operations
from ctxweb.contexts import apis_strategies as strategy_apis

urlpatterns = [
    path(
        "sessions/<path:external_id>/operations",
        apis_operations.OperationCreateApi.as_view(),
        name="api-operations",
    ),
    path(
        "sessions/<path:external_id>/context",
        apis_operations.ManagedContextApi.as_view(),
        name="api-managed-context",
    ),
    path(
        "operations/<int:operation_id>",
        apis_operations.OperationDetailApi.as_view(),
        name="api-operation",
    ),
    path(
        "operations/<int:operation_id>/undo",
        apis_operations.OperationUndoApi.as_view(),
        name="api-operation-undo",
    ),
    path("health", apis.HealthApi.as_view(), name="api-health"),
    path("import", apis_import.ImportApi.as_view(), name="api-import"),
    path("sessions", apis.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<path:external_id>/turns", apis.TurnsApi.as_view(), name="api-turns"),
    path(
        "sessions/<path:external_id>/turns/<int:index>",
        apis.TurnDetailApi.as_view(),
        name="api-turn",
    ),
    path("strategies", strategy_apis.StrategyListApi.as_view(), name="api-strategies"),
    path("preview", strategy_apis.PreviewApi.as_view(), name="api-preview"),
    path(
        "sessions/<path:external_id>/preview",
        strategy_apis.SessionPreviewApi.as_view(),
        name="api-session-preview",
    ),
    path("sessions/<path:external_id>", apis_operations.SessionApi.as_view(), name="api-session"),
    path(
        "artifacts/<str:artifact_id>",
        strategy_apis.ArtifactDownloadApi.as_view(),
        name="api-artifact",
    ),
]

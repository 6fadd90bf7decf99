"""Dashboard pages: the sessions list, a session's chart, a turn's inspector, a strategy preview
and its Apply form, a session's replays, its attribution, the project overview, an artifact,
transcript imports, the project switcher.

Session ids may hold slashes (``import/...``), so every longer session route comes before the
bare session page.
"""

from django.urls import path

from ctxweb.front import (
    artifacts,
    attribution,
    deletion,
    imports,
    operations,
    preview,
    projects,
    replays,
    sessions,
    setup,
    turns,
    unread,
)

urlpatterns = [
    path("", sessions.session_list, name="home"),
    path("accounts/project/", projects.project_switch, name="project-switch"),
    path("imports/", imports.import_list, name="imports"),
    path("setup/", setup.setup, name="setup"),
    path("overview/", attribution.overview, name="overview"),
    path("overview/items/", attribution.overview_items, name="overview-items"),
    path(
        "sessions/<path:external_id>/attribution/",
        attribution.session_attribution,
        name="session-attribution",
    ),
    path("sessions/<path:external_id>/preview/", preview.session_preview, name="session-preview"),
    path(
        "sessions/<path:external_id>/operations/",
        operations.operation_apply,
        name="session-operation-apply",
    ),
    path(
        "sessions/<path:external_id>/delete/",
        deletion.session_delete,
        name="session-delete",
    ),
    path(
        "sessions/<path:external_id>/replays/<str:replay_id>/apply/",
        replays.replay_apply,
        name="session-replay-apply",
    ),
    path(
        "sessions/<path:external_id>/replays/<str:replay_id>/",
        replays.replay_detail,
        name="session-replay",
    ),
    path("sessions/<path:external_id>/replays/", replays.replay_list, name="session-replays"),
    path("artifacts/<str:artifact_id>/", artifacts.artifact_detail, name="artifact-detail"),
    path("unread-calls/<str:unread_id>/raw/", unread.unread_call_raw, name="unread-call-raw"),
    path(
        "sessions/<path:external_id>/unread-calls/<str:unread_id>/raw/",
        unread.session_unread_call_raw,
        name="session-unread-call-raw",
    ),
    path(
        "sessions/<path:external_id>/turns/<int:index>/",
        turns.turn_detail,
        name="turn-detail",
    ),
    path("sessions/<path:external_id>/turns/", turns.turn_jump, name="turn-jump"),
    path("sessions/<path:external_id>/", sessions.session_detail, name="session-detail"),
]

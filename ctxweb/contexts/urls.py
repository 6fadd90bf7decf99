"""Dashboard pages: the sessions list, a session's chart, a turn's inspector.

Session ids may hold slashes (``import/...``), so the turn routes come first.
"""

from django.urls import path

from ctxweb.contexts import views

urlpatterns = [
    path("", views.session_list, name="home"),
    path(
        "sessions/<path:external_id>/turns/<int:index>/",
        views.turn_detail,
        name="turn-detail",
    ),
    path("sessions/<path:external_id>/turns/", views.turn_jump, name="turn-jump"),
    path("sessions/<path:external_id>/", views.session_detail, name="session-detail"),
]

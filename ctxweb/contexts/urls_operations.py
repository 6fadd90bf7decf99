"""Pages of operations: the preview page's Apply form posts here."""

from django.urls import path

from ctxweb.contexts import views_operations

urlpatterns = [
    path(
        "sessions/<path:external_id>/operations/",
        views_operations.operation_apply,
        name="session-operation-apply",
    ),
]

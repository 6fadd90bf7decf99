"""The project's URLs: pages, the REST API under /api/v1/, its schema and docs, the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from ctxweb.accounts import views as account_views

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/project/", account_views.project_switch, name="project-switch"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("ctxweb.contexts.api_urls")),
    # The preview pages before the dashboard's: its session routes take ids with slashes.
    path("", include("ctxweb.contexts.urls_preview")),
    path("", include("ctxweb.contexts.urls_operations")),
    path("", include("ctxweb.contexts.urls")),
]

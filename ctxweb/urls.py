"""The project's URLs: pages, the REST API under /api/v1/, its schema and docs, the OTLP
receiver (/v1/traces, /api/public/otel/v1/traces), the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    # First: Django tries the patterns in order, and agents post turns on every model call.
    path("api/v1/", include("ctxweb.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("ctxweb.capture.urls")),
    path("", include("ctxweb.proxy.urls")),
    path("", include("ctxweb.front.urls")),
]

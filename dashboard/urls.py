from django.contrib import admin
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, register_converter

from dashboard import openapi
from dashboard.converters import RowId

# Before the apps' URL modules are read: they use <id:...> for every number in a path.
register_converter(RowId, "id")


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico where a page names no icon (the admin's pages, JSON, raw reports)."""
    return HttpResponsePermanentRedirect(static("perfwatch/favicon.svg"))


urlpatterns = [
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon, name="favicon"),
    # Sign-out is a POST (a form in every page's header); it returns to the page it was sent from.
    # Sign-in in the site's own look; it returns to the page it was sent from (`next`).
    path("accounts/login/", LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", LogoutView.as_view(next_page="web:overview"), name="logout"),
    path("api/schema/", openapi.schema, name="api-schema"),
    path("api/", include("dashboard.benchmarks.urls")),
    path("", include("dashboard.regressions.urls")),
    path("", include("dashboard.github.urls")),
    path("", include("dashboard.web.urls")),
]

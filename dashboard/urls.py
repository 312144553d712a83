from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.benchmarks.urls")),
    path("", include("dashboard.regressions.urls")),
    path("", include("dashboard.github.urls")),
    path("", include("dashboard.web.urls")),
]

from django.urls import path

from dashboard.benchmarks import api

urlpatterns = [
    path("runs/", api.runs_create, name="api-runs-create"),
    path("commits/<str:sha>/measurements/", api.commit_measurements, name="api-commit-measurements"),
]

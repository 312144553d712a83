from django.urls import path

from dashboard.benchmarks import api, profile_views, runner_api

urlpatterns = [
    path("runs/", api.runs_create, name="api-runs-create"),
    path("commits/<str:sha>/measurements/", api.commit_measurements, name="api-commit-measurements"),
    path("runner/presence/", runner_api.presence, name="api-runner-presence"),
    path("runner/runs/<id:run_id>/claim/", runner_api.run_claim, name="api-runner-claim"),
    path("runner/runs/<id:run_id>/heartbeat/", runner_api.run_heartbeat, name="api-runner-heartbeat"),
    path("runner/runs/<id:run_id>/stage/", runner_api.run_stage, name="api-runner-stage"),
    path("runner/runs/<id:run_id>/complete/", runner_api.run_complete, name="api-runner-complete"),
    path("runner/runs/<id:run_id>/fail/", runner_api.run_fail, name="api-runner-fail"),
    path("runner/runs/<id:run_id>/profile/", runner_api.run_profile, name="api-runner-profile"),
    path("runs/<id:run_id>/profile/trace/", profile_views.run_profile_trace, name="run-profile-trace"),
]

from django.urls import path

from dashboard.web import api, compare_views, pull_views, run_views, tracking_views, views

app_name = "web"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("overview/cards/", views.overview_card, name="overview-card"),
    path("search/", views.search_page, name="search"),
    path("suites/", views.suites, name="suites"),
    path("suites/<slug:suite>/", views.suite_timeline, name="suite-timeline"),
    path("commits/<str:sha>/", views.commit_detail, name="commit"),
    path("commits/<str:sha>/measurements/", views.commit_block, name="commit-block"),
    path("commits/<str:sha>/runs/", views.commit_runs, name="commit-runs"),
    path("runs/", run_views.runs, name="runs"),
    path("runs/<id:run_id>/", run_views.run_detail, name="run"),
    path("runs/<id:run_id>/report.json", run_views.run_report, name="run-report"),
    path("runs/<id:run_id>/retry/", run_views.run_retry, name="run-retry"),
    path("runs/<id:run_id>/cancel/", run_views.run_cancel, name="run-cancel"),
    path("runners/", run_views.runners, name="runners"),
    path("tracking/", tracking_views.tracking_issues, name="tracking-issues"),
    path(
        "tracking/<str:owner>/<str:repo>/<id:number>/", tracking_views.tracking_issue, name="tracking-issue"
    ),
    path("prs/<id:number>/", pull_views.pull_request, name="pull-request"),
    path(
        "api/prs/<id:number>/figures/<slug:suite>/<slug:metric>/",
        pull_views.pull_request_figure,
        name="pull-request-figure",
    ),
    path("compare/", compare_views.compare, name="compare"),
    path("api/suites/<slug:suite>/series/", api.suite_series, name="suite-series"),
    path("api/suites/<slug:suite>/timeline/", api.suite_timeline, name="suite-timeline-data"),
    path("api/suites/<slug:suite>/figures/<slug:metric>/", api.suite_figure, name="suite-figure"),
    path("api/runs/live/", run_views.runs_live, name="runs-live"),
    path("api/runs/<id:run_id>/live/", run_views.run_live, name="run-live"),
    path("api/runs/<id:run_id>/figures/telemetry/", run_views.run_telemetry, name="run-telemetry"),
]

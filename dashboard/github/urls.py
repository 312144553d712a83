from django.urls import path

from dashboard.github import views

app_name = "github"

urlpatterns = [
    path("github/webhook/", views.webhook, name="webhook"),
    path("tracking/", views.tracking_issues, name="tracking-issues"),
    path("tracking/<str:owner>/<str:repo>/<id:number>/", views.tracking_issue, name="tracking-issue"),
    path("prs/<id:number>/", views.pull_request, name="pull-request"),
    path(
        "api/prs/<id:number>/figures/<slug:suite>/<slug:metric>/",
        views.pull_request_figure,
        name="pull-request-figure",
    ),
    path("compare/", views.compare, name="compare"),
]

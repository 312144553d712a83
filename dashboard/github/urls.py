from django.urls import path

from dashboard.github import views

app_name = "github"

urlpatterns = [
    path("github/webhook/", views.webhook, name="webhook"),
    path("tracking/", views.tracking_issues, name="tracking-issues"),
    path("tracking/<str:owner>/<str:repo>/<int:number>/", views.tracking_issue, name="tracking-issue"),
    path("prs/<int:number>/", views.pull_request, name="pull-request"),
    path(
        "api/prs/<int:number>/figures/<slug:suite>/<slug:metric>/",
        views.pull_request_figure,
        name="pull-request-figure",
    ),
    path("compare/", views.compare, name="compare"),
]

from django.urls import path

from dashboard.web import api, views

app_name = "web"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("suites/", views.suites, name="suites"),
    path("suites/<slug:suite>/", views.suite_timeline, name="suite-timeline"),
    path("commits/<str:sha>/", views.commit_detail, name="commit"),
    path("api/suites/<slug:suite>/figures/<slug:metric>/", api.suite_figure, name="suite-figure"),
]

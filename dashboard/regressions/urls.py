from django.urls import path

from dashboard.regressions import api, profile_api, views

app_name = "regressions"

urlpatterns = [
    path("alerts/", views.alerts, name="alerts"),
    path("alerts/feed/", views.AlertsFeed(), name="alerts-feed"),
    path("alerts/precision/", views.precision, name="precision"),
    path("alerts/<id:group_id>/", views.alert_group, name="alert-group"),
    path("alerts/<id:group_id>/triage/", views.alert_group_triage, name="alert-group-triage"),
    path("alerts/<id:group_id>/status/", views.alert_group_status, name="alert-group-status"),
    path("alerts/<id:group_id>/comments/", views.alert_group_comment, name="alert-group-comment"),
    path(
        "alerts/<id:group_id>/notifications/<id:notification_id>/resend/",
        views.notification_resend,
        name="notification-resend",
    ),
    path("api/alerts/", api.alerts_list, name="api-alerts"),
    path(
        "api/alerts/<id:group_id>/profile/", profile_api.alert_group_profile, name="api-alert-group-profile"
    ),
    path("api/alerts/<id:alert_id>/figure/", views.alert_figure_json, name="alert-figure"),
]

from django.urls import path

from dashboard.github import views

app_name = "github"

urlpatterns = [
    path("github/webhook/", views.webhook, name="webhook"),
]

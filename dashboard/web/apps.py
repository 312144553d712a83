from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "dashboard.web"
    label = "web"

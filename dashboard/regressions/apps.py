from django.apps import AppConfig


class RegressionsConfig(AppConfig):
    name = "dashboard.regressions"
    label = "regressions"

from django.apps import AppConfig


class GithubConfig(AppConfig):
    name = "dashboard.github"
    label = "github"
